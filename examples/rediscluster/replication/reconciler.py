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
3. :meth:`~ReplicationModeReconciler.children`: ``resources.desired_children``; the run-time
   ``redisConfig`` settings are set first with ``CONFIG SET`` (``live_config``: a setting Redis
   refuses is ``InvalidSpec``, reported by the Event ``ConfigRejected``, and reaches no
   ``redis.conf``); the StatefulSet keeps its live ``volumeClaimTemplates`` (immutable);
4. :meth:`~ReplicationModeReconciler.execute`: the plan through ``execute.PlanExecutor``
   (``RecordMaster`` is written to status before any Redis command); once that plan is converged,
   ``rollout.Rollout`` brings outdated pods to the StatefulSet's update revision in the operator's
   order (replicas one at a time, one switchover, the old master); ``nodeloss.NodeLossGuard``
   force-deletes pods on a node lost for ``spec.nodeLoss.afterSeconds`` (when asked to);
   ``volumes.VolumeExpander`` grows the PersistentVolumeClaims to a raised ``storageSize``;
5. :meth:`~ReplicationModeReconciler.status`: ``status.observed_status`` (the operator's metrics
   follow it every reconcile), written only when it changed, including the ``PodsScheduled``
   condition with the scheduler's message for pods it cannot place; requeue after 30 s when
   converged, 1 s while acting or degraded, 0.1 s while a ``FAILOVER TO`` hands the master over.
