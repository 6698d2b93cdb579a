"""The vocabulary of the RedisCluster topology decisions: observations, recorded state, actions.

Frozen data only (plus :class:`DownDetector`, the probe history of one endpoint); the decisions
that use them are in :mod:`examples.rediscluster.replication.topology`, which re-exports every name here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from examples.rediscluster.shared.facts import NULL_REPLID, RedisFacts, Role

__all__ = [
    "NULL_REPLID",
    "Action",
    "ClusterState",
    "Demote",
    "DownDetector",
    "NodeObservation",
    "Plan",
    "Policy",
    "Promote",
    "RecordMaster",
    "RedisFacts",
    "ReplicaOf",
    "Role",
    "ScaleDown",
    "SetLabel",
    "Switchover",
    "Wait",
]


@dataclass(frozen=True, slots=True)
class NodeObservation:
    """One pod: Kubernetes facts plus ``redis`` (None when Redis gave no valid reply in time)."""

    pod: str
    ordinal: int
    ip: str | None
    port: int = 6379
    pod_ready: bool = False
    label: str | None = None  # current value of the pod's role label
    terminating: bool = False
    redis: RedisFacts | None = None
    node: str | None = None  # the Node the pod is bound to (spec.nodeName)

    @property
    def reachable(self) -> bool:
        return self.redis is not None and self.ip is not None

    @property
    def role(self) -> Role | None:
        return self.redis.role if self.redis is not None else None

    def follows(self, master: NodeObservation) -> bool:
        """True when this replica is configured to replicate from ``master``'s current address."""
        r = self.redis
        return (
            r is not None
            and r.role is Role.REPLICA
            and master.ip is not None
            and (r.master_host, r.master_port) == (master.ip, master.port)
        )


@dataclass(frozen=True, slots=True)
class ClusterState:
    """The decision recorded in status: who is master, and the failover epoch that chose it."""

    current_master: str | None = None
    master_epoch: int = 0


@dataclass(frozen=True, slots=True)
class Policy:
    """The spec fields that drive decisions."""

    down_after: float = 5.0  # seconds (spec downAfterMilliseconds / 1000)
    enable_auto_failover: bool = True
    link_down_factor: float = 10.0  # Sentinel: replicas disconnected > 10 x down-after are skipped
    #: pods never made master nor promoted (annotation ``redis.pyctrl.dev/fenced-pods``)
    fenced: frozenset[str] = frozenset()


# Actions, carried out in plan order; the executor stops at the first failure and requeues.


@dataclass(frozen=True, slots=True)
class RecordMaster:
    """Persist status ``currentMaster=pod``, ``masterEpoch=epoch`` before any later action."""

    pod: str
    epoch: int


@dataclass(frozen=True, slots=True)
class Promote:
    """``REPLICAOF NO ONE`` on ``pod``, then its ``role:master`` verified."""

    pod: str


@dataclass(frozen=True, slots=True)
class ReplicaOf:
    """``REPLICAOF <master>`` on the replica ``pod``."""

    pod: str
    master: str


@dataclass(frozen=True, slots=True)
class Demote:
    """``REPLICAOF <master>`` on ``pod`` while it is a master (a returning old master, a fresh pod
    at bootstrap)."""

    pod: str
    master: str


@dataclass(frozen=True, slots=True)
class Switchover:
    """A planned handover run on the live old master ``pod`` (``redis_admin.failover_to``: ``CLIENT
    PAUSE WRITE``, ``to`` caught up, then ``FAILOVER TO <to> FORCE``), then waited for until ``to``
    is master (the following actions see the handover done)."""

    pod: str
    to: str


@dataclass(frozen=True, slots=True)
class SetLabel:
    """The role label of ``pod``."""

    pod: str
    #: a Role, or ``"fenced"`` (``api.intents.FENCED_LABEL``: no Service selects it)
    role: Role | str


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing safe to do now: the executor stops here; the reconcile requeues and observes again."""

    reason: str


Action = RecordMaster | Promote | ReplicaOf | Demote | Switchover | SetLabel | Wait


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...] = ()
    #: why a failover plan fails over (e.g. "master cache-0 is down"): the FailoverCompleted
    #: Event and the failover's log line say it; not part of the plan's identity
    reason: str = field(default="", compare=False)

    @property
    def converged(self) -> bool:
        return not self.actions


@dataclass(frozen=True, slots=True)
class ScaleDown:
    """Pods a scale-in removes; when the master is among them, switch over to ``failover_to`` first."""

    victims: tuple[str, ...]
    fail_over_first: bool = False
    failover_to: str | None = None


class DownDetector:
    """Probe history of one endpoint. Pure: callers pass the times (from an injected clock).

    ``unhealthy_for(now)`` is 0 while the latest sample is valid, else the time since the last valid
    reply (or, when none was ever valid, since ``since``: when watching began, e.g. when a probe that
    then hung was sent; default the first sample). One bad probe therefore never makes an endpoint
    down: it is down only once no valid reply came for the whole ``down_after`` window.
    """

    __slots__ = ("_first", "_last_at", "_last_ok", "_latest_ok")

    def __init__(self, since: float | None = None) -> None:
        self._first: float | None = since
        self._last_at = -math.inf
        self._last_ok: float | None = None
        self._latest_ok = True

    @property
    def last_valid_reply(self) -> float | None:
        return self._last_ok

    @property
    def answering(self) -> bool:
        """False while the latest sample was not a valid reply (True before any sample)."""
        return self._latest_ok

    def record(self, at: float, ok: bool) -> None:
        if at < self._last_at:
            return  # a late sample never overrides a newer one
        if self._first is None:
            self._first = at
        self._last_at = at
        self._latest_ok = ok
        if ok:
            self._last_ok = at

    def unhealthy_for(self, now: float) -> float:
        if self._latest_ok:  # also before any sample
            return 0.0
        since = self._last_ok if self._last_ok is not None else self._first
        return max(0.0, now - since) if since is not None else 0.0

    def is_down(self, now: float, down_after: float) -> bool:
        return not self._latest_ok and self.unhealthy_for(now) >= down_after
