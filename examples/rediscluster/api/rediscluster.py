"""The RedisCluster API: ``redis.pyctrl.dev/v1alpha1``, kind ``RedisCluster`` (short name ``rdc``).

Mirrors a kubebuilder ``api/v1alpha1/rediscluster_types.go``: the Go types plus markers become
pydantic models plus one :class:`~pyctrl.crdgen.CRDMeta`; ``python -m pyctrl.crdgen`` renders
``crds/redis.pyctrl.dev_redisclusters.yaml`` from this module (a test fails when that file is stale).

Guarantees:

- one source of truth: bounds, defaults and enums below are what the apiserver enforces (through the
  generated schema) *and* what :meth:`RedisClusterSpec.model_validate` enforces: the spec models are
  strict (``"3"`` is not an integer, ``"true"`` not a boolean), so a spec the apiserver rejects is
  rejected here too, and a spec created as ``{}`` defaults to the same values on both sides;
- Python attributes are snake_case (``down_after_milliseconds``), the wire is camelCase
  (``downAfterMilliseconds``);
- quantities (``memoryLimit``, ``storageSize``, resource maps) accept an integer or a quantity string
  on the wire and are always ``str`` in Python;
- subresources: ``status`` (spec and status are written separately) and ``scale`` (``kubectl scale
  rdc/NAME --replicas=N`` writes ``.spec.replicas``; ``.status.readyReplicas`` and
  ``.status.selector`` are reported back, so an HPA can drive it).
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field, JsonValue, model_validator

from examples.rediscluster.api import redisconf
from examples.rediscluster.api.backup import ArchiveStatus, BackupSchedule, RestoreSource
from examples.rediscluster.api.scheduling import (
    Affinity,
    LabelSelector,
    Toleration,
    TopologySpreadConstraint,
)
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import Condition, KubeModel, KubeObject
from pyctrl.conversion import Hub
from pyctrl.crdgen import CRDMeta, PrinterColumn, Quantity, ScaleSubresource

__all__ = [
    "CLIENT_LABEL",
    "DEFAULT_EXPORTER_IMAGE",
    "DEFAULT_IMAGE",
    "MAX_NAME_LENGTH",
    "NAME_RULES",
    "ClusterMode",
    "Monitoring",
    "NetworkPolicyConfig",
    "NetworkPolicyPeer",
    "NodeLoss",
    "RedisAuth",
    "RedisCluster",
    "RedisClusterPhase",
    "RedisClusterSpec",
    "RedisClusterStatus",
    "RedisUser",
    "ResourceRequirements",
    "SecretKeySelector",
    "ShardStatus",
    "TlsConfig",
    "name_problem",
    "redis_cluster_crd",
]

DEFAULT_IMAGE = "redis:7.2"

_SPEC_CONFIG = ConfigDict(strict=True, use_attribute_docstrings=True)

#: CEL rules of one field: it never changes once set; a quantity that only grows
_IMMUTABLE = "self == oldSelf"
_GROWS_ONLY = "quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0"


def _cel(rule: str, message: str) -> dict[str, JsonValue]:
    """The ``json_schema_extra`` of a field the apiserver checks with one CEL ``rule``
    (``x-kubernetes-validations``), refusing a write that breaks it with ``message``."""
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}]}


#: The longest RedisCluster name whose children are all valid: the StatefulSet of that name labels
#: its pods ``controller-revision-hash=<name>-<10 characters>`` (a label value: at most 63).
MAX_NAME_LENGTH = 52
#: A DNS-1035 label, as the Services ``<name>-headless``, ``-master`` and ``-replicas`` must be
#: (no dot, a letter first); the CRD's own rule is only a DNS-1123 subdomain.
_NAME_PATTERN = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
_NAME_MESSAGES = (
    f"metadata.name must be at most {MAX_NAME_LENGTH} characters (the StatefulSet of that name "
    "labels its pods controller-revision-hash=<name>-<10 characters>, at most 63)",
    "metadata.name must be a DNS-1035 label: lower-case letters, digits and '-', a letter first, "
    "no '.' (it names the cluster's Services)",
)
#: The CEL rules (on the object's root: ``kubectl apply`` itself refuses such a name); one source
#: with :func:`name_problem`, which the webhook and the reconciler run.
NAME_RULES: list[JsonValue] = [
    {"rule": f"self.metadata.name.size() <= {MAX_NAME_LENGTH}", "message": _NAME_MESSAGES[0]},
    {"rule": f"self.metadata.name.matches('{_NAME_PATTERN}')", "message": _NAME_MESSAGES[1]},
]


def name_problem(name: str) -> str | None:
    """Why a RedisCluster cannot be called ``name`` (the CEL rules' message), or None."""
    if len(name) > MAX_NAME_LENGTH:
        return _NAME_MESSAGES[0]
    if not re.fullmatch(_NAME_PATTERN, name):
        return _NAME_MESSAGES[1]
    return None


ClusterMode = Literal["replication", "cluster"]
"""``replication``: one master and replicas; ``cluster``: a sharded Redis Cluster."""

#: Both modes take spec.tls and spec.users; neither can be added or removed once the cluster exists
#: (the rules below: TLS and plaintext nodes cannot replicate from, or gossip with, each other;
#: pods with and without the ACL file log in differently), while secretName and the users may change.
_CLUSTER_RULES: list[JsonValue] = [
    {
        "rule": "self.mode != 'cluster' || self.replicas == oldSelf.replicas",
        "message": "spec.replicas is not used in cluster mode (kubectl scale is refused): "
        "change spec.shards instead",
        "fieldPath": ".replicas",
    },
    {
        # pods with and without the ACL file authenticate differently: set users: [] to add later
        "rule": "has(self.users) == has(oldSelf.users)",
        "message": "spec.users cannot be added or removed once the cluster exists (create it with "
        "users: [] to add users later without a restart)",
        "fieldPath": ".users",
    },
    {
        "rule": "!self.disableDefaultUser || has(self.users)",
        "message": "spec.disableDefaultUser needs spec.users",
        "fieldPath": ".disableDefaultUser",
    },
    {
        # a pod with TLS cannot replicate from one without: switching means a new cluster
        "rule": "has(self.tls) == has(oldSelf.tls)",
        "message": "spec.tls cannot be added or removed once the cluster exists (TLS and plaintext "
        "pods cannot replicate from each other); its secretName may change",
        "fieldPath": ".tls",
    },
]
#: the spec's settings in both versions: strict, its docstrings as the CRD's descriptions, the
#: rules across its fields
_ROOT_SPEC_CONFIG = ConfigDict(**_SPEC_CONFIG, json_schema_extra={"x-kubernetes-validations": _CLUSTER_RULES})
#: ``spec.mode`` in both versions
_Mode = Annotated[ClusterMode, Field(json_schema_extra=_cel(_IMMUTABLE, "spec.mode is immutable"))]


class SecretKeySelector(KubeModel):
    """A key of a Secret in the RedisCluster's namespace."""

    model_config = _SPEC_CONFIG

    name: str = Field(min_length=1)
    """Name of the Secret."""
    key: str = Field(default="password", min_length=1)
    """Key in the Secret whose value is the password."""


#: at most this many ``spec.users`` (bounded ACL file, one Secret read per user per reconcile)
MAX_USERS = 64
#: the CEL rules of ``spec.redisConfig`` (one source: ``redisconf.ALLOWED`` and its patterns)
_REDIS_CONFIG_RULES: list[JsonValue] = [dict(rule) for rule in redisconf.cel_validations()]


class RedisAuth(KubeModel):
    """Authentication of clients and replicas (``requirepass`` and ``masterauth``). Without
    ``passwordSecret`` (``auth: {}``) the operator generates a random password in the Secret
    ``<name>-auth`` (key ``password``), which it owns."""

    model_config = ConfigDict(
        **_SPEC_CONFIG,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.passwordSecret) || self.enabled",
                    "message": "auth.passwordSecret needs auth.enabled (a disabled cluster has no password)",
                }
            ]
        },
    )

    enabled: bool = True
    """false: no password at all. Anyone who can reach the pods' port (every pod of the cluster's
    network unless a NetworkPolicy says otherwise) may read, write, FLUSHALL or REPLICAOF the data."""
    password_secret: SecretKeySelector | None = None
    """The Secret key holding the Redis password; the operator generates ``<name>-auth`` when omitted."""

    @model_validator(mode="after")
    def _password_needs_enabled(self) -> RedisAuth:  # the CEL rule above, for model_validate
        if self.password_secret is not None and not self.enabled:
            raise ValueError("auth.passwordSecret needs auth.enabled (a disabled cluster has no password)")
        return self


