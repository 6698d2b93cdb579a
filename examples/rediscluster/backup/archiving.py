"""The operator's side of point-in-time recovery: ``spec.backup.archive`` becomes an archiver
sidecar (``backup.archive``) in every pod, its ``/status`` becomes ``status.archive``, the
condition ``ContinuousArchiving`` and the gauge ``rediscluster_archive_lag_seconds``; and
``spec.restoreFrom.pointInTime`` becomes an init container running ``backup.pitr`` before Redis
starts (mirrors CloudNativePG's ``barman-cloud-wal-archive`` sidecar wiring and its
``bootstrap.recovery`` init step).

Guarantees:

- supported where it is sound: ``mode: replication`` with ``enablePersistence`` and an S3
  ``spec.backup.destination``; otherwise (cluster mode included: one archive per shard is not
  built) no sidecar is added and ``ContinuousArchiving`` is False, reason ``ArchiveUnsupported``,
  naming what to change — the cluster itself keeps serving;
- Redis runs with ``appendonly yes`` and ``aof-timestamp-enabled yes`` (``#TS`` annotations,
  the restore's granularity); ``appenddirname``/``appendfilename`` of ``redisConfig`` honoured;
- the sidecar: the operator's image, non-root (uid/gid 65532), no privilege escalation, every
  capability dropped, a read-only root filesystem, the RuntimeDefault seccomp profile; the pod's
  ``fsGroup`` (65532 unless one is set) lets it read Redis' files and keep its state dir on the
  data volume; S3 keys only by ``secretKeyRef`` (never argv); no Kubernetes API access (the pod's
  role reaches it through a downward-API file of the pod's labels, see ``archive``'s role gate);
  its ``/status`` listens on the pod's IP, port :data:`STATUS_PORT`;
- status: the operator reads the master's ``/status`` each reconcile (bounded by a timeout);
  ``ContinuousArchiving`` is True (``Archiving``) while the master's archiver ships with a lag of
  at most 3 * ``archiveTimeoutSeconds`` + 10 s; False with reason ``StoreError`` (the store's
  error, as the archiver words it: no credential is ever in it), ``Lagging``, ``Starting``,
  ``ArchiverUnreachable`` or ``NoMaster`` otherwise; ``status.archive`` keeps the last reported
  range while the archiver cannot be read;
- restore: the init container ``restore`` assembles ``appenddirname`` at ``pointInTime``
  (``pitr restore --keep-existing``: a volume holding an AOF, or a cluster whose restore is done,
  keeps what it has); a failure exits 3 with the reason — out of range names the recoverable
  ranges, a corrupt object names the object — so the pod never starts Redis and nothing is
  promoted (``backup.restore`` turns it into ``Restored`` False, reason ``RestoreFailed``, and an
  Event).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import aiohttp

from examples.rediscluster.api import RedisCluster, RedisClusterStatus
from examples.rediscluster.api.backup import ArchiveSpec, ArchiveStatus, S3Destination
from examples.rediscluster.backup.job import CA_MOUNT
from examples.rediscluster.shared import metrics
from examples.rediscluster.shared.resources import ROLE_LABEL
from examples.rediscluster.shared.status import condition
from pyctrl.client import Pod
from pyctrl.client.objects import Condition

#: what one look at the master's archiver gives: (``status.archive``, ``ContinuousArchiving``)
ArchiveObservation = tuple[ArchiveStatus | None, Condition | None]

__all__ = [
    "ARCHIVER_CONTAINER",
    "ARCHIVER_UID",
    "CONDITION",
    "STATUS_PORT",
    "ArchiveObservation",
    "apply_archiving",
    "archive_condition",
    "archive_spec",
    "archiver_container",
    "forget",
    "observe_archive",
    "pitr_init_container",
    "refusal",
]

ARCHIVER_CONTAINER: Final = "archiver"
CONDITION: Final = "ContinuousArchiving"
STATUS_PORT: Final = 9187
PORT_NAME: Final = "archive-status"
ARCHIVER_UID: Final = 65532  # the operator image's USER
STATE_DIR: Final = "/data/archive-state"
PODINFO_VOLUME: Final = "podinfo"
PODINFO_DIR: Final = "/etc/podinfo"
ARCHIVE_CA_VOLUME: Final = "archive-ca"
COMMAND: Final = ["python", "-m", "examples.rediscluster.backup.archive"]
PITR_COMMAND: Final = ["python", "-m", "examples.rediscluster.backup.pitr"]
#: reading an archiver's /status: at most this long
STATUS_TIMEOUT: Final = 2.0

lag_seconds = metrics.gauge(
    "rediscluster_archive_lag_seconds",
    "Seconds since the last second whose writes are all in the archive (spec.backup.archive).",
)


def archive_spec(cluster: RedisCluster) -> ArchiveSpec | None:
    """``spec.backup.archive`` when it is enabled."""
    backup = cluster.spec.backup
    if backup is None or backup.archive is None or not backup.archive.enabled:
        return None
    return backup.archive


def refusal(cluster: RedisCluster) -> str | None:
    """Why ``spec.backup.archive`` cannot run on this cluster, or None."""
    spec = cluster.spec
    if spec.mode == "cluster":
        return (
            "continuous archiving is not supported in cluster mode (an archive per shard and a "
            "per-shard restore are not built): remove spec.backup.archive or use mode: replication"
        )
    if spec.backup is None or spec.backup.destination.s3 is None:
        return "continuous archiving needs an S3 spec.backup.destination (a PVC destination cannot take it)"
    if not spec.enable_persistence:
        return (
            "continuous archiving needs spec.enablePersistence: true (without a volume a restarted "
            "Redis would reload a stale append-only file)"
        )
    return None


def _aof(cluster: RedisCluster) -> tuple[str, str]:
    config = cluster.spec.redis_config
    return f"/data/{config.get('appenddirname', 'appendonlydir')}", config.get(
        "appendfilename", "appendonly.aof"
    )


def _restricted() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": ARCHIVER_UID,
        "runAsGroup": ARCHIVER_UID,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _store_args(s3: S3Destination, namespace: str, cluster: str) -> list[str]:
    args = ["--s3-endpoint", s3.endpoint, "--s3-bucket", s3.bucket, "--s3-region", s3.region]
    if s3.prefix:
        args += ["--s3-prefix", s3.prefix]
    if s3.ca_secret is not None:
        args += ["--s3-ca-bundle", f"{CA_MOUNT}/ca.crt"]
    return [*args, "--namespace", namespace, "--cluster", cluster]


def _store_env(s3: S3Destination) -> list[dict[str, Any]]:
    """The S3 keys by reference; optional, so a missing Secret never keeps Redis from starting
    (the archiver then reports the missing credentials, a restore fails naming them)."""
    creds = s3.credentials_secret
    return [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": creds.name, "key": key, "optional": True}}}
        for var, key in (
            ("AWS_ACCESS_KEY_ID", creds.access_key_id_key),
            ("AWS_SECRET_ACCESS_KEY", creds.secret_access_key_key),
        )
    ]


def _ca(s3: S3Destination) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if s3.ca_secret is None:
        return [], []
    items = [{"key": "ca.crt", "path": "ca.crt"}]
    volume = {"name": ARCHIVE_CA_VOLUME, "secret": {"secretName": s3.ca_secret.name, "items": items}}
    return [volume], [{"name": ARCHIVE_CA_VOLUME, "mountPath": CA_MOUNT, "readOnly": True}]


def archiver_container(cluster: RedisCluster, image: str) -> dict[str, Any]:
    """The sidecar (a core/v1 Container as a dict); ``spec.backup.archive`` must be runnable."""
    archive, backup = archive_spec(cluster), cluster.spec.backup
    assert archive is not None
    assert backup is not None
    assert backup.destination.s3 is not None
    s3 = backup.destination.s3
    aof_dir, aof_name = _aof(cluster)
    args = [
        "--aof-dir", aof_dir, "--aof-name", aof_name, "--state-dir", STATE_DIR,
        "--status-address", "$(POD_IP)", "--status-port", str(STATUS_PORT),
        "--archive-timeout-seconds", str(archive.archive_timeout_seconds),
        "--role-file", f"{PODINFO_DIR}/labels", "--role-label", ROLE_LABEL,
    ]  # fmt: skip
    if archive.retention_days is not None:
        args += ["--retention-days", str(archive.retention_days)]
    args += _store_args(s3, cluster.namespace, cluster.name)
    _, ca_mounts = _ca(s3)
    return {
        "name": ARCHIVER_CONTAINER,
        "image": image,
        "command": COMMAND,
        "args": args,
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *_store_env(s3),
        ],
        "ports": [{"name": PORT_NAME, "containerPort": STATUS_PORT, "protocol": "TCP"}],
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": PODINFO_VOLUME, "mountPath": PODINFO_DIR, "readOnly": True},
            *ca_mounts,
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": _restricted(),
    }


def _conf_lines(cluster: RedisCluster) -> list[str]:
    return ["# continuous archiving (spec.backup.archive)", "appendonly yes", "aof-timestamp-enabled yes"]


def apply_archiving(cluster: RedisCluster, children: list[dict[str, Any]], image: str) -> None:
    """Add archiving to ``children`` (``resources.desired_children``) when it is asked and runnable:
    the redis.conf lines, the sidecar, its downward-API and CA volumes, the pod's fsGroup."""
    if archive_spec(cluster) is None or refusal(cluster) is not None:
        return
    backup = cluster.spec.backup
    assert backup is not None
    assert backup.destination.s3 is not None
    for child in children:
        if child["kind"] == "ConfigMap" and "redis.conf" in child.get("data", {}):
            child["data"]["redis.conf"] += "\n".join(_conf_lines(cluster)) + "\n"
        elif child["kind"] == "StatefulSet":
            template = child["spec"]["template"]
            pod = template["spec"]
            pod["containers"] = [*pod["containers"], archiver_container(cluster, image)]
            ca_volumes, _ = _ca(backup.destination.s3)
            items = [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]
            pod["volumes"] = [
                *pod["volumes"],
                {"name": PODINFO_VOLUME, "downwardAPI": {"items": items}},
                *ca_volumes,
            ]
            pod.setdefault("securityContext", {}).setdefault("fsGroup", ARCHIVER_UID)
            # the redis.conf lines above are part of what a restart must pick up
            annotations = template["metadata"].setdefault("annotations", {})
            annotations["redis.pyctrl.dev/archive"] = "on"


