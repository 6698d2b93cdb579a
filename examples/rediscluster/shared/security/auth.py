"""The password of a RedisCluster (``spec.auth.passwordSecret``).

:func:`read_password` reads the Secret through the API reader (Secrets are not cached); a missing
Secret or key is an Event ``SecretMissing`` and an error (a missing key is terminal: only an edit of
the Secret or the spec fixes it); a value that cannot be a password (:func:`password_problem`) is
an Event ``InvalidPassword`` saying why (never the value) and a terminal error. The value is never
logged.
"""

from __future__ import annotations

import base64

from examples.rediscluster.api import RedisCluster
from pyctrl import TerminalError
from pyctrl.client import Reader, Secret
from pyctrl.client.errors import NotFound
from pyctrl.recorder import EventRecorder

__all__ = ["MAX_PASSWORD_BYTES", "password_problem", "read_password"]

MAX_PASSWORD_BYTES = 4096


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
    why = password_problem(base64.b64decode(value))
    if why is not None:
        msg = f"Secret {ref.name} key {ref.key!r} {why}"
        recorder.event(cluster, "Warning", "InvalidPassword", msg)
        raise TerminalError(msg)
    return base64.b64decode(value).decode()


def password_problem(raw: bytes) -> str | None:
    """Why ``raw`` cannot be a Redis password here, or None. Any other bytes work, quoted as data
    all the way (``resources.password_lines``): quotes, backslashes, spaces, ``$``, newlines,
    directives, non-ASCII text. Refused: empty (``requirepass ""`` means no password), a NUL byte
    (an environment variable ends at it: the pod would get a shorter password than the
    operator), bytes that are not UTF-8 (clients send the password as text), over 4096 bytes."""
    if not raw:
        return "is empty"
    if b"\0" in raw:
        return "holds a NUL byte"
    if len(raw) > MAX_PASSWORD_BYTES:
        return f"is longer than {MAX_PASSWORD_BYTES} bytes"
    try:
        raw.decode()
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    return None
