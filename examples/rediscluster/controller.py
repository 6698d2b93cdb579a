"""The RedisCluster reconciler: the seven steps of one reconcile, each a call into a room of its own.

Level-triggered: the same observed state gives the same writes, and a converged cluster gives none.

1. **fetch** the RedisCluster (from the cache); gone → every room forgets it (prober, rollouts,
   metrics, the Secrets it named);
2. **finalize** when it is being deleted (``shared.finalizer``: with persistence, a final
   ``BGSAVE`` on the master, requeueing until it finished, never blocking a worker), then the
   finalizer is removed and garbage collection takes the children;
3. **ensure the finalizer** (``shared.finalizer.ensure_finalizer``);
4. **security material** (``shared.security.material``): the password, the TLS Secret (a refused
   one is ``InvalidSpec``; the last verified CA keeps being used) and ``spec.users`` (the ACL
   state; the operator logs in as ``pyctrl-operator``), each read with a GET: the operator holds
   no Secret list/watch permission, so an unusable password Secret (``SecretUnusable``) means
   looking again after ``SECRET_POLL`` seconds, and a changed Secret is seen on the next reconcile
   (at the latest the settled look-again);
5. **children** (``shared.children.apply_children``), after the mode's engine observed the pods
   and planned (pure) how many the StatefulSet should have: the ACL Secret once a pod accepted the
   rules (``Material.write_users``), then the mode's desired children and the cluster's
   NetworkPolicy (``shared.networkpolicy``; deleted with ``networkPolicy.enabled: false``) —
   none while the spec cannot
   be run (``InvalidSpec``: an Event and the Ready condition say why; the topology work goes on) or
   while a ``restoreFrom`` has no backup to seed the pods (``backup.restore``: condition Restored);
6. **the mode's engine** carries its plan out: ``replication.reconciler`` (one master and its
   replicas) or ``cluster.reconciler`` (a sharded Redis Cluster), both of the shape of
   ``engine.Engine`` (observe → plan, pure → execute → status); on a reconcile where it did
   nothing, pods re-read a renewed certificate and load a new ACL file (``Material.reload``);
7. **status** through the engine (``shared.status.write_status``: the status subresource, written
   only when it changed), which also says when to look again.
"""

from __future__ import annotations

from typing import Any

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.backup import DEFAULT_IMAGE as DEFAULT_BACKUP_IMAGE
from examples.rediscluster.backup.archiving import apply_archiving
from examples.rediscluster.backup.restore import restore_state
from examples.rediscluster.cluster.mover import SlotMover
from examples.rediscluster.cluster.reconciler import ClusterModeReconciler
from examples.rediscluster.engine import Engine
from examples.rediscluster.replication.prober import HealthProber
from examples.rediscluster.replication.reconciler import STEADY_REQUEUE, ReplicationModeReconciler
from examples.rediscluster.shared import metrics
from examples.rediscluster.shared.children import apply_children
from examples.rediscluster.shared.finalizer import FINALIZER, ensure_finalizer, finalize
from examples.rediscluster.shared.networkpolicy import PolicyPeers, network_policy, remove_network_policy
from examples.rediscluster.shared.redis_admin import DEFAULT_IO_TIMEOUT
from examples.rediscluster.shared.resources import DEFAULT_CLUSTER_DOMAIN
from examples.rediscluster.shared.security.auth import SECRET_POLL, SecretUnusable
from examples.rediscluster.shared.security.material import Security
from examples.rediscluster.shared.status import now
from pyctrl import Request, Result
from pyctrl.client import Client, Reader
from pyctrl.client.errors import NotFound
from pyctrl.rbacgen import rbac
from pyctrl.recorder import EventRecorder
from pyctrl.workqueue import LOW_PRIORITY

__all__ = ["FINALIZER", "RedisClusterReconciler"]

#: while a snapshot before deletion runs, look again this soon
FINALIZE_REQUEUE = 1.0