def pitr_init_container(cluster: RedisCluster, image: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the ``restore`` init container, its pod volumes) of ``spec.restoreFrom.pointInTime``."""
    source = cluster.spec.restore_from
    assert source is not None
    assert source.point_in_time is not None
    assert source.archive is not None
    s3 = source.archive.s3
    aof_dir, aof_name = _aof(cluster)
    args = ["restore", "--target-time", source.point_in_time, "--aof-dir", aof_dir, "--aof-name", aof_name]
    args += ["--keep-existing", *_store_args(s3, cluster.namespace, source.archive.cluster_name)]
    volumes, mounts = _ca(s3)
    container = {
        "name": "restore",
        "image": image,
        "command": PITR_COMMAND,
        "args": args,
        "env": [
            *_store_env(s3),
            {
                "name": "RESTORE_DONE",
                "valueFrom": {
                    "configMapKeyRef": {"name": f"{cluster.name}-restore", "key": "done", "optional": True}
                },
            },
        ],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, *mounts],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": _restricted(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    return container, volumes


def _epoch(rfc3339: str | None) -> float | None:
    if not rfc3339:
        return None
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


async def _read_status(ip: str, seconds: float) -> dict[str, Any]:
    url = f"http://{ip}:{STATUS_PORT}/status"
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as session,
        session.get(url) as response,
    ):
        response.raise_for_status()
        body = json.loads(await response.read())
    if not isinstance(body, dict):
        raise ValueError("the archiver's /status is not a JSON object")
    return body


def archive_condition(cluster: RedisCluster, status: RedisClusterStatus, now: str) -> Condition | None:
    """``ContinuousArchiving`` when archiving is asked but refused (both modes); None otherwise
    (:func:`observe_archive` words it for a runnable archive)."""
    if archive_spec(cluster) is None:
        return None
    why = refusal(cluster)
    if why is None:
        return None
    return condition(status, CONDITION, False, "ArchiveUnsupported", why, now=now)


async def observe_archive(
    cluster: RedisCluster,
    pods: Mapping[str, Pod],
    master: str | None,
    now: str,
    *,
    io_seconds: float = STATUS_TIMEOUT,
) -> ArchiveObservation:
    """(``status.archive``, ``ContinuousArchiving``) from the master's archiver; (None, None)
    when archiving is off; the gauge ``rediscluster_archive_lag_seconds`` follows."""
    old = cluster.status or RedisClusterStatus()
    archive = archive_spec(cluster)
    if archive is None:
        metrics.remove(lag_seconds, cluster.namespace, cluster.name)
        return None, None
    if (refused := archive_condition(cluster, old, now)) is not None:
        metrics.remove(lag_seconds, cluster.namespace, cluster.name)
        return None, refused
    kept = old.archive

    def lag_from(last: str | None) -> None:
        last_epoch = _epoch(last)
        if last_epoch is not None:
            lag = max(0.0, datetime.now(UTC).timestamp() - last_epoch)
            lag_seconds.labels(cluster.namespace, cluster.name).set(round(lag, 1))

    def failing(reason: str, message: str) -> tuple[ArchiveStatus | None, Condition]:
        lag_from(kept.last_archived_time if kept else None)
        return kept, condition(old, CONDITION, False, reason, message, now=now)

    pod = pods.get(master) if master else None
    ip = pod.status.pod_ip if pod is not None and pod.status else None
    if master is None or ip is None:
        return failing("NoMaster", "no master to archive (yet)")
    try:
        body = await _read_status(ip, io_seconds)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return failing(
            "ArchiverUnreachable", f"the archiver of {master} does not answer: {exc or type(exc).__name__}"
        )
    new = ArchiveStatus(
        pod=master,
        timeline=body.get("timeline"),
        last_archived_time=body.get("lastArchivedTime"),
        last_archived_file=body.get("lastArchivedFile"),
        first_recoverable_time=body.get("firstRecoverableTime"),
    )
    if new.last_archived_time is None and kept is not None and kept.pod == master:
        new = kept  # a restarted archiver that has not shipped yet: the range is still the one known
    lag_from(new.last_archived_time)
    bound = 3 * archive.archive_timeout_seconds + 10
    store_error = body.get("storeError")
    if store_error:
        reason, message, ok = "StoreError", f"the archiver of {master} cannot store: {store_error}", False
    elif body.get("role") != "master":
        reason, message, ok = (
            "Starting",
            f"the archiver of {master} does not see its pod as master yet",
            False,
        )
    elif new.last_archived_time is None:
        reason, message, ok = "Starting", f"the archiver of {master} has not archived a second yet", False
    elif float(body.get("lagSeconds") or 0) > bound:
        lag = body.get("lagSeconds")
        reason, message, ok = "Lagging", f"the archive of {master} lags {lag} s (more than {bound} s)", False
    else:
        reason, ok = "Archiving", True
        message = f"{master} archives timeline {new.timeline} (recoverable from {new.first_recoverable_time})"
    return new, condition(old, CONDITION, ok, reason, message, now=now)


def forget(namespace: str, name: str) -> None:
    metrics.remove(lag_seconds, namespace, name)
