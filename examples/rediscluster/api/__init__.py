"""What the user declares: the operator's kinds, ``redis.pyctrl.dev/v1alpha1``.

Mirrors a kubebuilder project's ``api/<version>/``: types only (spec, status, schema markers), no
controller logic. ``rediscluster`` holds the RedisCluster kind, ``backup`` the RedisBackup kind and
the backup-related parts of the RedisCluster spec, ``scheduling`` the pod-placement types of
``spec.affinity``/``tolerations``/``topologySpreadConstraints``. ``python -m pyctrl.crdgen`` renders
the CRDs from these modules (``[tool.pyctrl.crdgen]`` in pyproject.toml).

The public types of both kinds are re-exported here: ``from examples.rediscluster.api import
RedisCluster, RedisBackup``.
"""

from __future__ import annotations

from examples.rediscluster.api.backup import (
    BackupDestination,
    BackupPhase,
    BackupSchedule,
    PvcDestination,
    RedisBackup,
    RedisBackupSpec,
    RedisBackupStatus,
    RestoreSource,
    S3Credentials,
    S3Destination,
    SecretRef,
    ShardBackup,
)
from examples.rediscluster.api.rediscluster import (
    DEFAULT_IMAGE,
    ClusterMode,
    NodeLoss,
    RedisAuth,
    RedisCluster,
    RedisClusterPhase,
    RedisClusterSpec,
    RedisClusterStatus,
    RedisUser,
    ResourceRequirements,
    SecretKeySelector,
    ShardStatus,
    TlsConfig,
)

__all__ = [
    "DEFAULT_IMAGE",
    "BackupDestination",
    "BackupPhase",
    "BackupSchedule",
    "ClusterMode",
    "NodeLoss",
    "PvcDestination",
    "RedisAuth",
    "RedisBackup",
    "RedisBackupSpec",
    "RedisBackupStatus",
    "RedisCluster",
    "RedisClusterPhase",
    "RedisClusterSpec",
    "RedisClusterStatus",
    "RedisUser",
    "ResourceRequirements",
    "RestoreSource",
    "S3Credentials",
    "S3Destination",
    "SecretKeySelector",
    "SecretRef",
    "ShardBackup",
    "ShardStatus",
    "TlsConfig",
]
