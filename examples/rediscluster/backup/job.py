"""The Kubernetes objects of a backup, as pure functions (no I/O): the backup Job, the deletion Job
of a stored backup, and the restore init container of a RedisCluster's pods.

All run ``python -m examples.rediscluster.backup.worker`` from the operator's image (``image``);
on the local node that image maps to the project's own Python (see docs/local-node.md).

Guarantees:

- the Job's name is a function of the RedisBackup's name (``<backup>-backup``), so an operator
  restarted after creating it finds it instead of starting a second one;
- bounded work: ``backoffLimit`` 1 (two attempts), ``activeDeadlineSeconds`` (default one hour),
  and a podFailurePolicy failing the Job at once on the worker's "permanent" exit code (rejected
  credentials, missing bucket, corrupt backup) — retries are kept for what a retry can fix;
- secrets only by ``secretKeyRef`` in the environment (``REDIS_PASSWORD``, ``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``): argv holds addresses, bucket, key and path, never a credential;
- a TLS cluster's backup connects with TLS and verifies the server against ``ca.crt``, the only
  key of the cluster's TLS Secret the Job mounts (never ``tls.key``);
- the pod has no service-account token (it needs no API access: its result is its termination
  message) and a memory limit (the worker streams; 256 Mi is room to spare);
- Pod Security "restricted" (``shared.security.podsecurity``): the Jobs run as the operator
  image's user (65532), the restore init container as the Redis pod's (999), every container
  with no privilege escalation, no capability, a read-only root filesystem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from examples.rediscluster.api.backup import BackupDestination, RedisBackup
from examples.rediscluster.backup.worker import EXIT_PERMANENT
from examples.rediscluster.shared.security.podsecurity import (
    TMP_MOUNT,
    WORKER_UID,
    container_security_context,
    restrict_pod,
)

__all__ = [
    "BACKUP_LABEL",
    "CLUSTER_LABEL",
    "DEFAULT_DEADLINE_SECONDS",
    "WORKER_COMMAND",
    "RedisLogin",
    "backup_job",
    "delete_job",
    "destination_args",
    "job_name",
    "job_of",
    "object_path",
    "redis_ca_volume",
    "redis_env",
    "restore_init_container",
    "restore_volumes",
    "worker_container",
    "worker_job",
]

BACKUP_LABEL = "redis.pyctrl.dev/backup"
CLUSTER_LABEL = "redis.pyctrl.dev/cluster"
SOURCE_ANNOTATION = "redis.pyctrl.dev/source-pod"
WORKER_COMMAND = ["python", "-m", "examples.rediscluster.backup.worker"]
DEFAULT_DEADLINE_SECONDS = 3600
BACKOFF_LIMIT = 1
PVC_MOUNT = "/backup"
CA_MOUNT = "/etc/redis-backup-ca"
REDIS_CA_MOUNT = "/etc/redis-tls-ca"
_RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}


def job_name(backup_name: str, purpose: str = "backup") -> str:
    return f"{backup_name[: 63 - len(purpose) - 1]}-{purpose}"


def object_path(backup_name: str, namespace: str, destination: BackupDestination) -> str:
    """The S3 key, or the path inside the claim, of a backup."""
    if destination.s3 is not None:
        return f"{destination.s3.prefix}{namespace}/{backup_name}.rdb"
    assert destination.pvc is not None
    return destination.pvc.path or backup_name


def destination_args(backup_name: str, namespace: str, destination: BackupDestination) -> list[str]:
    path = object_path(backup_name, namespace, destination)
    if destination.s3 is not None:
        s3 = destination.s3
        args = ["--s3-endpoint", s3.endpoint, "--s3-bucket", s3.bucket, "--s3-key", path]
        args += ["--s3-region", s3.region]
        if s3.ca_secret is not None:
            args += ["--s3-ca-bundle", f"{CA_MOUNT}/ca.crt"]
        return args
    assert destination.pvc is not None
    return ["--pvc-mount", PVC_MOUNT, "--pvc-claim", destination.pvc.claim_name, "--path", path]


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def redis_env(password_secret: tuple[str, str] | None, username: str | None) -> list[dict[str, Any]]:
    """How the worker logs in to Redis: ``REDIS_PASSWORD`` from the Secret key ``password_secret``
    (never a literal), ``REDIS_USER`` the ACL user it belongs to."""
    env = [] if password_secret is None else [_secret_env("REDIS_PASSWORD", *password_secret)]
    if username is not None:
        env.append({"name": "REDIS_USER", "value": username})
    return env


@dataclass(frozen=True, slots=True)
class RedisLogin:
    """How a backup Job's worker logs in to Redis: the password from the Secret key
    ``password_secret`` (None: no password), as the ACL user ``username`` (None: the default
    user); over TLS verified against ``ca.crt`` of the Secret ``tls_secret`` when that is set."""

    password_secret: tuple[str, str] | None
    tls_secret: str | None = None
    username: str | None = None

    def env(self) -> list[dict[str, Any]]:
        return redis_env(self.password_secret, self.username)

    def ca_args(self) -> list[str]:
        """The worker's ``--tls-ca-file`` (none without TLS)."""
        return [] if self.tls_secret is None else ["--tls-ca-file", f"{REDIS_CA_MOUNT}/ca.crt"]


