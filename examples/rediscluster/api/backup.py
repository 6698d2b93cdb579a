"""The RedisBackup API (``redis.pyctrl.dev/v1alpha1``, kind ``RedisBackup``, short name ``rdb``) and
the backup-related parts of the RedisCluster spec (``spec.backup``, ``spec.restoreFrom``).

Mirrors a kubebuilder ``api/v1alpha1/redisbackup_types.go``; ``python -m pyctrl.crdgen`` renders
``crds/redis.pyctrl.dev_redisbackups.yaml`` from this module.

Guarantees (enforced by the apiserver through the generated schema, CEL included):

- ``spec.destination`` holds exactly one of ``pvc`` and ``s3``;
- the spec of a RedisBackup cannot change once the backup started (``status.phase`` is set and
  not ``Pending``): a backup is a record of what was taken, where to;
- a backup of a ``mode: cluster`` RedisCluster holds one RDB per shard (``status.shards``) and a
  manifest (shard -> slot ranges, size, SHA-256) at ``status.location``
  (``backup.shards``);
- credentials are only ever *references* to Secret keys: the spec, the status, Events and the Job's
  argv never hold a key (the Job's pod gets them by ``secretKeyRef`` in its environment).
"""

from __future__ import annotations

import enum
import re
from datetime import datetime
from typing import Annotated, ClassVar

from pydantic import ConfigDict, Field, JsonValue, field_validator, model_validator

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import Condition, KubeModel, KubeObject
from pyctrl.crdgen import CRDMeta, PrinterColumn

__all__ = [
    "ArchiveSource",
    "ArchiveSpec",
    "ArchiveStatus",
    "BackupDestination",
    "BackupPhase",
    "BackupSchedule",
    "PvcDestination",
    "RedisBackup",
    "RedisBackupSpec",
    "RedisBackupStatus",
    "RestoreSource",
    "S3Credentials",
    "S3Destination",
    "SecretRef",
    "ShardBackup",
]

_SPEC_CONFIG = ConfigDict(strict=True, use_attribute_docstrings=True)
_Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class SecretRef(KubeModel):
    """A Secret in the backup's namespace."""

    model_config = _SPEC_CONFIG

    name: str = Field(min_length=1)
    """Name of the Secret."""


class S3Credentials(KubeModel):
    """The Secret keys holding the S3 access key pair."""

    model_config = _SPEC_CONFIG

    name: str = Field(min_length=1)
    """Name of the Secret."""
    access_key_id_key: str = Field(default="AWS_ACCESS_KEY_ID", min_length=1)
    """Key in the Secret whose value is the access key id."""
    secret_access_key_key: str = Field(default="AWS_SECRET_ACCESS_KEY", min_length=1)
    """Key in the Secret whose value is the secret access key."""


class PvcDestination(KubeModel):
    """A file on a PersistentVolumeClaim in the backup's namespace."""

    model_config = _SPEC_CONFIG

    claim_name: str = Field(min_length=1)
    """Name of the PersistentVolumeClaim."""
    path: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        pattern=r"^[^/].*$",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!self.matches('(^|/)[.][.](/|$)')",
                    "message": "path may not contain a '..' segment (it stays inside the volume)",
                }
            ]
        },
    )
    """File path inside the volume, relative, without ``..`` segments (default: the backup's name)."""

    @field_validator("path")
    @classmethod
    def _inside_the_volume(cls, path: str | None) -> str | None:  # the CEL rule, for model_validate
        if path is not None and ".." in path.split("/"):
            raise ValueError("path may not contain a '..' segment (it stays inside the volume)")
        return path


class S3Destination(KubeModel):
    """An object in an S3-compatible store."""

    model_config = _SPEC_CONFIG

    endpoint: str = Field(min_length=1, pattern=r"^https?://")
    """Endpoint URL, e.g. https://s3.eu-west-1.amazonaws.com or http://127.0.0.1:7070."""
    bucket: str = Field(min_length=3, max_length=63)
    """Bucket name (it must exist)."""
    prefix: str = ""
    """Key prefix, e.g. "redis/" (the object is <prefix><namespace>/<backup name>.rdb)."""
    region: str = "us-east-1"
    """Region of the bucket."""
    credentials_secret: S3Credentials
    """Secret with the access key pair."""
    ca_secret: SecretRef | None = None
    """Secret whose key ca.crt is the endpoint's CA bundle (https with a private CA)."""


class BackupDestination(KubeModel):
    """Where a backup is written: exactly one of pvc and s3."""

    model_config = ConfigDict(
        strict=True,
        use_attribute_docstrings=True,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "has(self.pvc) != has(self.s3)", "message": "exactly one of pvc and s3 must be set"}
            ]
        },
    )

    pvc: PvcDestination | None = None
    """A file on a PersistentVolumeClaim."""
    s3: S3Destination | None = None
    """An object in an S3-compatible store."""


