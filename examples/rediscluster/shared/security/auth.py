"""The password of a RedisCluster (``spec.auth.passwordSecret``).

:func:`read_password` reads the Secret through the API reader (Secrets are not cached); a missing
Secret or key is an Event ``SecretMissing`` and an error (a missing key is terminal: only an edit of
the Secret or the spec fixes it). The value is never logged.
"""

from __future__ import annotations

import base64

from examples.rediscluster.api import RedisCluster
from pyctrl import TerminalError
from pyctrl.client import Reader, Secret
from pyctrl.client.errors import NotFound
from pyctrl.recorder import EventRecorder

__all__ = ["read_password"]


async def read_password(api_reader: Reader, recorder: EventRecorder, cluster: RedisCluster) -> str | None:
    """The cluster's password from its Secret, or None without ``spec.auth``."""
    auth = cluster.spec.auth
    if auth is None:
        return None
    ref = auth.password_secret
    try:
        secret = await api_reader.get(Secret, ref.name, namespace=cluster.namespace)
    except NotFound:
        recorder.event(cluster, "Warning", "SecretMissing", f"Secret {ref.name} not found")
        raise
    value = (secret.data or {}).get(ref.key)
    if value is None:
        msg = f"Secret {ref.name} has no key {ref.key!r}"
        recorder.event(cluster, "Warning", "SecretMissing", msg)
        raise TerminalError(msg)
    return base64.b64decode(value).decode()
