"""Acceptance: a StatefulSet of real redis-server processes on the local node (real control plane)."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest import Environment
from pyctrl.envtest.node import LOG_DIR_ANNOTATION
from pyctrl.envtest.node.kube import Kube
from pyctrl.testing import eventually
from tests.node.helpers import (
    REDIS_PROBE,
    alive,
    comm,
    container_pid,
    container_status,
    create,
    get_pod,
    kubectl,
    list_pods,
    pod_processes,
    read,
    ready,
    ready_pods,
    redis_cli,
    redis_statefulset,
)

pytestmark = pytest.mark.controlplane


async def make_statefulset(kube: Kube, namespace: str, name: str, replicas: int) -> list[dict[str, Any]]:
    await create(
        kube, f"/apis/apps/v1/namespaces/{namespace}/statefulsets", redis_statefulset(name, replicas)
    )
    return await ready_pods(kube, namespace, name, replicas)


async def test_a_statefulset_of_three_redis_pods_is_ready_with_distinct_ips_that_answer_ping(
    kube: Kube, namespace: str
) -> None:
    pods = await make_statefulset(kube, namespace, "redis", 3)
    node = await kube.get("/api/v1/nodes/local-node")
    [node_ip] = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
    ips = [p["status"]["podIP"] for p in pods]
    assert len(set(ips)) == 3
    for pod, ip in zip(pods, ips, strict=True):
        assert ipaddress.IPv4Address(ip) in ipaddress.IPv4Network("127.0.0.0/8")
        assert ip != node_ip
        assert pod["status"]["podIPs"] == [{"ip": ip}]
        assert pod["status"]["hostIP"] == node_ip
        assert pod["spec"]["nodeName"] == "local-node"
        assert await redis_cli(ip, "ping") == "PONG"
        assert container_status(pod)["ready"]
        assert comm(container_pid(pod)) == "redis-server"
    claims = await kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims")
    assert sorted(c["status"]["phase"] for c in claims["items"]) == ["Bound"] * 3


async def watch_pod(
    kube: Kube, namespace: str, name: str, version: str, until: Any
) -> list[tuple[float, dict[str, Any]]]:
    """Every version of the Pod seen by a watch from ``version`` until ``until(pod)``, timestamped."""
    seen: list[tuple[float, dict[str, Any]]] = []
    query = {"fieldSelector": f"metadata.name={name}", "resourceVersion": version, "timeoutSeconds": 60}

    async def collect() -> None:
        while True:
            async for event in kube.watch(f"/api/v1/namespaces/{namespace}/pods", query):
                if event["type"] in ("ADDED", "MODIFIED"):
                    seen.append((time.monotonic(), event["object"]))
                    query["resourceVersion"] = event["object"]["metadata"]["resourceVersion"]
                    if until(event["object"]):
                        return

    await asyncio.wait_for(collect(), 60)
    return seen


async def test_redis_shutdown_turns_the_pod_not_ready_restarts_it_and_keeps_the_pvc_data(
    kube: Kube, namespace: str, envtest: Environment
) -> None:
    [pod] = await make_statefulset(kube, namespace, "redis", 1)
    ip = pod["status"]["podIP"]
    assert await redis_cli(ip, "set", "greeting", "hello") == "OK"
    assert await redis_cli(ip, "save") == "OK"
    version = pod["metadata"]["resourceVersion"]
    watching = asyncio.create_task(
        watch_pod(
            kube,
            namespace,
            "redis-0",
            version,
            lambda p: container_status(p)["restartCount"] == 1 and ready(p),
        )
    )  # from the pod's resourceVersion: no change is missed, however late the watch connects
    await redis_cli(ip, "shutdown", "nosave")
    # redis-cli returns when the server closed the connection on its way out; timing from here
    # leaves out redis-cli's own start-up, which a loaded machine can stretch.
    shutdown_at = time.monotonic()
    seen = await watching
    not_ready = [t for t, p in seen if not ready(p)]
    assert not_ready, "the pod never turned NotReady"
    assert not_ready[0] - shutdown_at < 1.0
    final = seen[-1][1]
    status = container_status(final)
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"]["exitCode"] == 0
    assert final["status"]["podIP"] == ip
    assert await redis_cli(ip, "get", "greeting") == "hello"
    # kubectl logs through the node's kubelet API: the restarted redis-server, and the one before
    previous = kubectl(envtest, "logs", "-n", namespace, "redis-0", "--previous")
    assert previous.returncode == 0, previous.stderr
    assert "Redis is now ready to exit, bye bye" in previous.stdout
    current = kubectl(envtest, "logs", "-n", namespace, "redis-0")
    assert "Ready to accept connections" in current.stdout
    assert "ready to exit" not in current.stdout


async def test_deleting_a_pod_stops_redis_with_sigterm_and_the_recreated_pod_is_ready_with_its_data(
    kube: Kube, namespace: str
) -> None:
    [pod] = await make_statefulset(kube, namespace, "redis", 1)
    ip, uid, pid = pod["status"]["podIP"], pod["metadata"]["uid"], container_pid(pod)
    log = Path(pod["metadata"]["annotations"][LOG_DIR_ANNOTATION]) / "redis.log"
    assert await redis_cli(ip, "set", "greeting", "hello") == "OK"
    assert await redis_cli(ip, "save") == "OK"
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/redis-0")

    async def recreated() -> dict[str, Any] | None:
        current = await get_pod(kube, namespace, "redis-0")
        return current if current and current["metadata"]["uid"] != uid and ready(current) else None

    new = await eventually(recreated, within=60, what="redis-0 recreated and Ready", interval=0.1)
    assert not alive(pid)
    text = read(log)
    assert "Received SIGTERM scheduling shutdown" in text
    assert "Redis is now ready to exit, bye bye" in text
    assert await redis_cli(new["status"]["podIP"], "get", "greeting") == "hello"
    assert container_status(new)["restartCount"] == 0


async def test_deleting_the_statefulset_leaves_no_redis_server_process(
    kube: Kube, namespace: str, envtest: Environment
) -> None:
    pods = await make_statefulset(kube, namespace, "redis", 3)
    pids = [container_pid(p) for p in pods]
    assert [comm(pid) for pid in pids] == ["redis-server"] * 3
    # the node's processes for the namespace: the containers (and any exec probe running now)
    assert set(pids) <= set(pod_processes(envtest.pids()["local-node"], namespace))
    await kube.request("DELETE", f"/apis/apps/v1/namespaces/{namespace}/statefulsets/redis")

    async def gone() -> bool:
        return not await list_pods(kube, namespace, "app=redis")

    await eventually(gone, within=60, what="the StatefulSet's pods to be gone", interval=0.1)
    assert [pid for pid in pids if alive(pid)] == []
    assert pod_processes(envtest.pids()["local-node"], namespace) == []


def plain_pod(name: str, container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container]},
    }


async def test_an_unknown_image_and_a_crashing_command_are_reported_and_other_pods_are_unaffected(
    kube: Kube, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    healthy = {
        "name": "redis",
        "image": "redis:7.2",
        "args": ["--bind", "$(POD_IP)", "--save", ""],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "readinessProbe": {"exec": {"command": REDIS_PROBE}, "periodSeconds": 1},
    }
    await create(kube, path, plain_pod("healthy", healthy))
    await create(
        kube, path, plain_pod("unknown-image", {"name": "app", "image": "example.com/no-such-image:1"})
    )
    crashing = {"name": "app", "image": "redis:7.2", "command": ["sh", "-c", "echo about to fail; exit 3"]}
    await create(kube, path, plain_pod("crasher", crashing))

    async def waiting_reason(name: str, reason: str) -> dict[str, Any] | None:
        pod = await get_pod(kube, namespace, name)
        state = container_status(pod or {}).get("state", {})
        return pod if state.get("waiting", {}).get("reason") == reason else None

    unknown = await eventually(
        lambda: waiting_reason("unknown-image", "ImageNotMapped"),
        within=60,
        what="ImageNotMapped",
        interval=0.1,
    )
    assert unknown["status"]["phase"] == "Pending"
    assert "example.com/no-such-image:1" in container_status(unknown)["state"]["waiting"]["message"]
    crasher = await eventually(
        lambda: waiting_reason("crasher", "CrashLoopBackOff"),
        within=60,
        what="CrashLoopBackOff",
        interval=0.1,
    )
    status = container_status(crasher)
    assert status["restartCount"] >= 1
    assert status["lastState"]["terminated"]["exitCode"] == 3
    assert status["lastState"]["terminated"]["reason"] == "Error"
    assert not ready(crasher)
    log = Path(crasher["metadata"]["annotations"][LOG_DIR_ANNOTATION]) / "app.log"
    assert read(log).count("about to fail") >= 2

    async def healthy_ready() -> dict[str, Any] | None:
        pod = await get_pod(kube, namespace, "healthy")
        return pod if pod and ready(pod) else None

    pod = await eventually(healthy_ready, within=60, what="healthy Ready", interval=0.1)
    assert await redis_cli(pod["status"]["podIP"], "ping") == "PONG"
    node = await kube.get("/api/v1/nodes/local-node")
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
