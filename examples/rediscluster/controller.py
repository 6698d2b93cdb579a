"""The RedisCluster reconciler: Kubernetes plumbing around the pure decisions of ``topology``.

One reconcile (level-triggered; the same observed state gives the same writes, and a converged
cluster gives none):

1. fetch the RedisCluster (from the cache); gone → forget its prober registration;
2. being deleted → ``finalizer.snapshot`` (with persistence, a final ``BGSAVE`` on the master,
   requeueing until it finished, never blocking a worker), then the finalizer is removed and
   garbage collection takes the children;
3. ensure the finalizer, then the children (``children.ensure``: written only when they differ);
   with ``spec.restoreFrom`` the pods get the restore init container, and no child is applied
   until the backup can seed them (``backup.restore``: condition ``Restored``);
   a spec that passed the schema but cannot be run (``InvalidSpec``, or a TLS Secret that
   ``tls.tls_material`` refuses) applies no child, is reported (Event and the Ready/Degraded
   conditions) and does not stop the topology work below (with a refused TLS Secret the operator
   keeps connecting with the CA it last verified);
4. ``observe.observe`` every pod: Kubernetes facts from the cache, Redis facts via ``INFO``; the
   pods are registered with the background prober (which feeds a Channel source);
5. ``topology.plan`` — or a planned switchover when the master's pod is terminating (a drain:
   ``topology.evacuate``) or a scale-in would remove the master — carried out by
   ``execute.PlanExecutor`` (``RecordMaster`` is written to status before any Redis command);
   once that plan is converged, ``rollout.Rollout`` brings outdated pods to the StatefulSet's
   update revision in the operator's order (replicas one at a time, one switchover, the old master)
   and ``live_config.LiveConfig`` sets the run-time ``redisConfig`` settings with ``CONFIG SET``;
   ``volumes.VolumeExpander`` grows the PersistentVolumeClaims to a raised ``storageSize``;
6. ``nodeloss.NodeLossGuard``: with ``spec.nodeLoss.forceDeletePods``, pods on a node lost for
   ``afterSeconds`` are force-deleted so the StatefulSet recreates them on a live node;
7. with ``spec.users`` (``users.UserSync``; this step and the next in both modes: after the TLS
   Secret and the ACL state are read, ``mode: cluster`` goes to ``cluster.reconciler`` with its
   ``RedisAccess`` and these steps as ``cluster.reconciler.Security``): the user Secrets are
   read and the rules checked on a pod before the ``<name>-acl`` Secret (the pods' ACL file) is
   written — a refusal is ``InvalidSpec`` naming the field and applies nothing — then
   ``ACL LOAD`` on every pod that has not loaded its generation (Event ``UsersLoaded``); the
   operator itself logs in as ``pyctrl-operator``;
8. with ``spec.tls``: every answering pod whose served certificate is not the Secret's is told to
   re-read its files (``CONFIG SET tls-cert-file ...``, no restart; Event ``CertificateReloaded``),
   again on later reconciles until it serves the new one (the node swaps the files shortly after
   the Secret changes; a Secret watch starts the reconcile);
9. status through the status subresource, written only when it changed (the operator's metrics,
   ``metrics.py``, follow it every reconcile), including the ``PodsScheduled`` condition with the
   scheduler's message for pods it cannot place; requeue after 30 s when converged, 1 s while
   acting or degraded, 0.1 s while a ``FAILOVER TO`` hands the master over.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.backup import DEFAULT_IMAGE as DEFAULT_BACKUP_IMAGE
from examples.rediscluster.backup.restore import RestoreState, restore_state
from examples.rediscluster.cluster.mover import SlotMover
from examples.rediscluster.cluster.reconciler import ClusterModeReconciler
from examples.rediscluster.replication.execute import PhaseTimer, PlanExecutor
from examples.rediscluster.replication.live_config import LiveConfig
from examples.rediscluster.replication.nodeloss import NodeLossGuard
from examples.rediscluster.replication.observe import Observed, observe, read_password
from examples.rediscluster.replication.prober import HealthProber
from examples.rediscluster.replication.rollout import Rollout
from examples.rediscluster.replication.status import observed_status
from examples.rediscluster.replication.topology import (
    ClusterState,
    Plan,
    Policy,
    Switchover,
    Wait,
    evacuate,
    plan,
    scale_down_victims,
    switchover,
)
from examples.rediscluster.replication.volumes import VolumeExpander, pin_claim_templates
from examples.rediscluster.shared import metrics
from examples.rediscluster.shared.children import ensure
from examples.rediscluster.shared.finalizer import FINALIZER, finalizer_patch, snapshot
from examples.rediscluster.shared.pods import not_ready_for
from examples.rediscluster.shared.redis_admin import (
    DEFAULT_IO_TIMEOUT,
    RedisAccess,
    RedisAdminError,
    RedisConnection,
)
from examples.rediscluster.shared.resources import InvalidSpec, desired_children
from examples.rediscluster.shared.rollout import RolloutDecision, progressing_condition
from examples.rediscluster.shared.security import tls, users
from pyctrl import Request, Result
from pyctrl.client import Client, Reader, Secret
from pyctrl.client.errors import NotFound
from pyctrl.client.objects import Condition
from pyctrl.client.patch import MergeFrom
from pyctrl.controllerutil import add_finalizer, remove_finalizer, set_controller_reference
from pyctrl.log import get_logger
from pyctrl.rbacgen import rbac
from pyctrl.recorder import EventRecorder

__all__ = ["FINALIZER", "RedisClusterReconciler"]

STEADY_REQUEUE = 30.0
ACTING_REQUEUE = 1.0
#: while a FAILOVER TO runs, look again this soon: the replicas still following the old master
#: are re-pointed (and writes acknowledged again) right after the handover, not a second later
HANDOVER_REQUEUE = 0.1
log = get_logger("rediscluster")


def _policy(cluster: RedisCluster) -> Policy:
    return Policy(
        down_after=cluster.spec.down_after_milliseconds / 1000,
        enable_auto_failover=cluster.spec.enable_auto_failover,
    )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
@rbac(groups=[""], resources=["pods"], verbs=["get", "list", "watch", "patch", "delete"])
@rbac(groups=[""], resources=["nodes"], verbs=["get", "list", "watch"])
@rbac(groups=[""], resources=["persistentvolumeclaims"], verbs=["get", "list", "watch", "patch"])
@rbac(groups=["storage.k8s.io"], resources=["storageclasses"], verbs=["get"])
@rbac(groups=[""], resources=["secrets"], verbs=["get", "list", "watch", "create", "patch"])
class RedisClusterReconciler:
    """Reconciles RedisCluster objects; see the module docstring.

    ``io_timeout``: connect and socket timeout of every Redis command, in seconds (the operator's
    ``--redis-timeout``); a command is cut off at ``2 * io_timeout + 0.5`` s. ``backup_image``:
    the image of the restore init container (``spec.restoreFrom``, see ``backup.restore``).
    """

    def __init__(
        self,
        client: Client,
        api_reader: Reader,
        recorder: EventRecorder,
        prober: HealthProber,
        slot_mover: SlotMover,
        *,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        backup_image: str = DEFAULT_BACKUP_IMAGE,
    ) -> None:
        self.client = client
        self.backup_image = backup_image
        self.api_reader = api_reader
        self.recorder = recorder
        self.prober = prober
        self.io_timeout = io_timeout
        self.executor = PlanExecutor(client, recorder)
        self.node_loss = NodeLossGuard(client, recorder, prober)
        self.rollout = Rollout(client, recorder)
        self.live_config = LiveConfig(recorder)
        self.volumes = VolumeExpander(client, api_reader, recorder)
        self.cluster_mode = ClusterModeReconciler(
            client, recorder, slot_mover, io_timeout=io_timeout, backup_image=backup_image
        )
        self.users = users.UserSync(client, api_reader)
        #: (namespace, cluster) -> the CA of its last TLS Secret that passed the checks
        self._tls_ca: dict[tuple[str, str], str] = {}
        #: (namespace, cluster) -> the Secrets its spec names (the Secret watch maps back through it)
        self._secrets: dict[tuple[str, str], frozenset[str]] = {}

    def clusters_using_secret(self, secret: object) -> Iterable[Request]:
        """The RedisClusters whose spec names ``secret`` (the map function of the Secret watch)."""
        meta = getattr(secret, "metadata", None)
        namespace, name = getattr(meta, "namespace", None), getattr(meta, "name", None)
        return [
            Request(ns, c) for (ns, c), names in self._secrets.items() if ns == namespace and name in names
        ]

    async def reconcile(self, request: Request) -> Result:
        try:
            cluster = await self.client.get(RedisCluster, request.name, namespace=request.namespace)
        except NotFound:
            self.prober.forget((request.namespace, request.name))
            self._forget(request.namespace, request.name)
            self.cluster_mode.forget(request.namespace, request.name)
            self.rollout.forget(request.namespace, request.name)
            self.live_config.forget(request.namespace, request.name)
            metrics.forget(request.namespace, request.name)
            return Result()
        if cluster.metadata.deletion_timestamp:
            return await self._finalize(cluster)
        if add_finalizer(cluster, FINALIZER):
            cluster = await self.client.patch(cluster, finalizer_patch(cluster))
        timer = PhaseTimer()
        self._secrets[(cluster.namespace, cluster.name)] = _secret_names(cluster)
        password = await read_password(self.api_reader, self.recorder, cluster)
        material, tls_invalid, ca = await self._read_tls(cluster)
        if cluster.spec.tls is not None and ca is None:
            # no CA to verify the pods with: observing them as unreachable would fail them over
            return Result(requeue_after=STEADY_REQUEUE)
        acl = await self.users.read(cluster, password) if cluster.spec.users is not None else None
        access = RedisAccess(password, None, ca)
        if acl is not None:  # the ACL file's pods: the operator's own user
            access = RedisAccess(acl.operator_password, users.OPERATOR_USER, ca)
        security = _Security(self, material, acl, tls_invalid)
        if cluster.spec.mode == "cluster":  # sharded Redis Cluster: examples/rediscluster/cluster/
            return await self.cluster_mode.reconcile(cluster, access, _now(), security)
        observed = await observe(self.client, cluster, access, self.io_timeout)
        master = cluster.status.current_master if cluster.status else None
        self.prober.watch(
            (cluster.namespace, cluster.name),
            observed.endpoints(),
            master=master,
            down_after=cluster.spec.down_after_milliseconds / 1000,
        )
        recorded = (
            ClusterState(cluster.status.current_master, cluster.status.master_epoch)
            if cluster.status
            else ClusterState()
        )
        sts_replicas, the_plan = self._decide(cluster, observed, recorded)
        restore = await restore_state(
            self.client, self.recorder, cluster, observed.pods, image=self.backup_image, now=_now()
        )
        users_invalid = await security.write_users(cluster, _checker(cluster, observed))
        invalid = (
            tls_invalid
            or users_invalid
            or await self._ensure_children(cluster, sts_replicas, restore, observed)
        )
        timer.detection = self._unhealthy_for(cluster, observed, recorded.current_master)
        timer.mark("decision")
        acted, cluster = await self.executor.execute(cluster, observed, the_plan, timer)
        idle = not acted and the_plan.converged and sts_replicas == cluster.spec.replicas
        rollout = await self.rollout.step(cluster, observed, recorded, _policy(cluster), idle=idle)
        if isinstance(rollout.step, Plan):  # the master's turn: one planned switchover first
            acted, cluster = await self.executor.execute(cluster, observed, rollout.step)
        await self.node_loss.recover(cluster, observed)
        answering = {n.pod: observed.connection(n.pod) for n in observed.nodes if n.redis and n.ip}
        reloading = not acted and await security.reload(cluster, answering)
        volumes = await self.volumes.expand(cluster, _now()) if invalid is None else None
        phase = await self._update_status(
            cluster, observed, the_plan, invalid, restore, rollout=rollout, volumes=volumes
        )
        settled = not acted and not reloading and the_plan.converged and phase is RedisClusterPhase.RUNNING
        settled = settled and not rollout.in_progress
        # an unrunnable spec waits for its fix (a watch event), unless the topology needs work
        stuck = invalid is not None and not acted and (the_plan.converged or not observed.nodes)
        switching = [*the_plan.actions, *(rollout.step.actions if isinstance(rollout.step, Plan) else ())]
        if observed.handing_over() or any(isinstance(a, Switchover) for a in switching):
            return Result(requeue_after=HANDOVER_REQUEUE)
        return Result(requeue_after=STEADY_REQUEUE if settled or stuck else ACTING_REQUEUE)

    async def _ensure_children(
        self, cluster: RedisCluster, sts_replicas: int, restore: RestoreState, observed: Observed
    ) -> str | None:
        """Write the children that differ; return why the spec cannot be run, if it cannot.

        An invalid spec applies no child at all: the running pods keep their configuration and
        failover keeps protecting them, while the Event ``InvalidSpec`` and the Ready condition say
        what to fix."""
        try:
            children = desired_children(cluster, sts_replicas)
        except InvalidSpec as exc:
            self.recorder.event(cluster, "Warning", "InvalidSpec", str(exc))
            return str(exc)
        if (refused := await self.live_config.apply(cluster, observed)) is not None:
            return refused  # a run-time setting Redis refused (Event ConfigRejected): no redis.conf with it
        if restore.blocked is not None:
            return None  # no pod may start before there is a backup to seed it (condition Restored)
        restore.apply(children)
        await pin_claim_templates(self.client, children)
        for child in children:
            set_controller_reference(cluster, child)
            await ensure(self.client, child)
        return None

    # -- TLS -----------------------------------------------------------------------------------
    async def _read_tls(self, cluster: RedisCluster) -> tuple[tls.TlsMaterial | None, str | None, str | None]:
        """(the checked TLS Secret, why it was refused, the CA to connect with); all None without TLS.

        A refused Secret is an ``InvalidSpec`` Event; the CA is then the last one verified (or, after
        a restart, the Secret's ``ca.crt`` if that alone parses)."""
        if cluster.spec.tls is None:
            return None, None, None
        key, name = (cluster.namespace, cluster.name), cluster.spec.tls.secret_name
        try:
            secret = await self.api_reader.get(Secret, name, namespace=cluster.namespace)
        except NotFound:
            secret = None
        try:
            if secret is None:
                raise tls.InvalidTls(f"spec.tls.secretName: Secret {name!r} not found")
            material = tls.tls_material(name, secret.data)
        except tls.InvalidTls as exc:
            self.recorder.event(cluster, "Warning", "InvalidSpec", str(exc))
            fallback = self._tls_ca.get(key) or (tls.ca_of(secret.data) if secret is not None else None)
            return None, str(exc), fallback
        self._tls_ca[key] = material.ca_pem
        return material, None, material.ca_pem

    async def _reload_certificates(
        self, cluster: RedisCluster, answering: Mapping[str, RedisConnection], material: tls.TlsMaterial
    ) -> bool:
        """Have every answering pod serve the Secret's certificate; True while some does not yet."""
        reloaded: list[str] = []
        pending: list[str] = []
        for pod, conn in answering.items():
            try:
                if await conn.served_certificate() == material.cert_der:
                    continue
                await conn.reload_tls(tls.reload_settings())
                served = await conn.served_certificate()
            except RedisAdminError:
                pending.append(pod)
                continue
            (reloaded if served == material.cert_der else pending).append(pod)
        if reloaded:
            message = (
                f"{', '.join(reloaded)} serve the certificate with serial {material.serial:x} (no restart)"
            )
            self.recorder.event(cluster, "Normal", "CertificateReloaded", message)
        return bool(pending)

    # -- users ---------------------------------------------------------------------------------
    async def _write_users(
        self, cluster: RedisCluster, acl: users.AclState | None, checker: RedisConnection | None
    ) -> tuple[str | None, str | None]:
        """(why spec.users cannot be applied, the ACL file generation the pods should load);
        ``checker``: a pod that answers, where Redis checks the rules first."""
        if acl is None:
            return None, None
        refused, generation = await self.users.write(cluster, acl, checker)
        if refused is not None:
            self.recorder.event(cluster, "Warning", "InvalidSpec", refused)
        return refused, generation

    async def _load_users(
        self, cluster: RedisCluster, answering: Mapping[str, RedisConnection], generation: str
    ) -> bool:
        """ACL LOAD where the generation is not loaded yet; True while some pod lacks it."""
        loaded, pending = await self.users.load(answering, generation)
        if loaded:
            message = f"{', '.join(loaded)} loaded the ACL file of spec.users (no restart)"
            self.recorder.event(cluster, "Normal", "UsersLoaded", message)
        return bool(pending)

    def _forget(self, namespace: str, name: str) -> None:
        self._tls_ca.pop((namespace, name), None)
        self._secrets.pop((namespace, name), None)

    # -- decision ------------------------------------------------------------------------------
    def _unhealthy_for(self, cluster: RedisCluster, observed: Observed, master: str | None) -> float:
        if master is None:
            return 0.0
        probe = self.prober.master_unhealthy_for((cluster.namespace, cluster.name))
        pod = observed.pods.get(master)
        if pod is None:
            return max(probe, cluster.spec.down_after_milliseconds / 1000)  # gone: count it as down
        return max(probe, not_ready_for(pod))

    def _decide(self, cluster: RedisCluster, observed: Observed, recorded: ClusterState) -> tuple[int, Plan]:
        """(StatefulSet replicas to ask for, the plan).

        A master whose pod is terminating while it still serves is handed over first
        (``topology.evacuate``); a scale-in waits for a switchover off the master."""
        policy = _policy(cluster)
        want = cluster.spec.replicas
        current = max([n.ordinal + 1 for n in observed.nodes], default=want)
        the_plan = plan(
            observed.nodes,
            recorded,
            policy,
            master_unhealthy_for=self._unhealthy_for(cluster, observed, recorded.current_master),
        )
        if (handover := evacuate(observed.nodes, recorded, policy)) is not None:
            return max(want, current), handover  # no pod is removed during a handover
        if want < current and recorded.current_master is not None and the_plan.converged:
            scale = scale_down_victims(observed.nodes, recorded, want, policy)
            if scale.fail_over_first:
                if scale.failover_to is None:
                    return current, Plan((Wait("scale-in: no in-sync replica to hand the master to yet"),))
                return current, switchover(observed.nodes, recorded, scale.failover_to)
        if want < current and recorded.current_master is not None and not the_plan.converged:
            return current, the_plan  # finish the topology work before removing pods
        return want, the_plan

    # -- status --------------------------------------------------------------------------------
    async def _update_status(
        self,
        cluster: RedisCluster,
        observed: Observed,
        the_plan: Plan,
        invalid_spec: str | None,
        restore: RestoreState,
        *,
        rollout: RolloutDecision,
        volumes: Condition | None,
    ) -> RedisClusterPhase:
        """Write the observed status when it changed; return the phase."""
        old = cluster.status or RedisClusterStatus()
        now = _now()
        extra = [restore.condition, progressing_condition(cluster, rollout, now), volumes]
        new = observed_status(
            cluster,
            observed.nodes,
            the_plan.converged,
            now,
            invalid_spec=invalid_spec,
            unschedulable=observed.unschedulable,
            extra_conditions=[c for c in extra if c is not None],
        ).model_copy(
            update={"current_revision": rollout.current_revision, "update_revision": rollout.update_revision}
        )
        metrics.observe_status(cluster.namespace, cluster.name, cluster.spec.replicas, new)
        metrics.observe_nodes(cluster.namespace, cluster.name, observed.nodes)
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

        async def access() -> RedisAccess:
            password = await read_password(self.api_reader, self.recorder, cluster)
            ca = (await self._read_tls(cluster))[2]
            if cluster.spec.users is not None:
                acl = await self.users.read(cluster, password)
                return RedisAccess(acl.operator_password, users.OPERATOR_USER, ca)
            return RedisAccess(password, None, ca)

        if not await snapshot(self.client, self.recorder, cluster, access, self.io_timeout):
            return Result(requeue_after=ACTING_REQUEUE)
        self.prober.forget((cluster.namespace, cluster.name))
        self._forget(cluster.namespace, cluster.name)
        metrics.forget(cluster.namespace, cluster.name)
        remove_finalizer(cluster, FINALIZER)
        await self.client.patch(cluster, finalizer_patch(cluster))
        log.info("Finalizer removed", cluster=cluster.name, namespace=cluster.namespace)
        return Result()


def _checker(cluster: RedisCluster, observed: Observed) -> RedisConnection | None:
    """The pod that checks ACL rules: the recorded master if it answers, else any that does."""
    answering = sorted(
        (n for n in observed.nodes if n.redis is not None and n.ip),
        key=lambda n: n.pod != (cluster.status.current_master if cluster.status else None),
    )
    return observed.connection(answering[0].pod) if answering else None


@dataclass
class _Security:
    """The TLS and users steps of one reconcile, in both modes (``cluster.reconciler.Security``):
    the ACL Secret written once the rules passed a node, then certificates re-read and the ACL file
    loaded where a pod lags (the generation written is the one loaded)."""

    owner: RedisClusterReconciler
    material: tls.TlsMaterial | None
    acl: users.AclState | None
    tls_invalid: str | None
    generation: str | None = None

    async def write_users(self, cluster: RedisCluster, checker: RedisConnection | None) -> str | None:
        refused, self.generation = await self.owner._write_users(cluster, self.acl, checker)
        return refused

    async def reload(self, cluster: RedisCluster, answering: Mapping[str, RedisConnection]) -> bool:
        reloading = self.material is not None and await self.owner._reload_certificates(
            cluster, answering, self.material
        )
        if self.generation is not None:
            reloading = await self.owner._load_users(cluster, answering, self.generation) or reloading
        return reloading


def _secret_names(cluster: RedisCluster) -> frozenset[str]:
    """The Secrets ``cluster``'s spec names (TLS, password, users' passwords)."""
    spec = cluster.spec
    names = {spec.tls.secret_name} if spec.tls is not None else set()
    if spec.auth is not None:
        names.add(spec.auth.password_secret.name)
    names.update(user.password_secret.name for user in spec.users or [])
    return frozenset(names)