"""

from __future__ import annotations

from typing import Any

from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.api.intents import (
    SWITCHOVER_TO,
    InvalidIntent,
    fenced_pods,
    hibernation,
    switchover_to,
)
from examples.rediscluster.backup.restore import RestoreState
from examples.rediscluster.replication.decision import (
    ACTING_REQUEUE,
    HANDOVER_REQUEUE,
    STEADY_REQUEUE,
    Decision,
    Done,
    Look,
    decide,
    hibernation_asked,
    master_loaded,
    policy,
    recorded,
    requeue_after,
    requeue_priority,
    switchover_refusal,
    unhealthy_for,
    was_hibernated,
)
from examples.rediscluster.replication.execute import PhaseTimer, PlanExecutor
from examples.rediscluster.replication.live_config import LiveConfig
from examples.rediscluster.replication.nodeloss import NodeLossGuard
from examples.rediscluster.replication.observe import observe
from examples.rediscluster.replication.prober import HealthProber
from examples.rediscluster.replication.rollout import Rollout
from examples.rediscluster.replication.status import observed_status
from examples.rediscluster.replication.topology_types import Plan, Role
from examples.rediscluster.replication.volumes import VolumeExpander, pin_claim_templates
from examples.rediscluster.shared import metrics
from examples.rediscluster.shared.redis_admin import RedisAccess
from examples.rediscluster.shared.resources import DEFAULT_CLUSTER_DOMAIN, InvalidSpec, desired_children
from examples.rediscluster.shared.rollout import RolloutDecision, progressing_condition, with_revisions
from examples.rediscluster.shared.status import condition, write_status
from examples.rediscluster.shared.status import now as utc_now
from pyctrl import Result
from pyctrl.client import Client, RawPatch, Reader
from pyctrl.client.objects import Condition
from pyctrl.client.patch import PatchType
from pyctrl.recorder import EventRecorder

__all__ = ["ACTING_REQUEUE", "HANDOVER_REQUEUE", "STEADY_REQUEUE", "ReplicationModeReconciler"]

_NO_PERSISTENCE = (
    "hibernation refused: spec.enablePersistence is false, so stopping the pods would lose the data; "
    "enable persistence first or remove the annotation redis.pyctrl.dev/hibernation"
)


def _hibernated_condition(cluster: RedisCluster, look: Look, converged: bool, now: str) -> Condition | None:
    """``Hibernated`` while not hibernating: True (Waking) until the master serves again after a
    hibernation, then False (Awake); False (HibernationRefused) when asked without persistence;
    none for a cluster that never hibernated."""
    old = cluster.status or RedisClusterStatus()
    if hibernation_asked(cluster):  # without persistence: decide() did not hibernate
        return condition(old, "Hibernated", False, "HibernationRefused", _NO_PERSISTENCE, now=now)
    if was_hibernated(cluster):
        if not converged or not master_loaded(look):
            message = f"waking: every pod back, {look.recorded.current_master} the master again"
            return condition(old, "Hibernated", True, "Waking", message, now=now)
        return condition(old, "Hibernated", False, "Awake", "woken from hibernation", now=now)
    return next((c for c in old.conditions if c.type == "Hibernated"), None)


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
        try:
            fenced_pods(cluster)
            hibernation(cluster)
        except InvalidIntent as exc:
            raise InvalidSpec(str(exc)) from None
        children = desired_children(cluster, plan.replicas, cluster_domain=self.cluster_domain)
        if (refused := await self.live_config.apply(cluster, look.observed)) is not None:
            raise InvalidSpec(refused, reported=True)  # Event ConfigRejected: no redis.conf with it
        await pin_claim_templates(self.client, children)
        return children

    async def execute(
        self, cluster: RedisCluster, look: Look, plan: Decision, *, invalid: str | None, restore: RestoreState
    ) -> Done:
        observed, timer = look.observed, look.timer
        if plan.hibernate:  # the StatefulSet at 0 (children): each Redis saves its data as it stops
            resting = RolloutDecision(cluster.status.current_revision if cluster.status else None, None)
            return Done(cluster, False, resting, None, invalid, restore.condition)
        timer.detection = look.master_unhealthy_for
        timer.mark("decision")
        cluster = await self._acknowledge_switchover(cluster, look)
        acted, cluster = await self.executor.execute(cluster, observed, plan.plan, timer)
        idle = not acted and plan.plan.converged and plan.replicas == cluster.spec.replicas
        rollout = await self.rollout.step(cluster, observed, look.recorded, policy(cluster), idle=idle)
        if isinstance(rollout.step, Plan):  # the master's turn: one planned switchover first
            acted, cluster = await self.executor.execute(cluster, observed, rollout.step)
        await self.node_loss.recover(cluster, observed)
        volumes = await self.volumes.expand(cluster, utc_now()) if invalid is None else None
        return Done(cluster, acted, rollout, volumes, invalid, restore.condition)

    async def _hibernation_status(self, cluster: RedisCluster, look: Look, now: str) -> Result:
        """Phase ``Hibernated`` once no pod is left (the recorded master kept for the wake-up);
        Ready False meanwhile, with the pods still stopping named."""
        old = cluster.status or RedisClusterStatus()
        left = sorted(look.pods)
        stopping = f"hibernating: {len(left)} pod(s) still stopping ({', '.join(left)})"
        message = stopping if left else "hibernated: every pod stopped, the volumes kept"
        reason = "Hibernating" if left else "Hibernated"
        kept = [c for c in old.conditions if c.type not in ("Ready", "Hibernated", "Degraded")]
        new = old.model_copy(
            update={
                "phase": RedisClusterPhase.HIBERNATED if not left else old.phase,
                "ready_replicas": 0,
                "observed_generation": cluster.metadata.generation,
                "conditions": [
                    condition(old, "Ready", False, reason, message, now=now),
                    condition(old, "Degraded", False, reason, message, now=now),
                    condition(old, "Hibernated", True, reason, message, now=now),
                    *kept,
                ],
            }
        )
        metrics.observe_status(cluster.namespace, cluster.name, cluster.spec.replicas, new)
        metrics.observe_nodes(cluster.namespace, cluster.name, look.observed.nodes)
        await write_status(self.client, cluster, new)
        return Result(requeue_after=ACTING_REQUEUE if left else STEADY_REQUEUE)

    async def _acknowledge_switchover(self, cluster: RedisCluster, look: Look) -> RedisCluster:
        """Remove a ``switchover-to`` annotation once its pod is the serving master (Event
        ``SwitchoverDone``) or when it can never be (Event ``SwitchoverRefused``, naming why)."""
        target = switchover_to(cluster)
        if target is None:
            return cluster
        refusal = switchover_refusal(cluster, look, target)
        node = next((n for n in look.observed.nodes if n.pod == target), None)
        done = look.recorded.current_master == target and node is not None and node.role is Role.MASTER
        if refusal is None and not done:
            return cluster
        if refusal is not None:
            self.recorder.event(cluster, "Warning", "SwitchoverRefused", f"switchover to {target}: {refusal}")
        else:
            self.recorder.event(cluster, "Normal", "SwitchoverDone", f"{target} is the master, as asked")
        patch = RawPatch(PatchType.MERGE, {"metadata": {"annotations": {SWITCHOVER_TO: None}}})
        stored: RedisCluster = await self.client.patch(cluster, patch)
        return stored

    async def status(self, look: Look, plan: Decision, done: Done) -> Result:
        cluster, the_plan, rollout, observed = done.cluster, plan.plan, done.rollout, look.observed
        now = utc_now()
        if plan.hibernate:
            return await self._hibernation_status(cluster, look, now)
        extra = [done.restored, progressing_condition(cluster, rollout, now), done.volumes]
        extra.append(_hibernated_condition(cluster, look, the_plan.converged, now))
        new = with_revisions(
            observed_status(
                cluster,
                observed.nodes,
                the_plan.converged,
                now,
                invalid_spec=done.invalid,
                unschedulable=observed.unschedulable,
                extra_conditions=[c for c in extra if c is not None],
            ),
            rollout,
        )
        metrics.observe_status(cluster.namespace, cluster.name, cluster.spec.replicas, new)
        metrics.observe_nodes(cluster.namespace, cluster.name, observed.nodes)
        await write_status(self.client, cluster, new)
        running = new.phase is RedisClusterPhase.RUNNING
        return Result(
            requeue_after=requeue_after(look, plan, done, running=running),
            priority=requeue_priority(look, plan, done, running=running),
        )
