"""Pod Security "restricted" for every pod the operator makes: the securityContexts of the Redis
pods (both modes, their init containers and the exporter sidecar) and of the backup, restore and
delete Jobs, as pure functions (no I/O).

Guarantees (each pod passes the apiserver's PodSecurity admission at ``enforce=restricted``,
tested in tests/operator/test_podsecurity.py on the real apiserver):

- the pod runs as a fixed non-root user: ``runAsNonRoot``, ``runAsUser``/``runAsGroup``
  :data:`REDIS_UID` for Redis pods (the redis image's ``redis`` user, 999:999; the restore init
  container, from the operator's image, runs as that user too, so the ``dump.rdb`` it writes is
  Redis's), :data:`WORKER_UID` for Jobs (the operator image's ``USER 65532:65532``);
  ``fsGroup`` the same gid, so emptyDir and PersistentVolumeClaim volumes are writable by it;
- ``seccompProfile: RuntimeDefault`` for the whole pod;
- every container, init containers included: ``allowPrivilegeEscalation: false``, every
  capability dropped, a read-only root filesystem (Redis writes only ``/data``; a ``/tmp``
  emptyDir is there for the shell and ``redis-cli``);
- ``automountServiceAccountToken: false``: neither Redis nor the worker talks to the apiserver.

The local node applies the uid, gid and groups, ``no_new_privs`` and the read-only root; it does
not install seccomp filters (docs/local-node.md says what it enforces).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "REDIS_UID",
    "TMP_MOUNT",
    "TMP_VOLUME",
    "WORKER_UID",
    "container_security_context",
    "pod_security_context",
    "restrict_pod",
]

#: the uid and gid of the official redis image's ``redis`` user
REDIS_UID: Final = 999
#: the uid and gid of the operator's image (``USER 65532:65532`` in the Dockerfile)
WORKER_UID: Final = 65532
TMP_VOLUME: Final = "tmp"
TMP_MOUNT: Final = {"name": TMP_VOLUME, "mountPath": "/tmp"}


def pod_security_context(uid: int) -> dict[str, Any]:
    """The pod-level securityContext: non-root ``uid``:``uid``, ``fsGroup`` ``uid``, RuntimeDefault."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """Every container's securityContext (the user comes from the pod's)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def restrict_pod(pod: dict[str, Any], uid: int) -> dict[str, Any]:
    """``pod`` (a PodSpec as a dict, changed in place and returned) made "restricted": the pod's
    securityContext, no service-account token, a ``/tmp`` emptyDir, and each container's and init
    container's securityContext (a container's own keys, e.g. the exporter's user, are kept)."""
    pod["securityContext"] = pod_security_context(uid)
    pod["automountServiceAccountToken"] = False
    volumes = pod.setdefault("volumes", [])
    if not any(v["name"] == TMP_VOLUME for v in volumes):
        volumes.append({"name": TMP_VOLUME, "emptyDir": {}})
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        container["securityContext"] = {
            **container_security_context(),
            **container.get("securityContext", {}),
        }
        mounts = container.setdefault("volumeMounts", [])
        if not any(m["mountPath"] == "/tmp" for m in mounts):
            mounts.append(dict(TMP_MOUNT))
    return pod
