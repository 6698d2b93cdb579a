"""A HorizontalPodAutoscaler drives a RedisCluster through its scale subresource on real resource
metrics: the local node measures the Redis processes (``/metrics/resource``), metrics-server
serves them as ``metrics.k8s.io`` (``kubectl top``), kube-controller-manager's HPA controller
writes ``/scale``, the operator adds a replica, and scales back in with a switchover first, so the
master is never removed and no acknowledged write is lost. In cluster mode the apiserver refuses
the HPA's scale (``spec.replicas`` means nothing there) and the HPA says why in its conditions."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from examples.rediscluster.api.intents import SWITCHOVER_TO
from examples.rediscluster.shared.resources import parse_quantity
from pyctrl.envtest import Environment
from pyctrl.testing import eventually
from tests.node.helpers import kubectl
from tests.operator.conftest import Acked, Cluster, RunningOperator, lost_writes, true, write_continuously

pytestmark = pytest.mark.controlplane

MIB = 1 << 20
HPA = "/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers"
TARGET_VERSION = "redis.pyctrl.dev/v1alpha1"


@pytest.fixture(scope="module")
def metrics_server(envtest: Environment) -> Iterator[Environment]:
    """metrics-server on the session's control plane for this module's tests (its APIService is
    removed afterwards, so the other tests see the API discovery they always had)."""
    envtest.start_metrics_server()
    try:
        yield envtest
    finally:
        envtest.stop_metrics_server()
    groups = envtest.http.get("/apis")["groups"]
    assert "metrics.k8s.io" not in {g["name"] for g in groups}, "the APIService outlived metrics-server"


def _pod_memory(env: Environment, namespace: str) -> dict[str, float]:
    """pod -> working set bytes, as metrics.k8s.io serves it (what the HPA reads)."""
    listing = env.http.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods")
    return {
        item["metadata"]["name"]: sum(parse_quantity(c["usage"]["memory"]) for c in item["containers"])
        for item in listing["items"]
    }


def _top(env: Environment, namespace: str) -> dict[str, str]:
    """pod -> the MEMORY(bytes) column of ``kubectl top pods`` (empty when it fails)."""
    done = kubectl(env, "top", "pods", "-n", namespace, "--no-headers")
    if done.returncode != 0:
        return {}
    return {fields[0]: fields[2] for fields in (line.split() for line in done.stdout.splitlines())}


def _hpa(name: str, quantity: str, *, min_replicas: int, max_replicas: int) -> dict[str, Any]:
    """An autoscaling/v2 HPA on RedisCluster ``name``: average working set ``quantity`` per pod;
    no stabilization window (the test wants each decision at the next sync)."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "redis.pyctrl.dev/v1alpha1",
                "kind": "RedisCluster",
                "name": name,
            },
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "memory",
                        "target": {"type": "AverageValue", "averageValue": quantity},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {"stabilizationWindowSeconds": 0},
            },
        },
    }