def redis_ca_volume(tls_secret: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts) of ``ca.crt`` — the only key of the TLS Secret ``tls_secret`` — at
    ``REDIS_CA_MOUNT``; none without TLS."""
    if tls_secret is None:
        return [], []
    items = [{"key": "ca.crt", "path": "ca.crt"}]
    volume = {"name": "redis-tls-ca", "secret": {"secretName": tls_secret, "items": items}}
    return [volume], [{"name": "redis-tls-ca", "mountPath": REDIS_CA_MOUNT, "readOnly": True}]


def destination_env(destination: BackupDestination) -> list[dict[str, Any]]:
    if destination.s3 is None:
        return []
    creds = destination.s3.credentials_secret
    return [
        _secret_env("AWS_ACCESS_KEY_ID", creds.name, creds.access_key_id_key),
        _secret_env("AWS_SECRET_ACCESS_KEY", creds.name, creds.secret_access_key_key),
    ]


def restore_volumes(destination: BackupDestination) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, container volumeMounts) the worker needs for ``destination``."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if destination.pvc is not None:
        volumes.append({"name": "backup", "persistentVolumeClaim": {"claimName": destination.pvc.claim_name}})
        mounts.append({"name": "backup", "mountPath": PVC_MOUNT})
    if destination.s3 is not None and destination.s3.ca_secret is not None:
        volumes.append({"name": "backup-ca", "secret": {"secretName": destination.s3.ca_secret.name}})
        mounts.append({"name": "backup-ca", "mountPath": CA_MOUNT, "readOnly": True})
    return volumes, mounts


def worker_container(
    name: str, args: list[str], env: list[dict[str, Any]], image: str, destination: BackupDestination
) -> dict[str, Any]:
    """A container running the worker with ``args`` (secrets only by reference in ``env``)."""
    _, mounts = restore_volumes(destination)
    return {
        "name": name,
        "image": image,
        "command": WORKER_COMMAND,
        "args": args,
        "env": env + destination_env(destination),
        "volumeMounts": mounts,
        "resources": _RESOURCES,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def job_of(
    backup: RedisBackup,
    purpose: str,
    containers: list[dict[str, Any]],
    *,
    deadline: int,
    init_containers: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The Job ``<backup>-<purpose>`` owned by nobody yet (the caller sets the owner)."""
    labels = {
        "app.kubernetes.io/managed-by": "pyctrl-rediscluster",
        BACKUP_LABEL: backup.name,
        CLUSTER_LABEL: backup.spec.cluster_name,
    }
    pod_volumes, _ = restore_volumes(backup.spec.destination)
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": containers,
        "volumes": pod_volumes + (volumes or []),
    }
    if init_containers:
        pod["initContainers"] = init_containers
    restrict_pod(pod, WORKER_UID)  # Pod Security "restricted", no service-account token
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(backup.name, purpose),
            "namespace": backup.namespace,
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "activeDeadlineSeconds": deadline,
            # every container (init containers too): the worker's "retrying cannot help" exit code
            "podFailurePolicy": {
                "rules": [
                    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [EXIT_PERMANENT]}}
                ]
            },
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def worker_job(
    backup: RedisBackup,
    purpose: str,
    args: list[str],
    env: list[dict[str, Any]],
    image: str,
    *,
    deadline: int,
    annotations: dict[str, str] | None = None,
    redis_tls_secret: str | None = None,
) -> dict[str, Any]:
    """The Job ``<backup>-<purpose>`` of one worker container running ``args``; with
    ``redis_tls_secret``, that Secret's ``ca.crt`` (only) mounted at ``REDIS_CA_MOUNT``."""
    container = worker_container(purpose, args, env, image, backup.spec.destination)
    volumes, mounts = redis_ca_volume(redis_tls_secret)
    container["volumeMounts"] = [*container["volumeMounts"], *mounts]
    return job_of(backup, purpose, [container], deadline=deadline, annotations=annotations, volumes=volumes)


def backup_job(
    backup: RedisBackup,
    source_pod: str,
    source_ip: str,
    image: str,
    login: RedisLogin,
    *,
    deadline: int = DEFAULT_DEADLINE_SECONDS,
) -> dict[str, Any]:
    """The Job taking the RDB from ``source_pod`` (at ``source_ip``) into the backup's destination,
    logged in to Redis as ``login`` says."""
    args = ["backup", "--source-host", source_ip, "--source-port", "6379", *login.ca_args()]
    args += destination_args(backup.name, backup.namespace, backup.spec.destination)
    return worker_job(
        backup,
        "backup",
        args,
        login.env(),
        image,
        deadline=deadline,
        annotations={SOURCE_ANNOTATION: source_pod},
        redis_tls_secret=login.tls_secret,
    )


def delete_job(backup: RedisBackup, image: str) -> dict[str, Any]:
    """The Job removing the stored backup (its RedisBackup is being deleted)."""
    args = ["delete", *destination_args(backup.name, backup.namespace, backup.spec.destination)]
    return worker_job(backup, "delete", args, [], image, deadline=600)


def restore_init_container(backup: RedisBackup, image: str) -> dict[str, Any]:
    """The init container seeding a pod's /data/dump.rdb from ``backup`` (checked before Redis starts)."""
    status = backup.status
    if status is None or status.sha256 is None:
        raise ValueError(f"RedisBackup {backup.name} has not succeeded: nothing to restore")
    args = ["restore", "--target", "/data/dump.rdb", "--sha256", status.sha256]
    if status.size_bytes is not None:
        args += ["--size-bytes", str(status.size_bytes)]
    args += destination_args(backup.name, backup.namespace, backup.spec.destination)
    _, mounts = restore_volumes(backup.spec.destination)
    return {
        "name": "restore",
        "image": image,
        "command": WORKER_COMMAND,
        "args": args,
        "env": destination_env(backup.spec.destination),
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, *mounts, dict(TMP_MOUNT)],
        "resources": _RESOURCES,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        # added to a Redis pod after its template is made "restricted": it runs as the pod's
        # user (Redis's), so the dump.rdb it writes is Redis's
        "securityContext": container_security_context(),
    }
