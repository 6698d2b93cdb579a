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
   state; the operator logs in as ``pyctrl-operator``);
5. **children** (``shared.children.apply_children``), after the mode's engine observed the pods
   and planned (pure) how many the StatefulSet should have: the ACL Secret once a pod accepted the
   rules (``Material.write_users``), then the mode's desired children — none while the spec cannot
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
from examples.rediscluster.backup.restore import restore_state
from examples.rediscluster.cluster.mover import SlotMover
from examples.rediscluster.cluster.reconciler import ClusterModeReconciler
from examples.rediscluster.engine import Engine
from examples.rediscluster.replication.prober import HealthProber
from examples.rediscluster.replication.reconciler import STEADY_REQUEUE, ReplicationModeReconciler
from examples.rediscluster.shared import metrics
from examples.rediscluster.shared.children import apply_children
from examples.rediscluster.shared.finalizer import FINALIZER, ensure_finalizer, finalize
from examples.rediscluster.shared.redis_admin import DEFAULT_IO_TIMEOUT
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
        self.recorder = recorder
        self.io_timeout = io_timeout
        self.backup_image = backup_image
        self.security = Security(client, api_reader, recorder)
        self.engines: dict[str, Engine[Any, Any, Any]] = {
            "replication": ReplicationModeReconciler(
                client, api_reader, recorder, prober, io_timeout=io_timeout
            ),
            "cluster": ClusterModeReconciler(client, recorder, slot_mover, io_timeout=io_timeout),
        }
        #: the map function of the operator's Secret watch: the clusters whose spec names a Secret
        self.clusters_using_secret = self.security.clusters_using_secret

    async def reconcile(self, request: Request) -> Result:
        cluster = await self._fetch(request)  # 1. fetch
        if cluster is None:
            return Result()
        if cluster.metadata.deletion_timestamp:  # 2. finalize
            return await self._finalize(cluster)
        cluster = await ensure_finalizer(self.client, cluster)  # 3. ensure the finalizer
        material = await self.security.read(cluster)  # 4. security material
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
                self.client, self.recorder, cluster, lambda: engine.children(cluster, look, plan), restore
            )
        )
        done = await engine.execute(cluster, look, plan, invalid=invalid, restore=restore)  # 6. engine
        done.reloading = not done.acted and await material.reload(done.cluster, look.answering())
        return await engine.status(look, plan, done)  # 7. status

    async def _fetch(self, request: Request) -> RedisCluster | None:
        """The RedisCluster from the cache; None (and every room forgets it) once it is gone."""
        try:
            return await self.client.get(RedisCluster, request.name, namespace=request.namespace)
        except NotFound:
            self._forget(request.namespace, request.name)
            return None

    async def _finalize(self, cluster: RedisCluster) -> Result:
        if not await finalize(self.client, self.recorder, cluster, self.security.access, self.io_timeout):
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
