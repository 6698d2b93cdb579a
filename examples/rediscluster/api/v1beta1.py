"""The RedisCluster API, ``redis.pyctrl.dev/v1beta1``: the v1alpha1 spec regrouped as a v1 would keep it.

Mirrors a kubebuilder ``api/v1beta1/rediscluster_types.go`` plus its ``rediscluster_conversion.go``
(controller-runtime ``conversion.Convertible``): :class:`RedisClusterV1beta1` converts to and from
the hub, :class:`~examples.rediscluster.api.rediscluster.RedisCluster` (v1alpha1), which is the type
the operator reconciles. The field-by-field mapping is in the guide (``docs/guide/versions.md``).

What changes (everything else keeps its name and place):

- ``redis: {image, config, resources, memoryLimit}`` ← ``image``, ``redisConfig``, ``resources``,
  ``memoryLimit``;
- ``persistence: {enabled, size, storageClassName}`` ← ``enablePersistence``, ``storageSize``,
  ``storageClassName``;
- ``failover: {auto, downAfter, nodeLoss}`` ← ``enableAutoFailover``, ``downAfterMilliseconds``
  (now a duration string: ``"5s"``, ``"1m30s"``, ``"1500ms"``), ``nodeLoss``;
- ``sharding: {shards, replicasPerShard}`` ← ``shards``, ``replicasPerShard``;
- ``placement: {affinity, tolerations, topologySpreadConstraints, nodeSelector}`` ← the same
  four top-level fields.

Guarantees:

- lossless round trips both ways: ``v1alpha1 → v1beta1 → v1alpha1`` and ``v1beta1 → v1alpha1 →
  v1beta1`` give back the same spec and status. The one thing v1alpha1 cannot hold, the spelling
  of ``failover.downAfter`` (``"1m"`` and ``"60s"`` are both 60000 ms), is parked in the annotation
  :data:`PRESERVED_ANNOTATION` on the way to v1alpha1 and taken back (and removed) on the way
  back, as Kubernetes' own conversions do;
- a v1beta1 object that v1alpha1 cannot represent (a ``downAfter`` that is not a whole number of
  milliseconds) is refused by :meth:`RedisClusterV1beta1.convert_to` with a
  :class:`~pyctrl.conversion.ConversionError` naming the field; the apiserver then refuses the
  request with that message;
- the schema rules of v1alpha1 (bounds, immutable fields, the CEL rules of the spec) hold on the
  same fields at their new places, and ``failover.downAfter`` is at least ``1s`` (CEL
  ``duration()`` on the apiserver, the same check in :meth:`Failover.model_validate`).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, ClassVar, Self

from pydantic import ConfigDict, Field, field_validator

from examples.rediscluster.api import redisconf
from examples.rediscluster.api.backup import BackupSchedule, RestoreSource
from examples.rediscluster.api.rediscluster import (
    _GROWS_ONLY,
    _IMMUTABLE,
    _REDIS_CONFIG_RULES,
    _ROOT_SPEC_CONFIG,
    _SPEC_CONFIG,
    DEFAULT_IMAGE,
    NAME_RULES,
    Monitoring,
    NetworkPolicyConfig,
    NodeLoss,
    RedisAuth,
    RedisCluster,
    RedisClusterSpec,
    RedisClusterStatus,
    RedisUser,
    ResourceRequirements,
    TlsConfig,
    _cel,
    _Mode,
    redis_cluster_crd,
)
from examples.rediscluster.api.scheduling import Affinity, Toleration, TopologySpreadConstraint
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import KubeModel, KubeObject
from pyctrl.conversion import ConversionError
from pyctrl.crdgen import CRDMeta, Quantity, generate_crd

__all__ = [
    "DURATION_PATTERN",
    "PRESERVED_ANNOTATION",
    "V1ALPHA1_DEPRECATION",
    "Failover",
    "Persistence",
    "Placement",
    "RedisClusterSpecV1beta1",
    "RedisClusterV1beta1",
    "RedisSettings",
    "Sharding",
    "format_duration",
    "graduated_crd",
    "parse_duration_ms",
]

#: What kubectl prints (``Warning: ...``) on every request to v1alpha1 once v1beta1 is served.
V1ALPHA1_DEPRECATION = (
    "redis.pyctrl.dev/v1alpha1 RedisCluster is deprecated; use redis.pyctrl.dev/v1beta1 "
    "(the same objects, fields regrouped)"
)

#: v1beta1 fields that v1alpha1 cannot hold, as JSON (``{"failover.downAfter": "1m"}``), on the
#: v1alpha1 form of an object; the way back restores them and drops the annotation.
PRESERVED_ANNOTATION = "redis.pyctrl.dev/v1beta1-fields"

#: A Go duration restricted to the units Redis timeouts make sense in (no ns/us).
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_MIN_DOWN_AFTER_MS = 1000


def _parse_exact(text: str) -> tuple[int, bool]:
    """(milliseconds rounded down, whether exact) of a :data:`DURATION_PATTERN` string."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"{text!r} is not a duration such as 5s, 1m30s or 1500ms")
    total_num, total_den = 0, 1
    for number, unit in _PART.findall(text):
        whole, _, frac = number.partition(".")
        den = 10 ** len(frac)
        num = (int(whole) * den + int(frac or 0)) * _UNIT_MS[unit]
        total_num, total_den = total_num * den + num * total_den, total_den * den
    return total_num // total_den, total_num % total_den == 0