class RedisBackupSpec(KubeModel):
    """Which cluster to back up, and where to."""

    model_config = _SPEC_CONFIG

    cluster_name: str = Field(min_length=1)
    """Name of the RedisCluster (same namespace) to take the RDB from."""
    destination: BackupDestination
    """Where the RDB goes."""


class BackupPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class ShardBackup(KubeModel):
    """One shard's RDB in a backup of a ``mode: cluster`` RedisCluster."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    index: int = Field(ge=0)
    """Shard number."""
    slots: list[str] = Field(default_factory=list)
    """Slot ranges the shard served when its RDB was taken ("0-5460")."""
    source_pod: str | None = None
    """The pod the shard's RDB was taken from (a replica when there is one)."""
    location: str | None = None
    """Where the shard's RDB is (set once it is stored)."""
    size_bytes: int | None = Field(default=None, ge=0)
    """Size of the shard's RDB."""
    sha256: str | None = None
    """SHA-256 of the shard's RDB (hex)."""


class RedisBackupStatus(KubeModel):
    """Observed state, written only by the operator (status subresource)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    phase: BackupPhase = BackupPhase.PENDING
    """Pending, Running, Succeeded or Failed."""
    start_time: _Timestamp | None = None
    """When the backup Job was created."""
    completion_time: _Timestamp | None = None
    """When the backup succeeded or failed."""
    location: str | None = None
    """Where the RDB is: s3://bucket/key or pvc://claim/path (cluster mode: the manifest)."""
    size_bytes: int | None = Field(default=None, ge=0)
    """Size of the stored RDB (cluster mode: of every shard's RDB together)."""
    sha256: str | None = None
    """SHA-256 of the stored RDB, hex (cluster mode: of the manifest, which holds each shard's)."""
    shards: list[ShardBackup] | None = None
    """Cluster mode: one RDB per shard, each from the shard's replica (its master if none)."""
    source_pod: str | None = None
    """The pod the RDB was taken from (a replica when there is one)."""
    job_name: str | None = None
    """The Job doing the work."""
    message: str | None = None
    """Why the backup failed, in words."""
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Standard conditions (metav1.Condition): Complete, Failed."""


_IMMUTABLE_ONCE_STARTED: dict[str, JsonValue] = {
    "rule": (
        "!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase == 'Pending'"
        " || self.spec == oldSelf.spec"
    ),
    "message": "spec is immutable once the backup started",
}


class RedisBackup(KubeObject):
    """One RDB snapshot of a RedisCluster, taken by a Job and stored on a PVC or in S3."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [_IMMUTABLE_ONCE_STARTED]})

    gvk = GroupVersionKind("redis.pyctrl.dev", "v1alpha1", "RedisBackup")
    crd: ClassVar[CRDMeta] = CRDMeta(
        plural="redisbackups",
        short_names=("rdb",),
        categories=("redis",),
        scope="Namespaced",
        status_subresource=True,
        printer_columns=(
            PrinterColumn("Cluster", "string", ".spec.clusterName", "RedisCluster backed up"),
            PrinterColumn("Phase", "string", ".status.phase", "Backup phase"),
            PrinterColumn("Size", "integer", ".status.sizeBytes", "Bytes stored"),
            PrinterColumn("Location", "string", ".status.location", "Where the RDB is", priority=1),
            PrinterColumn("Source", "string", ".status.sourcePod", "Pod the RDB came from", priority=1),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: RedisBackupSpec
    status: RedisBackupStatus | None = None


class ArchiveSpec(KubeModel):
    """Continuous archiving of the master's append-only file to ``spec.backup.destination`` (S3),
    for a restore to any second (``spec.restoreFrom.pointInTime``). Replication mode with
    ``enablePersistence`` only; the condition ``ContinuousArchiving`` says why otherwise."""

    model_config = _SPEC_CONFIG

    enabled: bool = True
    """Run the archiver sidecar (the master's ships; replicas idle until promoted)."""
    archive_timeout_seconds: int = Field(default=60, ge=5, le=3600)
    """The file being written is shipped at least this often: a lost volume loses at most about
    this many seconds plus 3 of acknowledged writes (the RPO)."""
    retention_days: int | None = Field(default=None, ge=1, le=3650)
    """Delete archived timelines whose last archived second is older than this many days (the
    current timeline is never deleted); none: keep every timeline."""


#: What the CRD admits as ``spec.backup.schedule`` (CEL ``matches``, RE2): 5 fields, a macro of an
#: hour or more, or 6 fields whose last (croniter's seconds) is one second or ``*/N`` with N >= 10
#: — never a per-second schedule. The operator's --min-backup-interval is the real bound.
SCHEDULE_PATTERN = (
    r"^\s*(@(yearly|annually|monthly|weekly|daily|midnight|hourly)"
    r"|\S+(\s+\S+){4}"
    r"|\S+(\s+\S+){4}\s+([0-5]?[0-9]|\*/[1-5][0-9]))\s*$"
)
SCHEDULE_MESSAGE = (
    "spec.backup.schedule must be 5 cron fields, a macro (@hourly, @daily, ...) or 6 fields whose "
    "6th (seconds) is one second (0-59) or */N with N of at least 10: a per-second schedule is "
    "refused (the operator's --min-backup-interval, default 5 minutes, bounds it further)"
)


def _cel_string(text: str) -> str:
    """``text`` as the inside of a single-quoted CEL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


class BackupSchedule(KubeModel):
    """Backups of a RedisCluster on a cron schedule, the newest ``keep`` kept."""

    model_config = _SPEC_CONFIG

    schedule: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": f"self.matches('{_cel_string(SCHEDULE_PATTERN)}')", "message": SCHEDULE_MESSAGE}
            ]
        },
    )
    """Cron expression, UTC: 5 fields ("0 3 * * *"), a macro ("@daily"), or 6 with seconds last
    ("0 */10 * * * 30") whose seconds field is one second or a step of at least 10 ("*/15"); runs
    closer than the operator's --min-backup-interval (default 5 minutes) are refused; none: no
    scheduled backups (only the final one, with onDelete)."""

    @field_validator("schedule")
    @classmethod
    def _not_per_second(cls, schedule: str | None) -> str | None:  # the CEL rule, for model_validate
        if schedule is not None and not re.search(SCHEDULE_PATTERN, schedule):
            raise ValueError(SCHEDULE_MESSAGE)
        return schedule

    destination: BackupDestination
    """Where the scheduled (and final) backups go."""
    keep: int = Field(default=7, ge=1, le=1000)
    """How many scheduled backups to keep; older ones are deleted, object and RedisBackup."""
    on_delete: bool = False
    """Take a final backup when the RedisCluster is deleted (its deletion waits for it)."""
    archive: ArchiveSpec | None = None
    """Continuous archiving of the append-only file (point-in-time recovery) to destination.s3."""


class ArchiveSource(KubeModel):
    """The archive a point-in-time restore reads: a cluster's archive in an S3 store."""

    model_config = _SPEC_CONFIG

    cluster_name: str = Field(min_length=1, max_length=253)
    """The RedisCluster (same namespace) whose archive it is; it may be gone."""
    s3: S3Destination
    """The store and prefix that cluster archived to (its spec.backup.destination.s3)."""


_RESTORE_RULES: list[JsonValue] = [
    {
        "rule": "has(self.backupName) != has(self.pointInTime)",
        "message": "exactly one of backupName and pointInTime must be set",
    },
    {
        "rule": "has(self.pointInTime) == has(self.archive)",
        "message": "pointInTime needs archive (the source cluster and its store), and archive pointInTime",
    },
]


class RestoreSource(KubeModel):
    """Seed a new RedisCluster from a backup (``backupName``) or from an archive at a second
    (``pointInTime`` with ``archive``)."""

    model_config = ConfigDict(
        strict=True,
        use_attribute_docstrings=True,
        json_schema_extra={"x-kubernetes-validations": _RESTORE_RULES},
    )

    backup_name: str | None = Field(default=None, min_length=1)
    """A Succeeded RedisBackup in the same namespace."""
    point_in_time: _Timestamp | None = None
    """Restore the archive to this second (RFC 3339, e.g. 2026-12-03T15:20:00Z): every write up
    to its end is kept, none after it. Refused, naming the recoverable ranges, outside them."""
    archive: ArchiveSource | None = None
    """The archive pointInTime reads."""

    @field_validator("point_in_time")
    @classmethod
    def _rfc3339(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                when = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(f"pointInTime {value!r} is not an RFC 3339 time") from None
            if when.tzinfo is None:
                raise ValueError(f"pointInTime {value!r} needs a time zone (Z or an offset)")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> RestoreSource:  # the CEL rules above, for model_validate
        if (self.backup_name is None) == (self.point_in_time is None):
            raise ValueError("exactly one of backupName and pointInTime must be set")
        if (self.point_in_time is None) != (self.archive is None):
            raise ValueError(
                "pointInTime needs archive (the source cluster and its store), and archive pointInTime"
            )
        return self


class ArchiveStatus(KubeModel):
    """Continuous archiving as the master's archiver reports it (``spec.backup.archive``)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    pod: str | None = None
    """The pod whose archiver ships (the master)."""
    timeline: str | None = None
    """The timeline being archived (one per master's volume; a failover starts a new one)."""
    last_archived_time: _Timestamp | None = None
    """Every write up to this second is in the store."""
    last_archived_file: str | None = None
    """The AOF file most recently shipped (in part or whole)."""
    first_recoverable_time: _Timestamp | None = None
    """The earliest second of this timeline a restore can reach."""