class TlsConfig(KubeModel):
    """TLS for clients and replication (cert-manager's Secret layout: tls.crt, tls.key, ca.crt)."""

    model_config = _SPEC_CONFIG

    secret_name: str = Field(min_length=1)
    """Secret with tls.crt, tls.key and ca.crt; a change of it is reloaded without a restart."""


class RedisUser(KubeModel):
    """An ACL user: its password from a Secret, its permissions in ACL rule syntax."""

    model_config = _SPEC_CONFIG

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")
    """User name (default and pyctrl-* are reserved)."""
    password_secret: SecretKeySelector
    """The Secret key holding the user's password."""
    rules: str = Field(default="", max_length=4096)
    """ACL rules, e.g. "~cache:* +get +set" or "~* +@read"; no passwords, on/off or reset."""


class ResourceRequirements(KubeModel):
    """Compute resources of the Redis container (like a core/v1 ResourceRequirements)."""

    model_config = _SPEC_CONFIG

    limits: dict[str, Quantity] | None = None
    """Maximum resources, e.g. {"cpu": "1", "memory": "1Gi"}."""
    requests: dict[str, Quantity] | None = None
    """Minimum resources the scheduler reserves."""


class NodeLoss(KubeModel):
    """What the operator does with the pods of a node that stopped reporting (NodeLost)."""

    model_config = _SPEC_CONFIG

    force_delete_pods: bool = False
    """Force-delete this cluster's pods on a node whose Ready condition has been Unknown for
    afterSeconds while their Redis gave the operator no valid reply for as long, so the
    StatefulSet recreates them on a live node. Off by default: Kubernetes cannot tell a dead node
    from a partitioned one, and a StatefulSet pod must not run twice; turn it on where a node that
    stops reporting is known to be down (or taint such a node node.kubernetes.io/out-of-service,
    which Kubernetes itself honours)."""
    after_seconds: int = Field(default=30, ge=0, le=3600)
    """How long the node must have been unreachable (and the pod's Redis silent) first."""