def parse_duration_ms(text: str, field: str = "duration") -> int:
    """Milliseconds of ``text``; :class:`ValueError` naming ``field`` when it is not a whole number."""
    ms, exact = _parse_exact(text)
    if not exact:
        raise ValueError(f"{field} {text!r} is not a whole number of milliseconds")
    return ms


def format_duration(ms: int) -> str:
    """The canonical spelling of ``ms`` milliseconds: ``"5s"``, ``"1500ms"``."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


class RedisSettings(KubeModel):
    """The Redis server: image, redis.conf settings, container resources."""

    model_config = _SPEC_CONFIG

    image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    """Redis 7 container image."""
    config: dict[str, Annotated[str, Field(max_length=redisconf.MAX_VALUE_LENGTH)]] = Field(
        default_factory=dict,
        max_length=redisconf.MAX_ENTRIES,
        json_schema_extra={"x-kubernetes-validations": _REDIS_CONFIG_RULES},
    )
    """Extra redis.conf settings (directive -> value): the tenant-safe directives v1alpha1's
    redisConfig admits, under the same CEL rules."""
    resources: ResourceRequirements | None = None
    """Compute resources of the Redis container."""
    memory_limit: Quantity | None = None
    """Memory limit of the Redis container; also sets Redis maxmemory."""


class Persistence(KubeModel):
    """Data on a PersistentVolumeClaim per pod (appendonly)."""

    model_config = _SPEC_CONFIG

    enabled: bool = False
    """Keep data on a PersistentVolumeClaim per pod."""
    size: Annotated[
        Quantity,
        Field(
            json_schema_extra=_cel(
                _GROWS_ONLY, "spec.persistence.size cannot be lowered (a PersistentVolumeClaim only grows)"
            )
        ),
    ] = "1Gi"
    """Size of each pod's volume; raising it expands the volumes in place where the class allows."""
    storage_class_name: str | None = Field(
        default=None,
        min_length=1,
        json_schema_extra=_cel(_IMMUTABLE, "spec.persistence.storageClassName is immutable"),
    )
    """StorageClass of the volumes (the cluster's default class when omitted); immutable."""


class Failover(KubeModel):
    """When the operator promotes a replica, and what it does with pods of a lost node."""

    model_config = _SPEC_CONFIG

    auto: bool = True
    """Promote a replica when the master has been down for downAfter."""
    down_after: str = Field(
        default="5s",
        pattern=DURATION_PATTERN,
        json_schema_extra=_cel("duration(self) >= duration('1s')", "spec.failover.downAfter must be >= 1s"),
    )
    """How long the master must be unreachable before it is considered down (>= 1s), e.g. 5s."""
    node_loss: NodeLoss = Field(default_factory=NodeLoss)
    """Pods on a node that stopped reporting: left alone (default) or force-deleted."""

    @field_validator("down_after")
    @classmethod
    def _at_least_a_second(cls, value: str) -> str:
        ms, _ = _parse_exact(value)
        if ms < _MIN_DOWN_AFTER_MS:
            raise ValueError("spec.failover.downAfter must be >= 1s")
        return value


