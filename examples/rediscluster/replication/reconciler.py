"""The engine of a ``mode: replication`` RedisCluster: Kubernetes plumbing around ``topology``.

Called by ``controller.RedisClusterReconciler`` after fetching, deletion, the finalizer and the
security material; the shape of ``engine.Engine`` (level-triggered: the same observed state gives
the same writes, and a converged cluster gives none):

1. :meth:`~ReplicationModeReconciler.observe`: ``observe.observe`` every pod — Kubernetes facts
   from the cache, Redis facts via ``INFO`` — and register the pods with the background prober
   (which feeds a Channel source); how long the recorded master has been unhealthy is read here;
2. :meth:`~ReplicationModeReconciler.plan` (pure): ``topology.plan`` — or a planned switchover
   when the master's pod is terminating (a drain: ``topology.evacuate``) or a scale-in would
   remove the master — and the StatefulSet replicas to ask for (no pod is removed during a
   handover or before a scale-in's switchover);
3. :meth:`~ReplicationModeReconciler.children`: ``resources.desired_children`` (a malformed intent
   annotation is ``InvalidSpec``: ``intents.intent_error``); the run-time
   ``redisConfig`` settings are set first with ``CONFIG SET`` (``live_config``: a setting Redis
   refuses is ``InvalidSpec``, reported by the Event ``ConfigRejected``, and reaches no
   ``redis.conf``); the StatefulSet keeps its live ``volumeClaimTemplates`` (immutable);
4. :meth:`~ReplicationModeReconciler.execute`: the plan through ``execute.PlanExecutor``
   (``RecordMaster`` is written to status before any Redis command; a ``switchover-to`` annotation
   done or refused is removed first, ``intents.acknowledge_switchover``); once that plan is converged,
   ``rollout.Rollout`` brings outdated pods to the StatefulSet's update revision in the operator's
   order (replicas one at a time, one switchover, the old master); ``nodeloss.NodeLossGuard``
   force-deletes pods on a node lost for ``spec.nodeLoss.afterSeconds`` (when asked to);
   ``volumes.VolumeExpander`` grows the PersistentVolumeClaims to a raised ``storageSize``;
5. :meth:`~ReplicationModeReconciler.status`: ``status.reconcile_status`` (pure; the operator's
   metrics follow it every reconcile), written only when it changed, including the ``PodsScheduled``
   condition with the scheduler's message for pods it cannot place; ``decision.look_again``:
   requeue after 30 s when converged, 1 s while acting or degraded, 0.1 s while a ``FAILOVER TO``
   hands the master over.
"""

from __future__ import annotations

from typing import Any

from examples.rediscluster.api import RedisCluster, RedisClusterPhase
from examples.rediscluster.backup import archiving
from examples.rediscluster.backup.archiving import ArchiveObservation
from examples.rediscluster.backup.restore import RestoreState
from examples.rediscluster.replication.decision import (
    ACTING_REQUEUE,
    HANDOVER_REQUEUE,
    STEADY_REQUEUE,
    Decision,
    Done,
    Look,
    decide,
    look_again,
    policy,
    recorded,
    unhealthy_for,
)
from examples.rediscluster.replication.execute import PhaseTimer, PlanExecutor
from examples.rediscluster.replication.intents import acknowledge_switchover, intent_error
from examples.rediscluster.replication.live_config import LiveConfig
from examples.rediscluster.replication.nodeloss import NodeLossGuard
from examples.rediscluster.replication.observe import observe
from examples.rediscluster.replication.prober import HealthProber
from examples.rediscluster.replication.rollout import Rollout
from examples.rediscluster.replication.status import reconcile_status
from examples.rediscluster.replication.topology_types import Plan
from examples.rediscluster.replication.volumes import VolumeExpander, pin_claim_templates
from examples.rediscluster.shared import metrics
from examples.rediscluster.shared.redis_admin import RedisAccess
from examples.rediscluster.shared.resources import DEFAULT_CLUSTER_DOMAIN, InvalidSpec, desired_children
from examples.rediscluster.shared.status import now as utc_now
from examples.rediscluster.shared.status import publish_status
from pyctrl import Result
from pyctrl.client import Client, Reader
from pyctrl.recorder import EventRecorder

__all__ = ["ACTING_REQUEUE", "HANDOVER_REQUEUE", "STEADY_REQUEUE", "ReplicationModeReconciler"]


