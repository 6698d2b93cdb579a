"""The password of a RedisCluster: its own Secret, or one the operator generates.

- :func:`password_ref`: which Secret key holds it — the spec's ``auth.passwordSecret``, else (for
  ``auth: {}``) the Secret ``<name>-auth`` (key ``password``) the operator generates
  (:func:`ensure_generated`), also when ``auth`` is omitted (the default); None only with
  ``auth: {enabled: false}``;
- :func:`ensure_generated`: creates ``<name>-auth`` once, with 32 random bytes (URL-safe base64)
  and this cluster's controller reference; an existing one is kept as it is. A Secret of that
  name this cluster does not control is never adopted or changed: an Event ``Conflict`` naming
  it and :class:`SecretUnusable` (the reconcile applies nothing);
- :func:`read_password` reads the Secret with a GET through the API reader (the operator neither
  caches nor watches Secrets: its RBAC has no Secret list/watch); a missing Secret or key is an
  Event ``SecretMissing``, a value that cannot be a password (:func:`password_problem`) an Event
  ``InvalidPassword`` saying why (never the value); both raise :class:`SecretUnusable`, which the
  reconciler answers by looking again after ``SECRET_POLL`` seconds (no watch tells it when the
  Secret is fixed). The value is never logged.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

from examples.rediscluster.api import RedisCluster, RedisClusterSpec
from pyctrl.client import Client, Reader, Secret
from pyctrl.client.errors import AlreadyExists, NotFound
from pyctrl.controllerutil import set_controller_reference
from pyctrl.recorder import EventRecorder

__all__ = [
    "GENERATED_KEY",
    "MAX_PASSWORD_BYTES",
    "SECRET_POLL",
    "SecretUnusable",
    "auth_enabled",
    "ensure_generated",
    "generated_secret_name",
    "password_problem",
    "password_ref",
    "read_password",
]

MAX_PASSWORD_BYTES = 4096
GENERATED_KEY = "password"
#: seconds until a reconcile stopped by an unusable Secret looks again (Secrets are not watched)
SECRET_POLL = 10.0


class SecretUnusable(Exception):
    """The password Secret cannot be used (missing, no key, not a password, not ours); the Event
    saying why is recorded. The reconcile applies nothing and looks again after ``SECRET_POLL``."""


def auth_enabled(spec: RedisClusterSpec) -> bool:
    """Whether clients and replicas need a password: always, unless ``auth: {enabled: false}``
    (an omitted ``auth`` is ``{}``: a generated password)."""
    return spec.auth.enabled


def generated_secret_name(cluster: RedisCluster) -> str:
    return f"{cluster.name}-auth"


def password_ref(cluster: RedisCluster) -> tuple[str, str] | None:
    """(Secret, key) of the cluster's password; None when auth is disabled."""
    auth = cluster.spec.auth
    if not auth_enabled(cluster.spec):
        return None
    if auth.password_secret is not None:
        return auth.password_secret.name, auth.password_secret.key
    return generated_secret_name(cluster), GENERATED_KEY


def _controlled_by(cluster: RedisCluster, secret: Secret) -> bool:
    uid = cluster.metadata.uid
    return any(ref.controller and ref.uid == uid for ref in secret.metadata.owner_references or [])


async def ensure_generated(
    client: Client, api_reader: Reader, recorder: EventRecorder, cluster: RedisCluster
) -> None:
    """Create ``<name>-auth`` when the cluster's password is generated and it does not exist yet
    (module docstring: never adopted, never rewritten)."""
    auth = cluster.spec.auth
    if not auth_enabled(cluster.spec) or auth.password_secret is not None:
        return
    name = generated_secret_name(cluster)
    try:
        existing = await api_reader.get(Secret, name, namespace=cluster.namespace)
    except NotFound:
        existing = None
    if existing is None:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": cluster.namespace,
                "labels": {
                    "app.kubernetes.io/instance": cluster.name,
                    "app.kubernetes.io/managed-by": "pyctrl-rediscluster",
                },
            },
            "type": "Opaque",
            "data": {GENERATED_KEY: base64.b64encode(secrets.token_urlsafe(32).encode()).decode()},
        }
        set_controller_reference(cluster, body)
        try:
            await client.create(body)
        except AlreadyExists:
            existing = await api_reader.get(Secret, name, namespace=cluster.namespace)
        else:
            recorder.event(
                cluster, "Normal", "PasswordGenerated", f"Secret {name} holds the generated password"
            )
            return
    if not _controlled_by(cluster, existing):
        msg = (
            f"Secret {name} exists and is not controlled by this RedisCluster: it is not adopted or "
            "changed (delete or rename it, or set spec.auth.passwordSecret to use it)"
        )
        recorder.event(cluster, "Warning", "Conflict", msg)
        raise SecretUnusable(msg)


async def read_password(api_reader: Reader, recorder: EventRecorder, cluster: RedisCluster) -> str | None:
    """The cluster's password from its Secret, or None when auth is disabled."""
    ref = password_ref(cluster)
    if ref is None:
        return None
    name, key = ref
    try:
        secret = await api_reader.get(Secret, name, namespace=cluster.namespace)
    except NotFound:
        recorder.event(cluster, "Warning", "SecretMissing", f"Secret {name} not found")
        raise SecretUnusable(f"Secret {name} not found") from None
    value = (secret.data or {}).get(key)
    if value is None:
        msg = f"Secret {name} has no key {key!r}"
        recorder.event(cluster, "Warning", "SecretMissing", msg)
        raise SecretUnusable(msg)
    why = password_problem(base64.b64decode(value))
    if why is not None:
        msg = f"Secret {name} key {key!r} {why}"
        recorder.event(cluster, "Warning", "InvalidPassword", msg)
        raise SecretUnusable(msg)
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
