"""Helpers for the local node's control-plane tests: waiting, Redis manifests, processes."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from pyctrl.envtest import Environment
from pyctrl.envtest.node.kube import ApiError, Kube
from pyctrl.testing import eventually

REDIS_PROBE = ["sh", "-c", 'redis-cli -h "$POD_IP" ping | grep -q PONG']


def kubectl(env: Environment, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``kubectl ARGS`` as the environment's admin."""
    assert env.bin_dir is not None
    argv = [str(env.bin_dir / "kubectl"), f"--kubeconfig={env.kubeconfig_path}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def condition(pod: dict[str, Any], kind: str) -> str | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond["type"] == kind:
            return str(cond["status"])
    return None


def ready(pod: dict[str, Any]) -> bool:
    return condition(pod, "Ready") == "True"


def container_status(pod: dict[str, Any], index: int = 0) -> dict[str, Any]:
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return dict(statuses[index])


def container_pid(pod: dict[str, Any], index: int = 0) -> int:
    container_id = container_status(pod, index).get("containerID", "")
    assert container_id.startswith("pyctrl://"), container_id
    return int(container_id.removeprefix("pyctrl://"))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def pod_processes(node_pid: int, namespace: str) -> list[int]:
    """Container processes the node runs for Pods of ``namespace`` (their root is the Pod's dir)."""
    found = []
    for pid in children(node_pid):
        try:
            root = str(Path(f"/proc/{pid}/root").readlink())
        except OSError:
            continue
        if f"/pods/{namespace}_" in root:
            found.append(pid)
    return found


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def get_pod(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return await kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise


async def list_pods(kube: Kube, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
    listing = await kube.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)
    return list(listing["items"])


async def create(kube: Kube, path: str, body: dict[str, Any]) -> dict[str, Any]:
    return await kube.request("POST", path, body=body)


async def redis_cli(ip: str, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "redis-cli", "-h", ip, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 10)
    return out.decode().strip()


def redis_statefulset(name: str, replicas: int) -> dict[str, Any]:
    """Redis binding its Pod IP (downward API), data in /data on a PVC, readiness by PING."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 20,
                    "containers": [
                        {
                            "name": "redis",
                            "image": "redis:7.2",
                            "command": ["redis-server"],
                            "args": ["--bind", "$(POD_IP)", "--port", "6379", "--dir", "/data", "--save", ""],
                            "env": [
                                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
                            ],
                            "ports": [{"name": "redis", "containerPort": 6379}],
                            "readinessProbe": {"exec": {"command": REDIS_PROBE}, "periodSeconds": 1},
                            "livenessProbe": {"tcpSocket": {"port": "redis"}, "periodSeconds": 2},
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        }
                    ],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "64Mi"}},
                    },
                }
            ],
        },
    }


async def ready_pods(
    kube: Kube, namespace: str, app: str, count: int, seconds: float = 60
) -> list[dict[str, Any]]:
    """Wait until exactly ``count`` Pods of ``app`` exist and are all Ready."""

    async def check() -> list[dict[str, Any]] | None:
        pods = await list_pods(kube, namespace, f"app={app}")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == count and all(ready(p) for p in live) else None

    return await eventually(check, within=seconds, what=f"{count} Ready pods of {app}", interval=0.1)
