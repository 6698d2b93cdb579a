"""The RedisCluster reconciler: Kubernetes plumbing around the pure decisions of ``topology``.

One reconcile (level-triggered; the same observed state gives the same writes, and a converged
cluster gives none):

1. fetch the RedisCluster (from the cache); gone → forget its prober registration;
2. being deleted → finalizer ``redis.pyctrl.dev/finalizer``: with persistence, ``BGSAVE`` on the
   master and requeue until it finished (never blocking a worker), an Event, then the finalizer
   is removed and garbage collection takes the children;
3. ensure the finalizer, then the children (``children.ensure``: written only when they differ);
   a spec that passed the schema but cannot be run (``InvalidSpec``) applies no child, is reported
   (Event and the Ready/Degraded conditions) and does not stop the topology work below;
4. observe every pod: Kubernetes facts from the cache, Redis facts via ``INFO`` with a 1 s
   timeout; register the pods with the background prober (which feeds a Channel source);
5. ``topology.plan`` (or a planned switchover when a scale-in would remove the master), then carry
   the actions out in order: ``RecordMaster`` is written to status (optimistic lock) *before* any
   Redis command, so a restarted operator resumes the same decision; the first failed action
   stops the sequence and the reconcile requeues;
6. status through the status subresource, written only when it changed (the operator's metrics,
   ``metrics.py``, follow it every reconcile); requeue after 30 s when converged, 1 s while acting.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
from dataclasses import dataclass
from typing import Any

from examples.rediscluster import metrics, redis_admin
from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.children import ensure
from examples.rediscluster.prober import ClusterKey, Endpoint, HealthProber
from examples.rediscluster.resources import (
    REDIS_PORT,
    ROLE_LABEL,
    InvalidSpec,
    desired_children,
    selector_labels,
)
from examples.rediscluster.status import observed_status
from examples.rediscluster.topology import (
    ClusterState,
    Demote,
    NodeObservation,
    Plan,
    Policy,
    Promote,
    RecordMaster,
    ReplicaOf,
    SetLabel,
    Switchover,
    Wait,
    plan,
    scale_down_victims,
    switchover,
)
from pyctrl import Request, Result, TerminalError
from pyctrl.client import Pod, Secret
from pyctrl.client.errors import NotFound
from pyctrl.client.patch import MergeFrom, PatchType, RawPatch
from pyctrl.controllerutil import add_finalizer, remove_finalizer, set_controller_reference
from pyctrl.log import get_logger
from pyctrl.rbacgen import rbac
from pyctrl.recorder import EventRecorder

__all__ = ["FINALIZER", "RedisClusterReconciler"]

FINALIZER = "redis.pyctrl.dev/finalizer"
STEADY_REQUEUE = 30.0
ACTING_REQUEUE = 1.0
log = get_logger("rediscluster")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ordinal(pod: Pod) -> int:
    tail = pod.name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _pod_ready(pod: Pod) -> tuple[bool, str | None]:
    """(Ready, lastTransitionTime of the Ready condition)."""
    for c in (pod.status.conditions if pod.status else None) or []:
        if c.type == "Ready":
            return c.status == "True", c.last_transition_time
    return False, None


def _seconds_since(rfc3339: str | None) -> float:
    if not rfc3339:
        return 0.0
    then = datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    return max(0.0, (datetime.datetime.now(datetime.UTC) - then).total_seconds())


@dataclass
class _Observed:
    pods: dict[str, Pod]
    nodes: list[NodeObservation]

    def ip(self, pod: str) -> str:
        p = self.pods[pod]
        ip = p.status.pod_ip if p.status else None
        if not ip:
            raise redis_admin.RedisUnavailable("", 0, f"pod {pod} has no IP yet")
        return ip


@rbac(
    groups=["redis.pyctrl.dev"],
    resources=["redisclusters"],
    verbs=["get", "list", "watch", "update", "patch"],
)
@rbac(groups=["redis.pyctrl.dev"], resources=["redisclusters/status"], verbs=["get", "update", "patch"])
@rbac(groups=["redis.pyctrl.dev"], resources=["redisclusters/finalizers"], verbs=["update"])
@rbac(groups=[""], resources=["configmaps", "services"], verbs=["get", "list", "watch", "create", "patch"])
@rbac(groups=["apps"], resources=["statefulsets"], verbs=["get", "list", "watch", "create", "patch"])
@rbac(
    groups=["policy"], resources=["poddisruptionbudgets"], verbs=["get", "list", "watch", "create", "patch"]
)
@rbac(groups=[""], resources=["pods"], verbs=["get", "list", "watch", "patch"])
@rbac(groups=[""], resources=["secrets"], verbs=["get"])
class RedisClusterReconciler:
    """Reconciles RedisCluster objects; see the module docstring."""

    def __init__(
        self,
        client: Any,
        api_reader: Any,
        recorder: EventRecorder,
        prober: HealthProber,
        *,
        io_timeout: float = redis_admin.DEFAULT_IO_TIMEOUT,
    ) -> None:
        self.client = client
        self.api_reader = api_reader
        self.recorder = recorder
        self.prober = prober
        self.io_timeout = io_timeout

    async def reconcile(self, request: Request) -> Result:
        try:
            cluster = await self.client.get(RedisCluster, request.name, namespace=request.namespace)
        except NotFound:
            self.prober.forget((request.namespace, request.name))
            metrics.forget(request.namespace, request.name)
            return Result()
        if cluster.metadata.deletion_timestamp:
            return await self._finalize(cluster)
        if add_finalizer(cluster, FINALIZER):
            cluster = await self.client.patch(
                cluster, RawPatch(PatchType.MERGE, {"metadata": {"finalizers": cluster.metadata.finalizers}})
            )
        password = await self._password(cluster)
        observed = await self._observe(cluster, password)
        recorded = (
            ClusterState(cluster.status.current_master, cluster.status.master_epoch)
            if cluster.status
            else ClusterState()
        )
        sts_replicas, the_plan = self._decide(cluster, observed, recorded)
        invalid = await self._ensure_children(cluster, sts_replicas)
        acted, cluster = await self._execute(cluster, observed, the_plan, password)
        phase = await self._update_status(cluster, observed, the_plan, invalid)
        settled = not acted and the_plan.converged and phase is RedisClusterPhase.RUNNING
        # an unrunnable spec waits for its fix (a watch event), unless the topology needs work
        stuck = invalid is not None and not acted and (the_plan.converged or not observed.nodes)
        return Result(requeue_after=STEADY_REQUEUE if settled or stuck else ACTING_REQUEUE)

    async def _ensure_children(self, cluster: RedisCluster, sts_replicas: int) -> str | None:
        """Write the children that differ; return why the spec cannot be run, if it cannot.

        An invalid spec applies no child at all: the running pods keep their configuration and
        failover keeps protecting them, while the Event ``InvalidSpec`` and the Ready condition say
        what to fix."""
        try:
            children = desired_children(cluster, sts_replicas)
        except InvalidSpec as exc:
            self.recorder.event(cluster, "Warning", "InvalidSpec", str(exc))
            return str(exc)
        for child in children:
            set_controller_reference(cluster, child)
            await ensure(self.client, child)
        return None

    # -- observation ---------------------------------------------------------------------------
    async def _password(self, cluster: RedisCluster) -> str | None:
        auth = cluster.spec.auth
        if auth is None:
            return None
        ref = auth.password_secret
        try:
            secret = await self.api_reader.get(Secret, ref.name, namespace=cluster.namespace)
        except NotFound:
            self.recorder.event(cluster, "Warning", "SecretMissing", f"Secret {ref.name} not found")
            raise
        value = (secret.data or {}).get(ref.key)
        if value is None:
            msg = f"Secret {ref.name} has no key {ref.key!r}"
            self.recorder.event(cluster, "Warning", "SecretMissing", msg)
            raise TerminalError(msg)
        return base64.b64decode(value).decode()

    async def _observe(self, cluster: RedisCluster, password: str | None) -> _Observed:
        pod_list = await self.client.list(
            Pod,
            namespace=cluster.namespace,
            labels=selector_labels(cluster),
        )
        pods = {p.name: p for p in pod_list if _ordinal(p) >= 0}

        async def one(pod: Pod) -> NodeObservation:
            ip = pod.status.pod_ip if pod.status else None
            ready, _ = _pod_ready(pod)
            facts = None
            if ip:
                try:
                    facts = await redis_admin.observe(ip, REDIS_PORT, password, io_timeout=self.io_timeout)
                except redis_admin.RedisAdminError:
                    facts = None
            return NodeObservation(
                pod=pod.name,
                ordinal=_ordinal(pod),
                ip=ip,
                port=REDIS_PORT,
                pod_ready=ready,
                label=(pod.metadata.labels or {}).get(ROLE_LABEL),
                terminating=bool(pod.metadata.deletion_timestamp),
                redis=facts,
            )

        nodes = list(await asyncio.gather(*(one(p) for p in pods.values())))
        key: ClusterKey = (cluster.namespace, cluster.name)
        endpoints = {n.pod: Endpoint(n.ip, REDIS_PORT) for n in nodes}
        master = cluster.status.current_master if cluster.status else None
        self.prober.watch(
            key,
            endpoints,
            master=master,
            down_after=cluster.spec.down_after_milliseconds / 1000,
            password=password,
        )
        return _Observed(pods, nodes)

    # -- decision ------------------------------------------------------------------------------
    def _unhealthy_for(self, cluster: RedisCluster, observed: _Observed, master: str | None) -> float:
        if master is None:
            return 0.0
        probe = self.prober.master_unhealthy_for((cluster.namespace, cluster.name))
        pod = observed.pods.get(master)
        if pod is None:
            return max(probe, cluster.spec.down_after_milliseconds / 1000)  # gone: count it as down
        ready, since = _pod_ready(pod)
        return probe if ready else max(probe, _seconds_since(since))

    def _decide(self, cluster: RedisCluster, observed: _Observed, recorded: ClusterState) -> tuple[int, Plan]:
        """(StatefulSet replicas to ask for, the plan). Scale-in waits for a switchover off the master."""
        policy = Policy(
            down_after=cluster.spec.down_after_milliseconds / 1000,
            enable_auto_failover=cluster.spec.enable_auto_failover,
        )
        want = cluster.spec.replicas
        current = max([n.ordinal + 1 for n in observed.nodes], default=want)
        the_plan = plan(
            observed.nodes,
            recorded,
            policy,
            master_unhealthy_for=self._unhealthy_for(cluster, observed, recorded.current_master),
        )
        if want < current and recorded.current_master is not None and the_plan.converged:
            scale = scale_down_victims(observed.nodes, recorded, want, policy)
            if scale.fail_over_first:
                if scale.failover_to is None:
                    return current, Plan((Wait("scale-in: no in-sync replica to hand the master to yet"),))
                return current, switchover(observed.nodes, recorded, scale.failover_to)
        if want < current and recorded.current_master is not None and not the_plan.converged:
            return current, the_plan  # finish the topology work before removing pods
        return want, the_plan

    # -- acting --------------------------------------------------------------------------------
    async def _execute(
        self, cluster: RedisCluster, observed: _Observed, the_plan: Plan, password: str | None
    ) -> tuple[bool, RedisCluster]:
        acted = False
        failover_from = cluster.status.current_master if cluster.status else None
        for action in the_plan.actions:
            try:
                match action:
                    case RecordMaster(pod=pod, epoch=epoch):
                        cluster = await self._record_master(cluster, pod, epoch)
                    case Promote(pod=pod):
                        await redis_admin.promote(
                            observed.ip(pod), REDIS_PORT, password, io_timeout=self.io_timeout
                        )
                        self._announce(cluster, failover_from, pod)
                    case ReplicaOf(pod=pod, master=master) | Demote(pod=pod, master=master):
                        await redis_admin.replica_of(
                            observed.ip(pod),
                            REDIS_PORT,
                            observed.ip(master),
                            REDIS_PORT,
                            password,
                            io_timeout=self.io_timeout,
                        )
                    case Switchover(pod=pod, to=to):
                        await redis_admin.failover_to(
                            observed.ip(pod),
                            REDIS_PORT,
                            observed.ip(to),
                            REDIS_PORT,
                            password,
                            io_timeout=self.io_timeout,
                        )
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
            except redis_admin.RedisAdminError as exc:
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

    # -- status --------------------------------------------------------------------------------
    async def _update_status(
        self, cluster: RedisCluster, observed: _Observed, the_plan: Plan, invalid_spec: str | None
    ) -> RedisClusterPhase:
        """Write the observed status when it changed; return the phase."""
        old = cluster.status or RedisClusterStatus()
        new = observed_status(cluster, observed.nodes, the_plan.converged, _now(), invalid_spec=invalid_spec)
        metrics.observe_status(cluster.namespace, cluster.name, cluster.spec.replicas, new)
        if new.model_dump(exclude={"last_sync_timestamp"}) == old.model_dump(exclude={"last_sync_timestamp"}):
            return new.phase  # nothing changed: no write (lastSyncTimestamp marks the last status change)
        new.last_sync_timestamp = _now()
        before = cluster.model_copy(deep=True)
        cluster.status = new
        # A Conflict (stale read) propagates: the controller requeues it without an error log.
        await self.client.status().patch(cluster, MergeFrom(before, optimistic_lock=True))
        return new.phase

    # -- deletion ------------------------------------------------------------------------------
    async def _finalize(self, cluster: RedisCluster) -> Result:
        if FINALIZER not in (cluster.metadata.finalizers or []):
            return Result()
        master = cluster.status.current_master if cluster.status else None
        if cluster.spec.enable_persistence and master is not None:
            done = await self._snapshot(cluster, master)
            if not done:
                return Result(requeue_after=ACTING_REQUEUE)
        self.prober.forget((cluster.namespace, cluster.name))
        metrics.forget(cluster.namespace, cluster.name)
        remove_finalizer(cluster, FINALIZER)
        await self.client.patch(
            cluster,
            RawPatch(
                PatchType.MERGE,
                {
                    "metadata": {
                        "finalizers": cluster.metadata.finalizers or None,
                        "resourceVersion": cluster.metadata.resource_version,
                    }
                },
            ),
        )
        log.info("Finalizer removed", cluster=cluster.name, namespace=cluster.namespace)
        return Result()

    async def _snapshot(self, cluster: RedisCluster, master: str) -> bool:
        """Start a BGSAVE on the master, then report (on later reconciles) whether it finished."""
        try:
            pod = await self.client.get(Pod, master, namespace=cluster.namespace)
        except NotFound:
            pod = None
        ip = pod.status.pod_ip if pod is not None and pod.status else None
        if not ip:  # nothing running to save from: say so, as for an unreachable master
            why = "not found" if pod is None else "has no IP"
            self.recorder.event(
                cluster,
                "Warning",
                "SnapshotSkipped",
                f"master pod {master} {why}; deleting without a final snapshot",
            )
            return True
        password = await self._password(cluster)
        marker = "redis.pyctrl.dev/snapshot-started"
        try:
            if marker not in (cluster.metadata.annotations or {}):
                await redis_admin.bgsave(ip, REDIS_PORT, password, io_timeout=self.io_timeout)
                await self.client.patch(
                    cluster, RawPatch(PatchType.MERGE, {"metadata": {"annotations": {marker: _now()}}})
                )
                return False
            status = await redis_admin.bgsave_status(ip, REDIS_PORT, password, io_timeout=self.io_timeout)
        except redis_admin.RedisUnavailable:
            self.recorder.event(
                cluster,
                "Warning",
                "SnapshotSkipped",
                f"master {master} unreachable; deleting without a final snapshot",
            )
            return True
        if status.in_progress:
            return False
        self.recorder.event(
            cluster, "Normal", "SnapshotTaken", f"final BGSAVE on {master}: {status.last_status}"
        )
        return True