def _condition(hpa: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (hpa.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


async def _on_top(env: Environment, namespace: str, pods: set[str]) -> dict[str, str]:
    """``kubectl top pods`` once it shows the memory of every one of ``pods`` (metrics-server has
    two scrapes of each)."""
    tops: dict[str, str] = {}

    async def shown() -> bool:
        tops.update(await asyncio.to_thread(_top, env, namespace))
        return pods <= set(tops) and all(tops[p].endswith("Mi") for p in pods)

    await eventually(shown, within=120, what=f"kubectl top pods showing {sorted(pods)}", interval=2)
    return tops


async def _load(c: Cluster, master: str, mib: int) -> None:
    """``mib`` values of 1 MiB on ``master``, on its replicas too before this returns."""
    client = await c.redis(master)
    try:
        for i in range(mib):
            await client.set(f"load{i}", "x" * MIB)
        assert await client.wait(1, 10_000) >= 1
    finally:
        await client.aclose()


async def _unload(c: Cluster, master: str, pods: list[str]) -> None:
    """Flush the data (replicated) and have every Redis return its freed pages to the system."""
    client = await c.redis(master)
    try:
        await client.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
        assert await client.wait(len(pods) - 1, 10_000) == len(pods) - 1
    finally:
        await client.aclose()
    for pod in pods:
        reader = await c.redis(pod)
        try:
            await reader.execute_command("MEMORY", "PURGE")  # type: ignore[no-untyped-call]
        finally:
            await reader.aclose()


async def _switchover(c: Cluster, pod: str) -> None:
    c.envtest.http.request(
        "PATCH",
        f"{c.base}/{c.name}",
        {"metadata": {"annotations": {SWITCHOVER_TO: pod}}},
        content_type="application/merge-patch+json",
    )

    def done() -> bool:
        annotations = c.get()["metadata"].get("annotations") or {}
        return c.status().get("currentMaster") == pod and SWITCHOVER_TO not in annotations

    await eventually(lambda: true(done()), within=90, what=f"the switchover to {pod}", interval=0.5)


async def test_an_hpa_scales_a_replication_cluster_on_memory_and_never_removes_the_master(
    metrics_server: Environment, operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    env = metrics_server
    c = cluster_factory("hpa")
    await c.create_ready(2)
    namespace = c.namespace

    tops = await _on_top(env, namespace, {"hpa-0", "hpa-1"})
    assert all(int(tops[p].removesuffix("Mi")) > 0 for p in ("hpa-0", "hpa-1")), tops
    idle = _pod_memory(env, namespace)
    baseline = max(idle[p] for p in ("hpa-0", "hpa-1"))

    # Target: 32 MiB above the idle pods. 64 MiB of values (on the master and its replica) puts
    # the average well above it (desired > 3, capped at maxReplicas); without them it is well
    # under 2/3 of it (desired <= 2, held at minReplicas).
    target = f"{int((baseline + 32 * MIB) // 1024)}Ki"
    hpas = HPA.format(namespace=namespace)
    env.http.request("POST", hpas, _hpa("hpa", target, min_replicas=2, max_replicas=3))

    def hpa() -> dict[str, Any]:
        return dict(env.http.get(f"{hpas}/hpa"))

    await eventually(
        lambda: true(_condition(hpa(), "ScalingActive").get("status") == "True"),
        within=90,
        what="the HPA reading the pods' memory (ScalingActive)",
        interval=1,
    )
    assert c.get()["spec"]["replicas"] == 2

    master = c.status()["currentMaster"]
    await _load(c, master, 64)
    await eventually(lambda: c.ready(3), within=240, what="the HPA scaling to 3 ready pods", interval=1)
    assert c.get()["spec"]["replicas"] == 3
    assert hpa()["status"]["desiredReplicas"] == 3
    assert c.status()["currentMaster"] == master

    # Put the master on the pod a scale-in removes (the highest ordinal): the scale-in must hand
    # it over first.
    await _switchover(c, "hpa-2")
    # The load goes away.
    await _unload(c, "hpa-2", ["hpa-0", "hpa-1", "hpa-2"])

    acked: Acked = []
    stop = asyncio.Event()
    writer = asyncio.create_task(write_continuously(c, acked, stop))
    try:
        await eventually(lambda: c.ready(2), within=240, what="the HPA scaling back to 2", interval=1)
        await eventually(
            lambda: true(sorted(c.pods()) == ["hpa-0", "hpa-1"]), within=60, what="hpa-2 gone", interval=0.5
        )
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await writer
    assert c.get()["spec"]["replicas"] == 2
    new_master = c.status()["currentMaster"]
    assert new_master in {"hpa-0", "hpa-1"}
    assert (await c.info(new_master))["role"] == "master"
    assert acked, "no write was acknowledged during the scale-in"
    assert await lost_writes(c, acked) == []


async def test_an_hpa_on_a_cluster_mode_cluster_reports_that_it_cannot_scale_it(
    metrics_server: Environment, operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    env = metrics_server
    c = cluster_factory("sharded")
    c.create(mode="cluster", shards=3, replicasPerShard=0)
    await eventually(lambda: c.ready(3), within=180, what="3 shards Running", interval=0.5)
    hpas = HPA.format(namespace=c.namespace)
    # Any Redis uses more than 1 KiB: the HPA wants maxReplicas, a change of spec.replicas.
    env.http.request("POST", hpas, _hpa("sharded", "1Ki", min_replicas=1, max_replicas=5))

    def refused() -> bool:
        able = _condition(env.http.get(f"{hpas}/sharded"), "AbleToScale")
        return able.get("status") == "False" and able.get("reason") == "FailedUpdateScale"

    await eventually(lambda: true(refused()), within=120, what="AbleToScale=False", interval=1)
    able = _condition(env.http.get(f"{hpas}/sharded"), "AbleToScale")
    assert "spec.replicas is not used in cluster mode" in able["message"]
    assert "change spec.shards instead" in able["message"]
    assert c.get()["spec"]["replicas"] == 3
    assert len(c.pods()) == 3