class ReplicationModeReconciler:
    """See the module docstring."""

    def __init__(
        self,
        client: Client,
        reader: Reader,
        recorder: EventRecorder,
        prober: HealthProber,
        io_timeout: float,
        *,
        cluster_domain: str = DEFAULT_CLUSTER_DOMAIN,
    ) -> None:
        self.client = client
        self.cluster_domain = cluster_domain
        self.recorder = recorder
        self.prober = prober
        self.io_timeout = io_timeout
        self.executor = PlanExecutor(client, recorder)
        self.node_loss = NodeLossGuard(client, recorder, prober)
        self.rollout = Rollout(client, recorder)
        self.live_config = LiveConfig(recorder)
        self.volumes = VolumeExpander(client, reader, recorder)

    def forget(self, namespace: str, name: str) -> None:
        self.prober.forget((namespace, name))
        self.rollout.forget(namespace, name)
        self.live_config.forget(namespace, name)

    async def observe(self, cluster: RedisCluster, access: RedisAccess) -> Look:
        timer = PhaseTimer()  # a failover's phases count from here
        observed = await observe(self.client, cluster, access, self.io_timeout)
        key, state = (cluster.namespace, cluster.name), recorded(cluster)
        down_after = cluster.spec.down_after_milliseconds / 1000
        self.prober.watch(key, observed.endpoints(), master=state.current_master, down_after=down_after)
        probe = self.prober.master_unhealthy_for(key)
        return Look(observed, state, unhealthy_for(cluster, observed, state.current_master, probe), timer)

    def plan(self, cluster: RedisCluster, look: Look, restore: RestoreState) -> Decision:
        return decide(cluster, look)

    async def children(self, cluster: RedisCluster, look: Look, plan: Decision) -> list[dict[str, Any]]:
        if (malformed := intent_error(cluster)) is not None:
            raise InvalidSpec(malformed)
        children = desired_children(cluster, plan.replicas, cluster_domain=self.cluster_domain)
        if (refused := await self.live_config.apply(cluster, look.observed)) is not None:
            raise InvalidSpec(refused, reported=True)  # Event ConfigRejected: no redis.conf with it
        await pin_claim_templates(self.client, children)
        return children

    async def execute(
        self, cluster: RedisCluster, look: Look, plan: Decision, *, invalid: str | None, restore: RestoreState
    ) -> Done:
        if plan.hibernate:  # the StatefulSet at 0 (children): each Redis saves its data as it stops
            return Done.hibernating(cluster, invalid, restore.condition)
        timer, observed = look.timer.decided(look.master_unhealthy_for), look.observed
        cluster = await acknowledge_switchover(self.client, self.recorder, cluster, look)
        acted, cluster = await self.executor.execute(cluster, observed, plan.plan, timer)
        idle = not acted and plan.plan.converged and plan.replicas == cluster.spec.replicas
        rollout = await self.rollout.step(cluster, observed, look.recorded, policy(cluster), idle=idle)
        if isinstance(rollout.step, Plan):  # the master's turn: one planned switchover first
            acted, cluster = await self.executor.execute(cluster, observed, rollout.step)
        await self.node_loss.recover(cluster, observed)
        volumes = await self.volumes.expand(cluster, utc_now()) if invalid is None else None
        return Done(cluster, acted, rollout, volumes, invalid, restore.condition)

    async def status(self, look: Look, plan: Decision, done: Done) -> Result:
        cluster, now = done.cluster, utc_now()
        done.archive = await self._observe_archive(cluster, look, now)
        new = reconcile_status(look, plan, done, now)  # pure
        metrics.observe_nodes(cluster.namespace, cluster.name, look.observed.nodes)
        await publish_status(self.client, cluster, new, pods=cluster.spec.replicas)
        return look_again(look, plan, done, running=new.phase is RedisClusterPhase.RUNNING)

    async def _observe_archive(self, cluster: RedisCluster, look: Look, now: str) -> ArchiveObservation:
        """``status.archive`` and ``ContinuousArchiving`` from the master's archiver sidecar."""
        master = cluster.status.current_master if cluster.status else None
        return await archiving.observe_archive(
            cluster, look.pods, master, now, io_seconds=min(self.io_timeout, 2.0)
        )