#: the label of the pods (in the cluster's namespace) that may reach a cluster's Redis port
#: through its NetworkPolicy: ``redis.pyctrl.dev/client: <cluster name>``
CLIENT_LABEL = "redis.pyctrl.dev/client"
#: at most this many ``spec.networkPolicy.clients``
MAX_CLIENT_PEERS = 16


class NetworkPolicyPeer(KubeModel):
    """Pods allowed to reach the Redis port (a networking/v1 NetworkPolicyPeer without ipBlock):
    ``podSelector`` alone selects pods of the cluster's namespace, ``namespaceSelector`` alone every
    pod of those namespaces, both together those pods of those namespaces."""

    model_config = ConfigDict(
        **_SPEC_CONFIG,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.podSelector) || has(self.namespaceSelector)",
                    "message": "a networkPolicy.clients entry needs podSelector or namespaceSelector",
                }
            ]
        },
    )

    pod_selector: LabelSelector | None = None
    """Pods with these labels."""
    namespace_selector: LabelSelector | None = None
    """Namespaces with these labels ({} for every namespace)."""

    @model_validator(mode="after")
    def _needs_a_selector(self) -> NetworkPolicyPeer:  # the CEL rule above, for model_validate
        if self.pod_selector is None and self.namespace_selector is None:
            raise ValueError("a networkPolicy.clients entry needs podSelector or namespaceSelector")
        return self