@rbac(
    groups=["redis.pyctrl.dev"],
    resources=["redisclusters"],
    verbs=["get", "list", "watch", "patch"],
)
# every write is a patch (status through the status subresource): no update verb
@rbac(groups=["redis.pyctrl.dev"], resources=["redisclusters/status"], verbs=["get", "patch"])
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
# Secrets: no list/watch (every Secret of the cluster would be readable): GETs of the ones a spec
# names, create/patch of the ones the operator owns (<name>-auth, <name>-acl).
@rbac(groups=[""], resources=["secrets"], verbs=["get", "create", "patch"])
@rbac(
    groups=["networking.k8s.io"],
    resources=["networkpolicies"],
    verbs=["get", "list", "watch", "create", "patch", "delete"],
)
class RedisClusterReconciler:
    """Reconciles RedisCluster objects; see the module docstring.

    ``io_timeout``: connect and socket timeout of every Redis command, in seconds (the operator's
    ``--redis-timeout``); a command is cut off at ``2 * io_timeout + 0.5`` s. ``backup_image``:
    the image of the restore init container (``spec.restoreFrom``, see ``backup.restore``).
    ``cluster_domain``: the cluster DNS domain (``--cluster-domain``) the pods' stable names end
    in, which the exporter sidecar of a TLS cluster connects to (``shared.exporter``).
    ``policy_peers``: where the operator and the monitoring run, for the NetworkPolicies.
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
        cluster_domain: str = DEFAULT_CLUSTER_DOMAIN,
        policy_peers: PolicyPeers | None = None,
    ) -> None:
        self.client = client
        self.policy_peers = policy_peers or PolicyPeers()
        self.recorder = recorder
        self.io_timeout = io_timeout
        self.backup_image = backup_image
        self.security = Security(client, api_reader, recorder)
        self.engines: dict[str, Engine[Any, Any, Any]] = {
            "replication": ReplicationModeReconciler(
                client, api_reader, recorder, prober, io_timeout=io_timeout, cluster_domain=cluster_domain
            ),
            "cluster": ClusterModeReconciler(
                client, recorder, slot_mover, io_timeout=io_timeout, cluster_domain=cluster_domain
            ),
        }

    async def reconcile(self, request: Request) -> Result:
        cluster = await self._fetch(request)  # 1. fetch
        if cluster is None:
            return Result()
        if cluster.metadata.deletion_timestamp:  # 2. finalize
            return await self._finalize(cluster)
        cluster = await ensure_finalizer(self.client, cluster)  # 3. ensure the finalizer
        try:
            material = await self.security.read(cluster)  # 4. security material
        except SecretUnusable:  # its Event says why; no Secret watch: look again soon
            return Result(requeue_after=SECRET_POLL)
        if material is None:  # no CA to verify the pods with: observing them would fail them over
            return Result(requeue_after=STEADY_REQUEUE, priority=LOW_PRIORITY)
        engine = self.engines[cluster.spec.mode]  # the engine observes and plans before the children
        look = await engine.observe(cluster, material.access)
        restore = await restore_state(
            self.client, self.recorder, cluster, look.pods, image=self.backup_image, now=now()
        )
        plan = engine.plan(cluster, look, restore)
        invalid = (  # 5. children
            material.tls_invalid
            or await material.write_users(cluster, look.checker())
            or await apply_children(
                self.client,
                self.recorder,
                cluster,
                lambda: self._children(engine, cluster, look, plan),
                restore,
            )
        )
        done = await engine.execute(cluster, look, plan, invalid=invalid, restore=restore)  # 6. engine
        done.reloading = not done.acted and await material.reload(done.cluster, look.answering())
        return await engine.status(look, plan, done)  # 7. status

    async def _children(
        self, engine: Engine[Any, Any, Any], cluster: RedisCluster, look: Any, plan: Any
    ) -> list[dict[str, Any]]:
        """The mode's desired children, with the archiver sidecar when ``spec.backup.archive`` asks,
        and the cluster's NetworkPolicy (removed, if the operator made it, when turned off)."""
        children = await engine.children(cluster, look, plan)
        apply_archiving(cluster, children, self.backup_image)
        if not cluster.spec.network_policy.enabled:
            await remove_network_policy(self.client, self.recorder, cluster)
            return children
        return [*children, network_policy(cluster, self.policy_peers)]

    async def _fetch(self, request: Request) -> RedisCluster | None:
        """The RedisCluster from the cache; None (and every room forgets it) once it is gone."""
        try:
            return await self.client.get(RedisCluster, request.name, namespace=request.namespace)
        except NotFound:
            self._forget(request.namespace, request.name)
            return None

    async def _finalize(self, cluster: RedisCluster) -> Result:
        try:
            saved = await finalize(self.client, self.recorder, cluster, self.security.access, self.io_timeout)
        except SecretUnusable:  # the snapshot needs the password: look again once it is usable
            return Result(requeue_after=SECRET_POLL)
        if not saved:
            return Result(requeue_after=FINALIZE_REQUEUE)  # the snapshot still runs
        self._forget(cluster.namespace, cluster.name)
        return Result()

    def release(self, request: Request) -> None:
        """The cluster is no longer this replica's (handed to another member of the sharding ring,
        or deleted): every room forgets it -- the prober stops probing it, its migration stops,
        its metrics series go (its new owner reports them)."""
        self._forget(request.namespace, request.name)

    def _forget(self, namespace: str, name: str) -> None:
        self.security.forget(namespace, name)
        for engine in self.engines.values():
            engine.forget(namespace, name)
        metrics.forget(namespace, name)
