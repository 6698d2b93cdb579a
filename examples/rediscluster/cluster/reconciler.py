"""The engine of a ``mode: cluster`` RedisCluster: Kubernetes plumbing around ``cluster.plan``.

Called by ``controller.RedisClusterReconciler`` after fetching, deletion, the finalizer and the
security material; the shape of ``engine.Engine``, like ``replication.reconciler`` (level-triggered:
a converged cluster costs reads only, no write):

1. :meth:`~ClusterModeReconciler.observe`: every pod — Kubernetes facts from the cache,
   ``CLUSTER NODES``/``INFO`` with a short timeout (``cluster.admin``), every connection (and the
   mover's) as the security step's ``RedisAccess`` says (TLS verified against ``ca.crt`` with
   ``spec.tls``, as ``pyctrl-operator`` with ``spec.users``);
2. :meth:`~ClusterModeReconciler.plan` (pure): ``cluster.plan``; slots without keys go back to the
   shard that held them (in the status, or in the backup a ``restoreFrom`` seeds from);
3. :meth:`~ClusterModeReconciler.children`: ``cluster.resources`` for the plan's StatefulSet size;
4. :meth:`~ClusterModeReconciler.execute`: the plan's actions in order (labels, MEET,
   ADDSLOTSRANGE, REPLICATE, FORGET); the first failing action ends the sequence and the reconcile
   requeues. Slot moves go to the background ``SlotMover`` (one job per cluster; a shards change
   while one runs waits for it, reported in the Resharding condition, as are failing migration
   steps, with a ``SlotMigrationFailed`` Warning Event; a job that a failover or restart
   overtook, ``mover.outdated``, is cancelled with a ``ReshardingInterrupted`` Warning and planned
   again). Once the plan is converged, nothing else was done and no slot moves,
   ``cluster.rollout`` takes the next step of a template change's rollout (one pod restart or one
   planned ``CLUSTER FAILOVER``, one shard at a time);
5. :meth:`~ClusterModeReconciler.status`: ``status.reconcile_status`` (pure) written only when it
   changed; Events when a shard's master changed (``FailoverCompleted``) and when a resharding
   starts or ends; day-2 intent annotations (``api.intents``: hibernation, fencing, switchover)
   are acted on by replication mode only: here they give the condition ``Intents`` (False,
   ``UnsupportedInClusterMode``) and a Warning Event of that reason when its message changes;
   requeue after 10 s when converged (Redis Cluster fails shards over by itself: the periodic look
   keeps labels and status following the real roles), 1 s while work is under way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.backup.restore import RestoreState
from examples.rediscluster.cluster import admin
from examples.rediscluster.cluster import metrics as cluster_metrics
from examples.rediscluster.cluster import plan_types as act
from examples.rediscluster.cluster.mover import Endpoint, Job, SlotMover, Transfer, outdated
from examples.rediscluster.cluster.plan import plan
from examples.rediscluster.cluster.plan_types import SHARD_LABEL, Member, Plan
from examples.rediscluster.cluster.resources import cluster_children
from examples.rediscluster.cluster.rollout import ClusterRollout
from examples.rediscluster.cluster.slots import parse_ranges
from examples.rediscluster.cluster.status import Done, Resharding, reconcile_status
from examples.rediscluster.shared import redis_admin
from examples.rediscluster.shared.pods import ordinal, pod_facts
from examples.rediscluster.shared.redis_admin import RedisAccess, RedisConnection
from examples.rediscluster.shared.resources import (
    DEFAULT_CLUSTER_DOMAIN,
    REDIS_PORT,
    ROLE_LABEL,
    selector_labels,
)
from examples.rediscluster.shared.status import now as utc_now
from examples.rediscluster.shared.status import publish_status
from pyctrl import Result
from pyctrl.client import Client, Pod
from pyctrl.client.patch import PatchType, RawPatch
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder
from pyctrl.workqueue import LOW_PRIORITY

__all__ = ["ClusterModeReconciler", "Done", "Members"]

STEADY_REQUEUE = 10.0
#: the reason of the Intents condition and Event: day-2 intents are replication mode's
_UNSUPPORTED = "UnsupportedInClusterMode"
ACTING_REQUEUE = 1.0
log = get_logger("rediscluster.cluster")


@dataclass
class Members:
    """What one reconcile observed: the pods and what each node says (``CLUSTER NODES``, ``INFO``)."""

    pods: dict[str, Pod]
    members: list[Member]
    access: RedisAccess
    io_timeout: float

    def answering(self) -> dict[str, RedisConnection]:
        return {
            m.pod: self.access.at(m.ip, m.port, self.io_timeout)
            for m in self.members
            if m.ip and m.facts is not None
        }

    def checker(self) -> RedisConnection | None:
        """A node that answers, where Redis checks ACL rules first."""
        return next(iter(self.answering().values()), None)


class ClusterModeReconciler:
    """See the module docstring."""

    def __init__(
        self,
        client: Client,
        recorder: EventRecorder,
        mover: SlotMover,
        *,
        io_timeout: float = redis_admin.DEFAULT_IO_TIMEOUT,
        cluster_domain: str = DEFAULT_CLUSTER_DOMAIN,
    ) -> None:
        self.client = client
        self.cluster_domain = cluster_domain
        self.recorder = recorder
        self.mover = mover
        self.io_timeout = io_timeout
        self._serving: dict[tuple[str, str], dict[int, tuple[str, tuple[str, ...]]]] = {}
        self._errors_seen: dict[tuple[str, str], int] = {}  # failed steps already announced
        self.rollout = ClusterRollout(client, recorder)

    def forget(self, namespace: str, name: str) -> None:
        """The cluster is gone: stop its migration and drop its metrics."""
        self.mover.forget((namespace, name))
        self._serving.pop((namespace, name), None)
        self._errors_seen.pop((namespace, name), None)
        self.rollout.forget(namespace, name)
        cluster_metrics.forget(namespace, name, 100)

    async def observe(self, cluster: RedisCluster, access: RedisAccess) -> Members:
        pods, members = await self._observe(cluster, access)
        return Members(pods, members, access, self.io_timeout)

    def plan(self, cluster: RedisCluster, look: Members, restore: RestoreState) -> Plan:
        replicas = cluster.spec.replicas_per_shard
        return plan(look.members, cluster.spec.shards, replicas, recorded=_homes(cluster, restore.slot_homes))

    async def children(self, cluster: RedisCluster, look: Members, plan: Plan) -> list[dict[str, Any]]:
        return cluster_children(cluster, plan.statefulset_replicas, cluster_domain=self.cluster_domain)

    async def execute(
        self, cluster: RedisCluster, look: Members, plan: Plan, *, invalid: str | None, restore: RestoreState
    ) -> Done:
        acted = await self._execute(cluster, look.pods, look.members, plan, look.access)
        resharding = self._resharding(cluster, look.members, plan, look.access)
        converged = plan.converged and resharding is None
        idle = converged and not acted and invalid is None and restore.blocked is None
        rollout = await self.rollout.step_cluster(
            cluster, look.pods, look.members, look.access, idle=idle, io_timeout=self.io_timeout
        )
        acted = acted or rollout.step is not None
        return Done(cluster, acted, converged, resharding, rollout, invalid, restore.condition)

    async def status(self, look: Members, plan: Plan, done: Done) -> Result:
        cluster, new = done.cluster, reconcile_status(look.members, done, utc_now())  # pure
        self._announce_intents(cluster, cluster.status or RedisClusterStatus(), new)
        self._announce_failovers(cluster, cluster.status or RedisClusterStatus(), new)
        cluster_metrics.observe_status(cluster.namespace, cluster.name, new)
        pods = cluster.spec.shards * (1 + cluster.spec.replicas_per_shard)
        await publish_status(self.client, cluster, new, pods=pods)
        settled = (
            new.phase is RedisClusterPhase.RUNNING and not done.rollout.in_progress and not done.reloading
        )
        if settled and not done.acted:  # the periodic look-again: behind every live change
            return Result(requeue_after=STEADY_REQUEUE, priority=LOW_PRIORITY)
        return Result(requeue_after=ACTING_REQUEUE)

    async def _observe(
        self, cluster: RedisCluster, access: RedisAccess
    ) -> tuple[dict[str, Pod], list[Member]]:
        listed = await self.client.list(Pod, namespace=cluster.namespace, labels=selector_labels(cluster))
        pods = {p.name: p for p in listed if ordinal(p) >= 0 and not p.metadata.deletion_timestamp}

        async def one(pod: Pod) -> Member:
            ip, facts = pod_facts(pod)["ip"], None
            if ip:
                try:
                    facts = await admin.cluster_facts(access.at(ip, REDIS_PORT, self.io_timeout))
                except redis_admin.RedisAdminError:
                    facts = None
            labels = pod.metadata.labels or {}
            return Member(
                **pod_facts(pod),
                role_label=labels.get(ROLE_LABEL),
                shard_label=labels.get(SHARD_LABEL),
                facts=facts,
            )

        return pods, list(await asyncio.gather(*(one(p) for p in pods.values())))

    async def _execute(
        self,
        cluster: RedisCluster,
        pods: dict[str, Pod],
        members: list[Member],
        the_plan: Plan,
        access: RedisAccess,
    ) -> bool:
        by_pod = {m.pod: m for m in members}
        acted = False

        def conn(pod: str) -> RedisConnection:
            ip = by_pod[pod].ip
            if ip is None:
                raise redis_admin.RedisUnavailable("", REDIS_PORT, f"pod {pod} has no IP yet")
            return access.at(ip, REDIS_PORT, self.io_timeout)

        for action in the_plan.actions:
            note: tuple[str, str, str] | None = None  # an Event once the action is done
            try:
                match action:
                    case act.SetLabels(pod=pod, role=role, shard=shard):
                        labels = {ROLE_LABEL: role, SHARD_LABEL: str(shard)}
                        await self.client.patch(
                            pods[pod], RawPatch(PatchType.MERGE, {"metadata": {"labels": labels}})
                        )
                    case act.Meet(pod=pod, ip=peer_ip, port=peer_port):
                        await admin.meet(conn(pod), peer_ip, peer_port)
                    case act.AddSlots(pod=pod, slots=slots):
                        await admin.add_slots(conn(pod), slots)
                        note = ("Normal", "SlotsAssigned", f"{len(slots)} unassigned slots given to {pod}")
                    case act.Replicate(pod=pod, master_id=master_id):
                        await admin.replicate(conn(pod), master_id)
                    case act.Takeover(pod=pod, dead_id=dead_id):
                        await admin.takeover(conn(pod))
                        why = f"{pod} takes over the slots of {dead_id[:8]} (its pod came back without data)"
                        note = ("Warning", "ShardTakeover", why)
                    case act.Reset(pod=pod):
                        await admin.reset_soft(conn(pod))
                        note = (
                            "Warning",
                            "ShardDataLost",
                            f"{pod} restarts its shard empty: no copy survived",
                        )
                    case act.Forget(pod=pod, node_id=node_id):
                        await admin.forget(conn(pod), node_id)
                    case act.MoveSlots():
                        continue  # handed to the mover by _resharding
                    case act.Wait(reason=reason):
                        log.info("Waiting", cluster=cluster.name, namespace=cluster.namespace, reason=reason)
                        break
            except redis_admin.RedisAdminError as exc:
                log.info(
                    "Redis action failed; will retry",
                    cluster=cluster.name,
                    action=type(action).__name__,
                    error=str(exc),
                )
                return True
            if note is not None:
                self.recorder.event(cluster, *note)
            acted = acted or not isinstance(action, act.Wait)
        return acted

    def _resharding(
        self, cluster: RedisCluster, members: list[Member], the_plan: Plan, access: RedisAccess
    ) -> Resharding | None:
        """Hand the plan's moves to the mover (unless a job runs); what the status should say."""
        key = (cluster.namespace, cluster.name)
        progress = self.mover.progress(key)
        job = self.mover.job(key)
        if progress is not None and job is not None and self.mover.running(key):
            if (why := outdated(job, members)) is not None:  # planned again from the next look
                self.mover.forget(key)
                self._errors_seen.pop(key, None)
                self.recorder.event(
                    cluster, "Warning", "ReshardingInterrupted", f"{progress.label}: {why}; planning again"
                )
                return Resharding(progress.label, progress.slots_remaining, None, progress.errors, why)
            target = f"to {cluster.spec.shards} shards"
            waiting = None
            if progress.label != _REPAIR and not progress.label.endswith(target):
                waiting = f"the change to {cluster.spec.shards} shards"
            if progress.errors > self._errors_seen.get(key, 0):
                self._errors_seen[key] = progress.errors
                self.recorder.event(
                    cluster,
                    "Warning",
                    "SlotMigrationFailed",
                    f"{progress.label}: a slot move failed, retried with backoff: {progress.last_error}",
                )
            return Resharding(
                progress.label, progress.slots_remaining, waiting, progress.errors, progress.last_error
            )
        if progress is not None and progress.finished:
            self.mover.forget(key)
            self._errors_seen.pop(key, None)
            self.recorder.event(
                cluster,
                "Normal",
                "ReshardingCompleted",
                f"{progress.label}: {progress.slots_done} slots, {progress.keys_moved} keys moved "
                f"({progress.errors} retried errors)",
            )
        if not the_plan.moves:
            return None
        by_pod = {m.pod: m for m in members}

        def endpoint(pod: str) -> Endpoint:
            m = by_pod[pod]
            assert m.ip is not None
            assert m.node_id is not None
            return Endpoint(m.ip, m.port, m.node_id)

        masters = tuple(endpoint(m.pod) for m in members if m.reachable and m.is_master)
        transfers = tuple(
            Transfer(endpoint(mv.source), endpoint(mv.target), mv.slots) for mv in the_plan.moves
        )
        job = Job(_label(cluster, the_plan), transfers, masters)
        self.mover.submit(key, job, access)
        moves = ", ".join(f"{len(mv.slots)} {mv.source} -> {mv.target}" for mv in the_plan.moves)
        self.recorder.event(cluster, "Normal", "ReshardingStarted", f"{job.label}: moving slots {moves}")
        return Resharding(job.label, sum(len(t.slots) for t in transfers))

    def _announce_intents(
        self, cluster: RedisCluster, old: RedisClusterStatus, new: RedisClusterStatus
    ) -> None:
        """A Warning Event ``UnsupportedInClusterMode`` when the ``Intents`` condition's message is new
        (the day-2 intents are replication mode's; nothing is acted on here)."""
        said = {c.message for c in old.conditions if c.type == "Intents"}
        for c in new.conditions:
            if c.type == "Intents" and c.reason == _UNSUPPORTED and c.message and c.message not in said:
                self.recorder.event(cluster, "Warning", _UNSUPPORTED, c.message)

    def _announce_failovers(
        self, cluster: RedisCluster, old: RedisClusterStatus, new: RedisClusterStatus
    ) -> None:
        """Event and metric when a shard's slots are served by another of its pods than before.

        The last serving pod is remembered across reconciles (a shard shows no master while its
        master does not answer), seeded from the stored status after an operator restart."""
        key = (cluster.namespace, cluster.name)
        seen = self._serving.setdefault(key, {})
        for shard in old.shards or []:
            if shard.master and shard.slot_count:
                seen.setdefault(shard.index, (shard.master, tuple(shard.slots)))
        for shard in new.shards or []:
            if not shard.master or not shard.slot_count:
                continue
            prev = seen.get(shard.index)
            seen[shard.index] = (shard.master, tuple(shard.slots))
            if prev is None or prev[0] == shard.master or prev[1] != tuple(shard.slots):
                continue  # unchanged, or the slots moved: a resharding step, not a failover
            self.recorder.event(
                cluster,
                "Normal",
                "FailoverCompleted",
                f"shard {shard.index}: {shard.master} serves its slots in place of {prev[0]}",
            )
            cluster_metrics.observe_failover(cluster.namespace, cluster.name, shard.index)


def _homes(cluster: RedisCluster, restored: Mapping[int, Iterable[int]]) -> dict[int, set[int]]:
    """Shard -> the slots it served when status was last written; a slot no shard served then goes
    to the shard that held it in the backup the cluster is restored from (``restored``)."""
    home = {slot: shard for shard, slots in restored.items() for slot in slots}
    for s in (cluster.status.shards if cluster.status else None) or []:
        home.update(dict.fromkeys(parse_ranges(s.slots), s.index))
    out: dict[int, set[int]] = {}
    for slot, shard in home.items():
        out.setdefault(shard, set()).add(slot)
    return out


def _is_repair(the_plan: Plan) -> bool:
    return any(m.repair for m in the_plan.moves)


_REPAIR = "repair of open slots"


def _label(cluster: RedisCluster, the_plan: Plan) -> str:
    if _is_repair(the_plan):
        return _REPAIR
    return f"resharding to {cluster.spec.shards} shards"