class NetworkPolicyConfig(KubeModel):
    """The NetworkPolicy ``<name>`` the operator keeps for the cluster (on by default): the Redis
    port is reachable only from the cluster's own pods, its backup and restore Jobs, the operator's
    pods, pods of this namespace labelled ``redis.pyctrl.dev/client: <name>`` and ``clients``; the
    cluster bus port (cluster mode) only from the cluster's own pods; the exporter's metrics port
    from the monitoring namespaces the operator is configured with. Enforced only where the
    cluster's network plugin implements NetworkPolicy."""

    model_config = _SPEC_CONFIG

    enabled: bool = True
    """false: no NetworkPolicy (the operator deletes the one it made): every pod that can reach
    the pods may connect (the password still applies)."""
    clients: list[NetworkPolicyPeer] = Field(default_factory=list, max_length=MAX_CLIENT_PEERS)
    """More pods allowed to reach the Redis port."""


DEFAULT_EXPORTER_IMAGE = "oliver006/redis_exporter:v1.74.0"


class Monitoring(KubeModel):
    """Redis' own metrics: a redis_exporter sidecar in every pod (its /metrics on port 9121,
    named redis-metrics, which the chart's PodMonitor scrapes)."""

    model_config = ConfigDict(strict=True, use_attribute_docstrings=True)

    exporter: bool = True
    """Run the redis_exporter sidecar (logged in as the pyctrl-exporter ACL user when users are set)."""
    exporter_image: str = Field(default=DEFAULT_EXPORTER_IMAGE, min_length=1)
    """The redis_exporter image."""


