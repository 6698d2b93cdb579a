"""Admission webhooks: the HTTPS server and the defaulting/validating handlers
(controller-runtime ``pkg/webhook`` and ``pkg/webhook/admission``).

Most operators use ``pyctrl.builder.WebhookBuilder``::

    WebhookBuilder(mgr).for_(RedisCluster).with_defaulter(d).with_validator(v).complete()

which registers ``/mutate-<group>-<version>-<kind>`` and ``/validate-<group>-<version>-<kind>``
(dots in the group become dashes, the kind lower-cased: controller-runtime's paths) on the
manager's webhook server, and ``/convert`` (``ConversionHandler``) when the kind has several
versions in the manager's scheme, one of them a ``pyctrl.conversion.Hub``.
"""

from pyctrl.webhook.admission import (
    AdmissionRequest,
    AdmissionResponse,
    CustomDefaulter,
    CustomValidator,
    Handler,
    allowed,
    denied,
    errored,
    patch_response_from_raw,
    with_custom_defaulter,
    with_custom_validator,
)
from pyctrl.webhook.conversion import ConversionHandler
from pyctrl.webhook.server import Server, WebhookError

__all__ = [
    "AdmissionRequest",
    "AdmissionResponse",
    "ConversionHandler",
    "CustomDefaulter",
    "CustomValidator",
    "Handler",
    "Server",
    "WebhookError",
    "allowed",
    "denied",
    "errored",
    "patch_response_from_raw",
    "with_custom_defaulter",
    "with_custom_validator",
]