class Sharding(KubeModel):
    """Cluster mode: the shards and their replicas."""

    model_config = _SPEC_CONFIG

    shards: int = Field(default=3, ge=3, le=100)
    """Number of shards (masters), each serving an even part of the 16384 slots."""
    replicas_per_shard: int = Field(
        default=1,
        ge=0,
        le=5,
        json_schema_extra=_cel(_IMMUTABLE, "spec.sharding.replicasPerShard cannot be changed"),
    )
    """Replicas of each shard's master (fixed at creation)."""


class Placement(KubeModel):
    """Where the pods may and should run."""

    model_config = _SPEC_CONFIG

    affinity: Affinity | None = None
    """Pod affinity rules; replaces the default (preferred anti-affinity on kubernetes.io/hostname)."""
    tolerations: list[Toleration] | None = None
    """Tolerations of the pods."""
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    """Replaces the default (spread over topology.kubernetes.io/zone, ScheduleAnyway); [] for none."""
    node_selector: dict[str, str] | None = None
    """Node labels the pods require."""


class RedisClusterSpecV1beta1(KubeModel):
    """Desired state: ``replicas`` pods (one master) in replication mode, or ``sharding.shards``
    masters with ``sharding.replicasPerShard`` replicas each in cluster mode."""

    model_config = _ROOT_SPEC_CONFIG

    mode: _Mode = "replication"
    """replication (one master, replicas) or cluster (sharded Redis Cluster); immutable."""
    replicas: int = Field(default=3, ge=1, le=10)
    """Total number of Redis pods, the master included (replication mode; the /scale target)."""
    sharding: Sharding = Field(default_factory=Sharding)
    """Cluster mode: shards and replicas per shard."""
    redis: RedisSettings = Field(default_factory=RedisSettings)
    """The Redis server: image, config, resources."""
    persistence: Persistence = Field(default_factory=Persistence)
    """Volumes of the pods."""
    failover: Failover = Field(default_factory=Failover)
    """Automatic failover and node loss."""
    placement: Placement = Field(default_factory=Placement)
    """Pod placement."""
    auth: RedisAuth = Field(default_factory=RedisAuth)
    """Password authentication, on by default (a generated password in ``<name>-auth``)."""
    users: list[RedisUser] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """ACL users, set on every pod without a restart; [] enables the ACL file with no user yet."""
    disable_default_user: bool = False
    """Turn the default user off (needs users): only the listed users can connect."""
    tls: TlsConfig | None = None
    """TLS only (no plaintext port); cannot be added or removed later."""
    backup: BackupSchedule | None = None
    """Scheduled backups, their retention and the final backup on delete (see RedisBackup)."""
    restore_from: RestoreSource | None = None
    """Seed the cluster from a RedisBackup when it is created."""
    monitoring: Monitoring = Field(default_factory=Monitoring)
    """Redis server metrics: the redis_exporter sidecar."""
    network_policy: NetworkPolicyConfig = Field(default_factory=NetworkPolicyConfig)
    """The cluster's NetworkPolicy (on by default): who may reach the Redis, bus and metrics ports."""


