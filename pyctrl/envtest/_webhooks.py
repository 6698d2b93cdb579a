"""Admission webhook configurations pointed at a local webhook server (controller-runtime envtest
``WebhookInstallOptions``).

``Environment.install_webhooks`` takes Mutating/ValidatingWebhookConfigurations as written for a
cluster (``clientConfig.service`` with a path) and rewrites every webhook's ``clientConfig`` to
``https://127.0.0.1:<port><path>`` with the envtest CA as ``caBundle``; it issues a serving
certificate for 127.0.0.1/localhost from that CA into a directory laid out as the webhook server
expects (``tls.crt``, ``tls.key``) and returns where the server must listen. CRDs named in
``conversion_crds`` get their conversion webhook pointed at ``/convert`` on that server (as
controller-runtime's envtest does for CRDs with a ``Webhook`` conversion strategy).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pyctrl.envtest._certs import Pki
from pyctrl.envtest._errors import EnvtestError
from pyctrl.envtest._http import AdminHTTP, ApiError
from pyctrl.envtest._manifests import load_manifests

__all__ = [
    "CONFIGURATION_KINDS",
    "WebhookInstallOptions",
    "install_webhooks",
    "point_at_local_server",
    "uninstall_webhooks",
]

#: kind -> plural of the admissionregistration.k8s.io/v1 resources this handles
CONFIGURATION_KINDS = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
}


@dataclass(frozen=True)
class WebhookInstallOptions:
    """Where the test's webhook server must listen, and what was installed."""

    local_serving_host: str
    local_serving_port: int
    local_serving_cert_dir: Path
    ca_data: bytes
    configurations: tuple[tuple[str, str], ...]  # (kind, name), CRDs included


def point_at_local_server(config: dict[str, Any], host: str, port: int, ca_data: bytes) -> dict[str, Any]:
    """A copy of ``config`` whose webhooks call ``https://host:port<their path>``."""
    kind = config.get("kind")
    if kind not in CONFIGURATION_KINDS:
        raise ValueError(f"not a webhook configuration: {kind!r}")
    out = copy.deepcopy(config)
    for webhook in out.get("webhooks") or []:
        client = webhook.get("clientConfig") or {}
        if "service" in client:
            path = client["service"].get("path") or "/"
        elif "url" in client:
            path = urlsplit(client["url"]).path or "/"
        else:
            raise ValueError(f"webhook {webhook.get('name')!r} has neither clientConfig.service nor url")
        webhook["clientConfig"] = {
            "url": f"https://{host}:{port}{path}",
            "caBundle": base64.b64encode(ca_data).decode(),
        }
    return out


def _path(kind: str, name: str) -> str:
    return f"/apis/admissionregistration.k8s.io/v1/{CONFIGURATION_KINDS[kind]}/{name}"


def _crd_path(name: str) -> str:
    return f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"


def install_webhooks(
    http: AdminHTTP,
    pki: Pki,
    cert_root: Path,
    configurations: Iterable[Path | str | dict[str, Any]],
    *,
    conversion_crds: Iterable[str],
    port: int,
) -> WebhookInstallOptions:
    """Issue the serving certificate, server-side apply each configuration pointed at
    127.0.0.1:``port``, and point the conversion webhook of each named CRD at ``/convert`` there
    (see ``Environment.install_webhooks``)."""
    given = list(configurations)
    docs = [c for c in given if isinstance(c, dict)]
    docs += load_manifests(c for c in given if not isinstance(c, dict))
    docs = [d for d in docs if d.get("kind") in CONFIGURATION_KINDS]
    crds = list(conversion_crds)
    if not docs and not crds:
        raise EnvtestError(
            "no MutatingWebhookConfiguration or ValidatingWebhookConfiguration given, and no CRD to convert"
        )
    cert_dir = cert_root / str(port)
    pki.issue_serving_cert(cert_dir)
    ca = pki.ca_cert.read_bytes()
    installed = []
    for doc in docs:
        local = point_at_local_server(doc, "127.0.0.1", port, ca)
        kind, name = local["kind"], local["metadata"]["name"]
        http.request(
            "PATCH",
            _path(kind, name) + "?fieldManager=envtest&force=true",
            json.dumps(local).encode(),
            content_type="application/apply-patch+yaml",
        )
        installed.append((kind, name))
    for name in crds:
        conversion = {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": None,
                    "url": f"https://127.0.0.1:{port}/convert",
                    "caBundle": base64.b64encode(ca).decode(),
                },
            },
        }
        http.request(
            "PATCH",
            _crd_path(name),
            json.dumps({"spec": {"conversion": conversion}}).encode(),
            content_type="application/merge-patch+json",
        )
        installed.append(("CustomResourceDefinition", name))
    return WebhookInstallOptions("127.0.0.1", port, cert_dir, ca, tuple(installed))


def uninstall_webhooks(http: AdminHTTP, options: WebhookInstallOptions) -> None:
    for kind, name in options.configurations:
        try:
            if kind == "CustomResourceDefinition":  # keep the CRD, stop calling the gone server
                body = {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
                http.request(
                    "PATCH",
                    _crd_path(name),
                    json.dumps(body).encode(),
                    content_type="application/merge-patch+json",
                )
            else:
                http.request("DELETE", _path(kind, name))
        except ApiError as exc:
            if exc.code != 404:
                raise
