"""Carrying out a ``topology.Plan``: the status write, the Redis commands and the pod labels.

Guarantees of :meth:`PlanExecutor.execute`:

- actions run in the plan's order; ``RecordMaster`` is written to status (optimistic lock: a
  stale view gets Conflict and the reconcile requeues) *before* any Redis command, so a restarted
  operator resumes the same decision;
- the first Redis action that fails (``RedisAdminError``) stops the sequence; the reconcile
  requeues and plans again from what it then observes; ``Wait`` stops it without acting;
- Events: ``MasterElected`` (first master), ``FailoverCompleted`` (a promotion in place of another
  master, also counted in ``rediscluster_failovers_total``), ``SwitchoverStarted`` (``FAILOVER TO``).
"""

from __future__ import annotations

from typing import Any

from examples.rediscluster import metrics
from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.observe import Observed
from examples.rediscluster.redis_admin import RedisAdminError
from examples.rediscluster.resources import ROLE_LABEL
from examples.rediscluster.topology import (
    Demote,
    Plan,
    Promote,
    RecordMaster,
    ReplicaOf,
    SetLabel,
    Switchover,
    Wait,
)
from pyctrl.client.patch import MergeFrom, PatchType, RawPatch
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = ["PlanExecutor"]

log = get_logger("rediscluster")


class PlanExecutor:
    """Executes plans for the reconciler with its client and recorder."""

    def __init__(self, client: Any, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder

    async def execute(
        self, cluster: RedisCluster, observed: Observed, plan: Plan
    ) -> tuple[bool, RedisCluster]:
        """(whether anything was done, the cluster as stored after a status write)."""
        acted = False
        failover_from = cluster.status.current_master if cluster.status else None
        for action in plan.actions:
            try:
                match action:
                    case RecordMaster(pod=pod, epoch=epoch):
                        cluster = await self._record_master(cluster, pod, epoch)
                    case Promote(pod=pod):
                        await observed.connection(pod).promote()
                        self._announce(cluster, failover_from, pod)
                    case ReplicaOf(pod=pod, master=master) | Demote(pod=pod, master=master):
                        await observed.connection(pod).replica_of(observed.connection(master))
                    case Switchover(pod=pod, to=to):
                        await observed.connection(pod).failover_to(observed.connection(to))
                        self.recorder.event(
                            cluster,
                            "Normal",
                            "SwitchoverStarted",
                            f"handing the master over from {pod} to {to}",
                        )
                    case SetLabel(pod=pod, role=role):
                        await self.client.patch(
                            observed.pods[pod],
                            RawPatch(PatchType.MERGE, {"metadata": {"labels": {ROLE_LABEL: role.value}}}),
                        )
                    case Wait(reason=reason):
                        log.info("Waiting", cluster=cluster.name, namespace=cluster.namespace, reason=reason)
                        break
            except RedisAdminError as exc:
                log.info(
                    "Redis action failed; will retry",
                    cluster=cluster.name,
                    action=type(action).__name__,
                    error=str(exc),
                )
                return True, cluster
            acted = acted or not isinstance(action, Wait)
        return acted, cluster

    def _announce(self, cluster: RedisCluster, old: str | None, new: str) -> None:
        epoch = cluster.status.master_epoch if cluster.status else 0
        if old is None or old == new:
            self.recorder.event(cluster, "Normal", "MasterElected", f"{new} is the master (epoch {epoch})")
        else:
            self.recorder.event(
                cluster, "Normal", "FailoverCompleted", f"promoted {new} in place of {old} (epoch {epoch})"
            )
            metrics.observe_failover(cluster.namespace, cluster.name)

    async def _record_master(self, cluster: RedisCluster, pod: str, epoch: int) -> RedisCluster:
        """Persist the decision before acting on it (optimistic lock: a stale view gets Conflict)."""
        before = cluster.model_copy(deep=True)
        status = cluster.status.model_copy() if cluster.status else RedisClusterStatus()
        status.current_master = pod
        status.master_epoch = epoch
        status.phase = RedisClusterPhase.FAILOVER if epoch > 1 else RedisClusterPhase.INITIALIZING
        cluster.status = status
        stored: RedisCluster = await self.client.status().patch(
            cluster, MergeFrom(before, optimistic_lock=True)
        )
        log.info(
            "Recorded master decision",
            cluster=cluster.name,
            namespace=cluster.namespace,
            master=pod,
            epoch=epoch,
        )
        return stored
