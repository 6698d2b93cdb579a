"""The local node agent: kubelet (plus a volume provisioner) for one Node.

Pods are bound to nodes by the real kube-scheduler that envtest runs; the agent runs the Pods bound
to its Node. Start order: loopback block claimed (the node's address and Pod range) → watches
(Pods bound here, claims, volumes) → initial lists synced → service proxy (Services' ClusterIPs,
:mod:`~pyctrl.envtest.node.serviceproxy`) → kubelet API listening → Node
registered Ready and Lease renewed → Pod workers run as Pods arrive. Stop order: every Pod's
containers (SIGTERM, ``stop_grace`` seconds, SIGKILL, in parallel) → Node reported NotReady →
kubelet API and connections closed.

Guarantees:
- several agents on one control plane each run their own Node; all provision volumes (creating a
  volume is idempotent: its name is the claim's uid) into the shared ``volumes_dir``, so claims
  keep being provisioned while any node lives, and a volume is reachable from every node (like
  network storage: no node affinity); ``provisioner=False`` leaves provisioning to the others;
- a restarted agent is a rebooted node: it finds the Pods bound to its Node, their old containers
  gone, and starts them again (restart counts continue; Pods deleted meanwhile are finished);
- the Node turns Ready only after every watch has its initial list, so a Pod created once the
  Node is Ready is seen;
- one worker per Pod uid (``pod.PodWorker``); the worker always sees the Pod's latest version;
  a Pod recreated with the same name is a new uid and a new worker; a finished worker is never
  restarted for the same uid;
- claim and volume events wake the workers still waiting for their volumes;
- ``run`` returns only after every container process of every Pod is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyctrl.envtest._certs import Pki
from pyctrl.envtest.node.addresses import AddressPool, claim_block
from pyctrl.envtest.node.images import DEFAULT_IMAGE_MAP, ImageMap
from pyctrl.envtest.node.kube import ApiError, Informer, Kube
from pyctrl.envtest.node.nodestatus import NodeStatus, machine_capacity
from pyctrl.envtest.node.pod import NodeContext, PodWorker
from pyctrl.envtest.node.provisioner import Provisioner
from pyctrl.envtest.node.server import KubeletServer, PodView
from pyctrl.envtest.node.serviceproxy import ServiceProxy
from pyctrl.envtest.node.wake import set_or_timeout

__all__ = ["NodeAgent", "NodeConfig"]

log = logging.getLogger(__name__)

#: seconds after which a cancelled task that has not ended is logged with its stack
CANCEL_REPORT_AFTER = 10.0


@dataclass
class NodeConfig:
    kubeconfig: Path
    state_dir: Path
    node_name: str = "local-node"
    image_map: list[str] = field(default_factory=lambda: list(DEFAULT_IMAGE_MAP))
    backoff_initial: float = 10.0
    backoff_max: float = 300.0
    stop_grace: float = 5.0
    provisioner: bool = True
    zone: str = "zone-a"
    volumes_dir: Path | None = None  # default: <state_dir>/volumes
    cluster_pki: Path | None = None  # envtest's CA (ca.crt, ca.key); None: no kubelet API


async def _until_synced(events: list[asyncio.Event], stop: asyncio.Event) -> bool:
    """Wait until every event is set (True) or ``stop`` is (False)."""
    waiting: asyncio.Future[Any] = asyncio.gather(*(e.wait() for e in events))
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    await asyncio.wait([waiting, stopped], return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    stopped.cancel()
    return all(e.is_set() for e in events)


async def _register(node: NodeStatus, stop: asyncio.Event) -> bool:
    """Register the Node, retrying while the apiserver is unreachable; False if stopped first."""
    delay = 0.5
    while not stop.is_set():
        try:
            await node.register()
            return True
        except (ApiError, OSError, TimeoutError) as exc:
            log.warning("registering node %s failed: %s; retrying in %.1fs", node.name, exc, delay)
        await set_or_timeout(stop, delay)
        delay = min(delay * 2, 10.0)
    return False


class NodeAgent:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.image_map = ImageMap.parse(config.image_map)
        self.workers: dict[str, PodWorker] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._finished: set[str] = set()
        self._ctx: NodeContext | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then stop every Pod process and return."""
        config = self.config
        config.state_dir.mkdir(parents=True, exist_ok=True)
        block, lock = claim_block()
        kube = await Kube.from_kubeconfig(str(config.kubeconfig))
        background: list[asyncio.Task[Any]] = []
        closers: list[Callable[[], Awaitable[None]]] = []
        try:
            capacity = machine_capacity(config.state_dir)
            addresses = AddressPool(block)
            provisioner = Provisioner(
                kube,
                config.volumes_dir or config.state_dir / "volumes",
                provision=config.provisioner,
                on_claims_changed=self._poke_all,
            )
            self._ctx = NodeContext(
                kube=kube,
                node_name=config.node_name,
                state_dir=config.state_dir,
                image_map=self.image_map,
                addresses=addresses,
                claim_path=provisioner.claim_path,
                capacity=capacity,
                backoff_initial=config.backoff_initial,
                backoff_max=config.backoff_max,
            )
            pods = Informer(
                kube, "/api/v1/pods", self._pod_changed, field_selector=f"spec.nodeName={config.node_name}"
            )
            # Claims and volumes first: the Pods found by the first list need them for their volumes.
            background = [asyncio.create_task(provisioner.run(), name="provisioner")]
            if not await _until_synced([provisioner.claims.synced, provisioner.volumes.synced], stop):
                return
            background.append(asyncio.create_task(pods.run(), name="pods"))
            if not await _until_synced([pods.synced], stop):
                return
            background.append(asyncio.create_task(ServiceProxy(kube).run(), name="service proxy"))
            kubelet_port = 0
            if config.cluster_pki is not None:
                server = KubeletServer(kube, config.node_name, addresses.node_ip, self._pod_views)
                ctx = server.ssl_context(Pki(config.cluster_pki), config.state_dir / "pki")
                kubelet_port = await server.start(ctx)
                closers.append(server.close)
            node = NodeStatus(
                kube,
                config.node_name,
                capacity,
                ip=addresses.node_ip,
                zone=config.zone,
                kubelet_port=kubelet_port,
            )
            if not await _register(node, stop):
                return
            log.info(
                "node %s Ready (address %s, pods 127.%d.x.y, kubelet API port %d, state %s, images %s)",
                config.node_name,
                addresses.node_ip,
                block,
                kubelet_port,
                config.state_dir,
                config.image_map,
            )
            background.append(asyncio.create_task(node.run(), name="heartbeat"))
            await stop.wait()
            log.info("stopping: %d pod(s)", len(self.workers))
            await self._stop_pods()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(node.set_ready(False), 3)
        finally:
            await self._stop_pods()
            await _cancel(background)
            for close in closers:
                await close()
            await kube.close()
            lock.close()

    async def _stop_pods(self) -> None:
        workers = list(self.workers.values())
        await asyncio.gather(*(w.stop(self.config.stop_grace, pre_stop=False) for w in workers))
        await _cancel(list(self._tasks.values()))

    def _pod_views(self) -> list[PodView]:
        return list(self.workers.values())

    def _poke_all(self) -> None:
        for worker in self.workers.values():
            if not worker.sandbox_ready:
                worker.poke()

    def _pod_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new or old
        assert obj is not None
        uid = obj["metadata"]["uid"]
        if new is None:
            self._finished.discard(uid)
            worker = self.workers.get(uid)
            if worker is not None:
                worker.remove()
            return
        if uid in self._finished:
            return
        worker = self.workers.get(uid)
        if worker is not None:
            worker.update(new)
            return
        assert self._ctx is not None
        worker = PodWorker(self._ctx, new)
        self.workers[uid] = worker
        task = asyncio.create_task(
            worker.run(), name=f"pod {obj['metadata']['namespace']}/{obj['metadata']['name']}"
        )
        self._tasks[uid] = task
        task.add_done_callback(lambda t: self._worker_done(uid, t))

    def _worker_done(self, uid: str, task: asyncio.Task[None]) -> None:
        self.workers.pop(uid, None)
        self._tasks.pop(uid, None)
        self._finished.add(uid)
        if not task.cancelled() and task.exception() is not None:
            log.error("pod worker %s failed", uid, exc_info=task.exception())


async def _cancel(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait for them; a task still running after :data:`CANCEL_REPORT_AFTER`
    seconds is logged with its stack (once), then waited for further (a stop never leaves a task
    behind that still holds a process or a socket)."""
    for task in tasks:
        task.cancel()
    pending = {t for t in tasks if not t.done()}
    if not pending:
        return
    _, stuck = await asyncio.wait(pending, timeout=CANCEL_REPORT_AFTER)
    for task in stuck:
        frames = io.StringIO()
        task.print_stack(file=frames)
        log.warning("%.0fs after it was cancelled, still running: %s", CANCEL_REPORT_AFTER, frames.getvalue())
    if stuck:
        await asyncio.gather(*stuck, return_exceptions=True)
