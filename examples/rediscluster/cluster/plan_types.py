"""The vocabulary of the cluster-mode topology decisions: members, actions, the plan.

Frozen data only; the rules that use them are in :mod:`examples.rediscluster.cluster.plan`, which
re-exports every name here (as ``topology_types`` is to ``topology`` in replication mode).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from examples.rediscluster.cluster.nodes import NodeFacts
from examples.rediscluster.cluster.slots import EMPTY_SLOTS

__all__ = [
    "SHARD_LABEL",
    "Action",
    "AddSlots",
    "Forget",
    "Meet",
    "Member",
    "MoveSlots",
    "Plan",
    "Replicate",
    "Reset",
    "SetLabels",
    "Takeover",
    "Wait",
]

SHARD_LABEL = "redis.pyctrl.dev/shard"


@dataclass(frozen=True, slots=True)
class Member:
    """One pod of the cluster: Kubernetes facts plus its node's answer (None: no valid reply)."""

    pod: str
    ordinal: int
    ip: str | None
    port: int = 6379
    pod_ready: bool = False
    role_label: str | None = None
    shard_label: str | None = None
    facts: NodeFacts | None = None

    @property
    def reachable(self) -> bool:
        return self.facts is not None and self.ip is not None and not self.facts.loading

    @property
    def node_id(self) -> str | None:
        return self.facts.node_id if self.facts is not None else None

    @property
    def slots(self) -> AbstractSet[int]:
        """Slots this node itself claims (its ``myself`` line), held as runs."""
        return self.facts.me.slots if self.facts is not None else EMPTY_SLOTS

    @property
    def is_master(self) -> bool:
        return self.facts is not None and self.facts.me.is_master


# Actions, carried out in order; the executor stops at the first failure and requeues.
@dataclass(frozen=True, slots=True)
class Meet:
    """``CLUSTER MEET ip port`` sent by ``pod``: it learns of the node at that address."""

    pod: str
    ip: str
    port: int


@dataclass(frozen=True, slots=True)
class AddSlots:
    """``CLUSTER ADDSLOTSRANGE`` on ``pod``: it serves ``slots``, which no node served."""

    pod: str
    slots: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Replicate:
    """``CLUSTER REPLICATE master_id`` on ``pod``: it becomes a replica of that node."""

    pod: str
    master_id: str


@dataclass(frozen=True, slots=True)
class Takeover:
    """``CLUSTER FAILOVER TAKEOVER`` on replica ``pod``: its master ``dead_id`` is provably gone."""

    pod: str
    dead_id: str


@dataclass(frozen=True, slots=True)
class Reset:
    """``CLUSTER RESET SOFT`` on fenced replica ``pod``: it becomes an empty master (rule 4c)."""

    pod: str


@dataclass(frozen=True, slots=True)
class Forget:
    """``CLUSTER FORGET node_id`` on ``pod``: a node that is no longer part of the cluster."""

    pod: str
    node_id: str


@dataclass(frozen=True, slots=True)
class MoveSlots:
    """Move ``slots`` from pod ``source`` to pod ``target`` (background, ``cluster.mover``)."""

    source: str
    target: str
    slots: tuple[int, ...]
    repair: bool = False  # finishing slots left open by a crash


@dataclass(frozen=True, slots=True)
class SetLabels:
    """The role and shard labels of ``pod``."""

    pod: str
    role: str
    shard: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing safe to do now: the executor stops here; the reconcile observes again."""

    reason: str


Action = Meet | AddSlots | Replicate | Takeover | Reset | Forget | MoveSlots | SetLabels | Wait


@dataclass(frozen=True, slots=True)
class Plan:
    """The actions of one reconcile, in order, and the StatefulSet size to ask for meanwhile."""

    actions: tuple[Action, ...]
    statefulset_replicas: int

    @property
    def converged(self) -> bool:
        return not self.actions

    @property
    def moves(self) -> tuple[MoveSlots, ...]:
        return tuple(a for a in self.actions if isinstance(a, MoveSlots))