class RedisClusterV1beta1(KubeObject):
    """A RedisCluster as ``redis.pyctrl.dev/v1beta1`` (the storage version; converts through the
    v1alpha1 hub)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": NAME_RULES})

    gvk = GroupVersionKind("redis.pyctrl.dev", "v1beta1", "RedisCluster")
    crd: ClassVar[CRDMeta] = redis_cluster_crd(
        shards=".spec.sharding.shards", image=".spec.redis.image", storage=False
    )

    spec: RedisClusterSpecV1beta1 = Field(default_factory=RedisClusterSpecV1beta1)
    status: RedisClusterStatus | None = None

    def convert_to(self) -> RedisCluster:
        """This object as the v1alpha1 hub (``ConversionError`` naming a field it cannot hold)."""
        s = self.spec
        try:
            down_after_ms = parse_duration_ms(s.failover.down_after, "spec.failover.downAfter")
        except ValueError as exc:
            raise ConversionError(f"{exc}: v1alpha1 downAfterMilliseconds cannot hold it") from exc
        spec = RedisClusterSpec(
            mode=s.mode,
            replicas=s.replicas,
            shards=s.sharding.shards,
            replicas_per_shard=s.sharding.replicas_per_shard,
            image=s.redis.image,
            enable_auto_failover=s.failover.auto,
            down_after_milliseconds=down_after_ms,
            memory_limit=s.redis.memory_limit,
            enable_persistence=s.persistence.enabled,
            storage_size=s.persistence.size,
            storage_class_name=s.persistence.storage_class_name,
            auth=s.auth,
            users=s.users,
            disable_default_user=s.disable_default_user,
            tls=s.tls,
            redis_config=dict(s.redis.config),
            resources=s.redis.resources,
            affinity=s.placement.affinity,
            tolerations=s.placement.tolerations,
            topology_spread_constraints=s.placement.topology_spread_constraints,
            node_selector=s.placement.node_selector,
            node_loss=s.failover.node_loss,
            backup=s.backup,
            restore_from=s.restore_from,
            monitoring=s.monitoring,
            network_policy=s.network_policy,
        )
        metadata = self.metadata.model_copy(deep=True)
        annotations = dict(metadata.annotations or {})
        preserved = _preserved(annotations)
        preserved.pop("failover.downAfter", None)
        if s.failover.down_after != format_duration(down_after_ms):
            preserved["failover.downAfter"] = s.failover.down_after
        _store_preserved(annotations, preserved)
        metadata.annotations = annotations or None
        return RedisCluster(metadata=metadata, spec=spec, status=self.status)

    @classmethod
    def convert_from(cls, hub: RedisCluster) -> Self:
        """The v1alpha1 hub as v1beta1 (always representable)."""
        h = hub.spec
        metadata = hub.metadata.model_copy(deep=True)
        annotations = dict(metadata.annotations or {})
        preserved = _preserved(annotations)
        down_after = format_duration(h.down_after_milliseconds)
        spelled = preserved.pop("failover.downAfter", None)
        if isinstance(spelled, str) and _spells(spelled, h.down_after_milliseconds):
            down_after = spelled  # the hub's value is unchanged: keep how the user wrote it
        _store_preserved(annotations, preserved)
        metadata.annotations = annotations or None
        spec = RedisClusterSpecV1beta1(
            mode=h.mode,
            replicas=h.replicas,
            sharding=Sharding(shards=h.shards, replicas_per_shard=h.replicas_per_shard),
            redis=RedisSettings(
                image=h.image, config=dict(h.redis_config), resources=h.resources, memory_limit=h.memory_limit
            ),
            persistence=Persistence(
                enabled=h.enable_persistence, size=h.storage_size, storage_class_name=h.storage_class_name
            ),
            failover=Failover(auto=h.enable_auto_failover, down_after=down_after, node_loss=h.node_loss),
            placement=Placement(
                affinity=h.affinity,
                tolerations=h.tolerations,
                topology_spread_constraints=h.topology_spread_constraints,
                node_selector=h.node_selector,
            ),
            auth=h.auth,
            users=h.users,
            disable_default_user=h.disable_default_user,
            tls=h.tls,
            backup=h.backup,
            restore_from=h.restore_from,
            monitoring=h.monitoring,
            network_policy=h.network_policy,
        )
        return cls(metadata=metadata, spec=spec, status=hub.status)


def graduated_crd(
    *, storage_version: str = "v1beta1", webhook_service: tuple[str, str] = ("webhook-service", "system")
) -> dict[str, Any]:
    """The RedisCluster CRD serving both versions: ``storage_version`` stored (v1beta1 by default;
    v1alpha1 for the intermediate release that can still be rolled back), v1alpha1 deprecated with
    :data:`V1ALPHA1_DEPRECATION`, conversion by the webhook at ``webhook_service``'s ``/convert``."""
    return generate_crd(
        RedisCluster,
        RedisClusterV1beta1,
        storage_version=storage_version,
        deprecated_versions={"v1alpha1": V1ALPHA1_DEPRECATION},
        webhook_service=webhook_service,
    )


def _spells(text: str, ms: int) -> bool:
    try:
        return parse_duration_ms(text) == ms
    except ValueError:
        return False


def _preserved(annotations: dict[str, str]) -> dict[str, Any]:
    raw = annotations.pop(PRESERVED_ANNOTATION, None)
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}  # not ours to interpret: a hand-edited annotation is dropped, not fatal
    return value if isinstance(value, dict) else {}


def _store_preserved(annotations: dict[str, str], preserved: dict[str, Any]) -> None:
    if preserved:
        annotations[PRESERVED_ANNOTATION] = json.dumps(preserved, sort_keys=True, separators=(",", ":"))