class RedisClusterSpec(KubeModel):
    """Desired state: one master and replicas-1 replicas of one Redis image (``mode: replication``),
    or ``shards`` masters with ``replicasPerShard`` replicas each (``mode: cluster``)."""

    model_config = _ROOT_SPEC_CONFIG

    mode: _Mode = "replication"
    """replication (one master, replicas) or cluster (sharded Redis Cluster); immutable."""
    replicas: int = Field(default=3, ge=1, le=10)
    """Total number of Redis pods, the master included (replication mode; unused in cluster mode)."""
    shards: int = Field(default=3, ge=3, le=100)
    """Cluster mode: number of shards (masters), each serving an even part of the 16384 slots."""
    replicas_per_shard: int = Field(
        default=1, ge=0, le=5, json_schema_extra=_cel(_IMMUTABLE, "spec.replicasPerShard cannot be changed")
    )
    """Cluster mode: replicas of each shard's master (fixed at creation)."""
    image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    """Redis 7 container image."""
    enable_auto_failover: bool = True
    """Promote a replica when the master has been down for downAfterMilliseconds."""
    down_after_milliseconds: int = Field(default=5000, ge=1000)
    """How long the master must be unreachable before it is considered down."""
    memory_limit: Quantity | None = None
    """Memory limit of the Redis container; also sets Redis maxmemory."""
    enable_persistence: bool = False
    """Keep data on a PersistentVolumeClaim per pod (appendonly)."""
    storage_size: Annotated[
        Quantity,
        Field(
            json_schema_extra=_cel(
                _GROWS_ONLY, "spec.storageSize cannot be lowered (a PersistentVolumeClaim only grows)"
            )
        ),
    ] = "1Gi"
    """Size of each pod's volume when persistence is enabled; raising it expands every volume in
    place when their StorageClass allows volume expansion."""
    storage_class_name: str | None = Field(
        default=None, min_length=1, json_schema_extra=_cel(_IMMUTABLE, "spec.storageClassName is immutable")
    )
    """StorageClass of the volumes (the cluster's default class when omitted); immutable."""
    auth: RedisAuth = Field(default_factory=RedisAuth)
    """Password authentication, on by default: omitted or ``{}``, a generated password in the
    Secret ``<name>-auth``; ``passwordSecret``, the user's; ``{enabled: false}``: open."""
    users: list[RedisUser] | None = Field(
        default=None,
        max_length=MAX_USERS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """ACL users, set on every pod without a restart; [] enables the ACL file with no user yet."""
    disable_default_user: bool = False
    """Turn the default user off (needs users): only the listed users can connect."""
    tls: TlsConfig | None = None
    """TLS only (no plaintext port), replication (and in cluster mode the cluster bus and slot
    migration) over TLS too; cannot be added or removed later."""
    redis_config: dict[str, Annotated[str, Field(max_length=redisconf.MAX_VALUE_LENGTH)]] = Field(
        default_factory=dict,
        max_length=redisconf.MAX_ENTRIES,
        json_schema_extra={"x-kubernetes-validations": _REDIS_CONFIG_RULES},
    )
    """Extra redis.conf settings (directive -> value): lower-case tenant-safe Redis directives
    only (memory, eviction, timeouts, encodings, slowlog...); operator-managed (port, dir, save,
    replicaof, requirepass...) and dangerous ones (include, loadmodule, rename-command,
    enable-debug-command...) are refused; values are printable ASCII without backslashes."""
    resources: ResourceRequirements | None = None
    """Compute resources of the Redis container."""
    affinity: Affinity | None = None
    """Pod affinity rules; replaces the default (preferred anti-affinity on kubernetes.io/hostname)."""
    tolerations: list[Toleration] | None = None
    """Tolerations of the pods."""
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    """Replaces the default (spread over topology.kubernetes.io/zone, ScheduleAnyway); [] for none."""
    node_selector: dict[str, str] | None = None
    """Node labels the pods require."""
    node_loss: NodeLoss = Field(default_factory=NodeLoss)
    """Pods on a node that stopped reporting: left alone (default) or force-deleted."""
    backup: BackupSchedule | None = None
    """Scheduled backups, their retention and the final backup on delete (see RedisBackup)."""
    restore_from: RestoreSource | None = None
    """Seed the cluster when it is created: from a RedisBackup, or from an archive at a second."""
    monitoring: Monitoring = Field(default_factory=Monitoring)
    """Redis metrics: the redis_exporter sidecar (on by default)."""
    network_policy: NetworkPolicyConfig = Field(default_factory=NetworkPolicyConfig)
    """The cluster's NetworkPolicy (on by default): who may reach the Redis, bus and metrics ports."""


class RedisClusterPhase(enum.StrEnum):
    """Coarse state of the cluster, for humans and kubectl."""

    INITIALIZING = "Initializing"
    RUNNING = "Running"
    DEGRADED = "Degraded"
    FAILOVER = "Failover"
    HIBERNATED = "Hibernated"


_Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class ShardStatus(KubeModel):
    """One shard of a cluster-mode RedisCluster, as Redis reports it."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    index: int = Field(ge=0)
    """Shard number (pods index*(1+replicasPerShard) .. belong to it)."""
    master: str | None = None
    """Pod serving the shard's slots."""
    replicas: list[str] = Field(default_factory=list)
    """Pods replicating the shard's master."""
    slots: list[str] = Field(default_factory=list)
    """Slot ranges the master serves, e.g. ["0-5460"]."""
    slot_count: int = Field(default=0, ge=0)
    """Number of slots the master serves."""
    ready: bool = False
    """The master serves and every replica of the shard replicates it."""


class RedisClusterStatus(KubeModel):
    """Observed state, written only by the operator (status subresource)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    phase: RedisClusterPhase = RedisClusterPhase.INITIALIZING
    """Initializing, Running, Degraded, Failover or Hibernated."""
    ready_replicas: int = Field(default=0, ge=0)
    """Pods that are Ready and replicate from (or are) the current master."""
    current_master: str | None = None
    """Name of the pod that is the master."""
    master_epoch: int = Field(default=0, ge=0)
    """Incremented on every change of master (failover or switchover)."""
    observed_generation: int | None = None
    """metadata.generation of the spec this status reflects."""
    last_sync_timestamp: _Timestamp | None = None
    """When the operator last reconciled this cluster (RFC 3339)."""
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Standard conditions (metav1.Condition), one per type."""
    auth_secret: str | None = None
    """The Secret (name only) holding the password clients use: ``<name>-auth`` when generated, the
    spec's ``auth.passwordSecret`` otherwise; unset when ``auth.enabled`` is false."""
    selector: str | None = None
    """Label selector of the pods, serialised (scale subresource, HPA)."""
    shards: list[ShardStatus] | None = None
    """Cluster mode: each shard's master, replicas and slots."""
    cluster_state: str | None = None
    """Cluster mode: cluster_state from CLUSTER INFO (ok or fail)."""
    slots_assigned: int | None = None
    """Cluster mode: slots assigned to a master (16384 when complete)."""
    slots_ok: int | None = None
    """Cluster mode: slots served by a master that is not failing."""
    slots_to_move: int | None = None
    """Cluster mode: slots a running resharding still has to move (0 when balanced)."""
    resharding: str | None = None
    """Cluster mode: the running resharding, e.g. "resharding to 4 shards"."""
    current_revision: str | None = None
    """StatefulSet revision the pods not yet rolled run (the update revision once all are)."""
    update_revision: str | None = None
    """StatefulSet revision of the current pod template, which a rollout brings every pod to."""
    archive: ArchiveStatus | None = None
    """Continuous archiving (spec.backup.archive): the recoverable range of the current timeline."""


def redis_cluster_crd(*, shards: str, image: str, storage: bool = True) -> CRDMeta:
    """The RedisCluster kind's CRD settings, the same at every version (names, the scale
    subresource, the printer columns) but for where its spec keeps the shards and the image
    (``shards``, ``image``: JSON paths) and whether it is the storage version."""
    return CRDMeta(
        plural="redisclusters",
        short_names=("rdc",),
        categories=("redis",),
        scope="Namespaced",
        status_subresource=True,
        scale=ScaleSubresource(
            spec_replicas_path=".spec.replicas",
            status_replicas_path=".status.readyReplicas",
            label_selector_path=".status.selector",
        ),
        printer_columns=(
            PrinterColumn("Replicas", "integer", ".spec.replicas", "Desired pods"),
            PrinterColumn("Ready", "integer", ".status.readyReplicas", "Ready pods"),
            PrinterColumn("Master", "string", ".status.currentMaster", "Current master pod"),
            PrinterColumn("Phase", "string", ".status.phase", "Cluster phase"),
            PrinterColumn("State", "string", ".status.clusterState", "CLUSTER INFO state (cluster mode)"),
            PrinterColumn("Mode", "string", ".spec.mode", "replication or cluster", priority=1),
            PrinterColumn("Shards", "integer", shards, "Shards (cluster mode)", priority=1),
            PrinterColumn("Epoch", "integer", ".status.masterEpoch", "Master epoch", priority=1),
            PrinterColumn("Image", "string", image, "Redis image", priority=1),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
        storage=storage,
    )


# The conversion hub (pyctrl.conversion.Hub) and the type the operator reconciles;
# v1beta1.RedisClusterV1beta1 converts to and from it (the docstring is the CRD's description).
class RedisCluster(Hub, KubeObject):
    """A Redis master with replicas, failed over automatically by the pyctrl RedisCluster operator."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": NAME_RULES})

    gvk = GroupVersionKind("redis.pyctrl.dev", "v1alpha1", "RedisCluster")
    crd: ClassVar[CRDMeta] = redis_cluster_crd(shards=".spec.shards", image=".spec.image")

    spec: RedisClusterSpec = Field(default_factory=RedisClusterSpec)
    status: RedisClusterStatus | None = None
