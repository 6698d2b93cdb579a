"""The Node object and its heartbeats (kubelet ``kubelet_node_status`` + ``nodelease``).

Guarantees:
- ``register`` creates the Node (or adopts an existing one of the same name, keeping its spec:
  a cordon or taints survive a node restart) with labels ``kubernetes.io/hostname``,
  ``kubernetes.io/os``, ``kubernetes.io/arch``, ``topology.kubernetes.io/zone`` and ``/region``,
  addresses InternalIP (the node's own loopback address) and Hostname, the kubelet API port in
  ``status.daemonEndpoints.kubeletEndpoint.Port`` (and, with it, the declared feature
  ``ExtendWebSocketsToKubelet``), capacity/allocatable from this machine (cpu,
  memory, ephemeral-storage, pods 110), ``nodeInfo.bootID`` new for every start of the node
  process (as a reboot changes it) and the conditions Ready, MemoryPressure, DiskPressure,
  PIDPressure;
- ``renew_lease`` keeps ``kube-node-lease/<node>`` held by the node (leaseDurationSeconds 10,
  renewed every ``RENEW_INTERVAL`` = 2 s by ``run``: the kubelet's 40 s / 10 s scaled down so that
  envtest's short ``--node-monitor-grace-period`` notices a lost node quickly), owned by the Node,
  so the node lifecycle controller never marks it NotReady while the agent lives; the Node status
  is re-posted every 60 s;
- ``set_ready(False)`` on shutdown reports ``Ready=False`` (reason KubeletNotReady).
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyctrl.envtest.node.kube import ApiError, Kube
from pyctrl.envtest.node.status import now_rfc3339

__all__ = ["LEASE_DURATION", "RENEW_INTERVAL", "NodeStatus", "machine_capacity"]

log = logging.getLogger(__name__)

LEASE_DURATION = 10
RENEW_INTERVAL = 2.0
_STATUS_EVERY = 30  # renewals between two full status posts (60 s)
LEASE_NAMESPACE = "kube-node-lease"


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)


def machine_capacity(state_dir: Path) -> dict[str, str]:
    """cpu, memory, ephemeral-storage and pods of this machine, as quantities."""
    memory_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
    except OSError:
        pass
    disk = shutil.disk_usage(state_dir)
    return {
        "cpu": str(os.cpu_count() or 1),
        "memory": f"{memory_kib}Ki",
        "ephemeral-storage": f"{disk.total // 1024}Ki",
        "pods": "110",
    }


def _read(path: str, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


class NodeStatus:
    def __init__(
        self, kube: Kube, name: str, capacity: dict[str, str], *, ip: str, zone: str, kubelet_port: int
    ) -> None:
        self.kube, self.name, self.capacity = kube, name, capacity
        self.ip, self.kubelet_port = ip, kubelet_port
        self.labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": _arch(),
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": "local",
            "pyctrl.dev/local-node": "true",
        }
        self.uid = ""
        self.version = "v0.0.0"
        self.boot_id = str(uuid.uuid4())  # every start of the node process is a reboot

    def _status(self, ready: bool) -> dict[str, Any]:
        now = now_rfc3339()

        def condition(kind: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
            return {
                "type": kind,
                "status": "True" if ok else "False",
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }

        os_release = dict(line.split("=", 1) for line in _read("/etc/os-release").splitlines() if "=" in line)
        return {
            "capacity": self.capacity,
            "allocatable": self.capacity,
            "conditions": [
                condition(
                    "MemoryPressure",
                    False,
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                condition("DiskPressure", False, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition(
                    "PIDPressure", False, "KubeletHasSufficientPID", "kubelet has sufficient PID available"
                ),
                condition("Ready", True, "KubeletReady", "kubelet is posting ready status")
                if ready
                else condition("Ready", False, "KubeletNotReady", "local node agent is not running"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": self.ip},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            # With the kubelet API up, kube-apiserver proxies kubectl exec's WebSocket to it as it
            # is, instead of translating it to SPDY (see streams.py).
            "declaredFeatures": ["ExtendWebSocketsToKubelet"] if self.kubelet_port else [],
            "nodeInfo": {
                "machineID": _read("/etc/machine-id"),
                "systemUUID": _read("/sys/class/dmi/id/product_uuid"),
                "bootID": self.boot_id,
                "kernelVersion": platform.release(),
                "osImage": os_release.get("PRETTY_NAME", "Linux").strip('"'),
                "containerRuntimeVersion": "pyctrl-local://0.1.0",
                "kubeletVersion": self.version,
                "operatingSystem": "linux",
                "architecture": _arch(),
            },
        }

    async def _preserve_transitions(self, status: dict[str, Any]) -> None:
        try:
            node = await self.kube.get(f"/api/v1/nodes/{self.name}")
        except ApiError:
            return
        previous = {c["type"]: c for c in node.get("status", {}).get("conditions") or []}
        for cond in status["conditions"]:
            old = previous.get(cond["type"])
            if old and old.get("status") == cond["status"] and old.get("lastTransitionTime"):
                cond["lastTransitionTime"] = old["lastTransitionTime"]

    async def register(self) -> None:
        """Create (or adopt) the Node and post a Ready status."""
        with_version = await self.kube.get("/version")
        self.version = str(with_version.get("gitVersion", self.version))
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": self.labels}}
        try:
            node = await self.kube.request("POST", "/api/v1/nodes", body=body)
        except ApiError as exc:
            if exc.code != 409:
                raise
            node = await self.kube.patch(f"/api/v1/nodes/{self.name}", {"metadata": {"labels": self.labels}})
        self.uid = node["metadata"]["uid"]
        await self.set_ready(True)
        await self.renew_lease()

    async def set_ready(self, ready: bool) -> None:
        status = self._status(ready)
        await self._preserve_transitions(status)
        await self.kube.patch(f"/api/v1/nodes/{self.name}/status", {"status": status})

    async def renew_lease(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
        spec = {
            "holderIdentity": self.name,
            "leaseDurationSeconds": LEASE_DURATION,
            "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        try:
            await self.kube.patch(f"{path}/{self.name}", {"spec": spec})
        except ApiError as exc:
            if exc.code != 404:
                raise
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": self.uid}
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
                "spec": spec,
            }
            await self.kube.request("POST", path, body=body)

    async def run(self) -> None:
        """Renew the lease every ``RENEW_INTERVAL`` and re-post the status every 60 s, forever."""
        ticks = 0
        while True:
            await asyncio.sleep(RENEW_INTERVAL)
            ticks += 1
            try:
                await self.renew_lease()
                if ticks % _STATUS_EVERY == 0:
                    await self.set_ready(True)
            except (ApiError, OSError, TimeoutError) as exc:
                log.warning("node heartbeat failed: %s", exc)
                await self.kube.reload_if_changed()
