"""What a mode's engine offers the top-level reconcile (``controller.RedisClusterReconciler``).

Both modes — ``replication.reconciler`` (one master and its replicas) and ``cluster.reconciler``
(a sharded Redis Cluster) — have the same small shape, called in this order by one reconcile:

1. :meth:`Engine.observe`: Kubernetes facts from the cache, Redis facts over the connection the
   security step gave (an unreachable Redis is a fact, never an error);
2. :meth:`Engine.plan`: **pure** — the same observation gives the same plan (who is master, whom
   to promote, which slots move, how many pods the StatefulSet should have);
3. :meth:`Engine.children`: the mode's desired children for that plan (the shared children step
   writes them; ``InvalidSpec`` when the spec cannot be run);
4. :meth:`Engine.execute`: the plan carried out, then the mode's day-2 work (rollouts, resharding,
   node loss, volumes); what it did is an :class:`Outcome`;
5. :meth:`Engine.status`: the status written when it changed, and when to look again.

An engine never reaches back into the reconciler: what it needs comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.backup.restore import RestoreState
from examples.rediscluster.shared.redis_admin import RedisAccess, RedisConnection
from pyctrl import Result
from pyctrl.client import Pod

__all__ = ["Engine", "Observation", "Outcome"]


class Observation(Protocol):
    """What an engine observed, as far as the shared steps need it."""

    @property
    def pods(self) -> Mapping[str, Pod]:
        """The cluster's pods (from the cache)."""
        ...

    def answering(self) -> dict[str, RedisConnection]:
        """pod -> its connection, for every pod whose Redis answered."""
        ...

    def checker(self) -> RedisConnection | None:
        """The pod where Redis checks ACL rules before the ACL Secret is written."""
        ...


class Outcome(Protocol):
    """What an engine's execute did."""

    #: the cluster as written by the engine (a replication-mode plan records the master first)
    cluster: RedisCluster
    #: True when something was done (the certificate and ACL reloads wait for a quiet reconcile)
    acted: bool
    #: set by the reconciler: certificates or the ACL file still being reloaded
    reloading: bool


LookT = TypeVar("LookT", bound=Observation)
PlanT = TypeVar("PlanT")
DoneT = TypeVar("DoneT", bound=Outcome)


class Engine(Protocol[LookT, PlanT, DoneT]):
    """One mode of the operator (module docstring)."""

    async def observe(self, cluster: RedisCluster, access: RedisAccess) -> LookT: ...

    def plan(self, cluster: RedisCluster, look: LookT, restore: RestoreState) -> PlanT: ...

    async def children(self, cluster: RedisCluster, look: LookT, plan: PlanT) -> list[dict[str, Any]]: ...

    async def execute(
        self, cluster: RedisCluster, look: LookT, plan: PlanT, *, invalid: str | None, restore: RestoreState
    ) -> DoneT: ...

    async def status(self, look: LookT, plan: PlanT, done: DoneT) -> Result: ...

    def forget(self, namespace: str, name: str) -> None: ...
