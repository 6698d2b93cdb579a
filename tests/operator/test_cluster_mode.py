"""``spec.mode: cluster`` end to end: real control plane, local node, real redis-server pods, the
operator as a user holding only the generated ClusterRole; checked with Redis's own tools
(``redis-cli --cluster check``, ``CLUSTER INFO``) and redis-py's cluster-aware client."""

from __future__ import annotations

import asyncio
import re
from asyncio.subprocess import PIPE, STDOUT
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from examples.rediscluster.api import RedisCluster as RedisClusterKind
from pyctrl import Request
from pyctrl.testing import assert_idempotent, eventually
from tests.operator.conftest import Cluster, RunningOperator

pytestmark = pytest.mark.controlplane


async def cluster_check(ip: str) -> str:
    """``redis-cli --cluster check ip:6379``; fails the test on a non-zero exit."""
    proc = await asyncio.create_subprocess_exec(
        "redis-cli", "--cluster", "check", f"{ip}:6379", stdout=PIPE, stderr=STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()
    return out.decode()


def assert_check_clean(report: str, masters: int) -> None:
    assert "[OK] All 16384 slots covered." in report, report
    assert "[WARNING]" not in report, report
    assert "slots are open" not in report, report
    assert "[OK] All nodes agree about slots configuration." in report, report
    counts = [int(n) for n in re.findall(r"\| (\d+) slots \|", report)]
    assert len(counts) == masters, report
    assert max(counts) - min(counts) <= 1, report


async def cluster_ready(c: Cluster, shards: int, replicas_per_shard: int = 1) -> bool:
    s = c.status()
    return (
        s.get("phase") == "Running"
        and s.get("clusterState") == "ok"
        and s.get("slotsOk") == 16384
        and len(s.get("shards") or []) == shards
        and s.get("readyReplicas") == shards * (1 + replicas_per_shard)
    )


async def cluster_info(ip: str) -> dict[str, str]:
    client = aioredis.Redis(host=ip, port=6379, socket_timeout=5, decode_responses=True)
    try:
        text = await client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
    finally:
        await client.aclose()
    return dict(line.split(":", 1) for line in str(text).split() if ":" in line)


async def test_a_three_shard_cluster_forms_with_every_slot_covered_and_status_labels_events_agreeing(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("shards")
    c.create(mode="cluster", shards=3, replicasPerShard=1, downAfterMilliseconds=2000)
    await eventually(lambda: cluster_ready(c, 3), within=120, what="3 shards Running", interval=0.3)
    pods = c.pods()
    assert len(pods) == 6
    any_ip = c.pod_ip("shards-4")
    assert_check_clean(await cluster_check(any_ip), masters=3)
    for pod in pods:
        assert (await cluster_info(c.pod_ip(pod)))["cluster_state"] == "ok"
    status = c.status()
    assert status["slotsAssigned"] == 16384
    labels = {
        p: (
            v["metadata"]["labels"].get("redis.pyctrl.dev/role"),
            v["metadata"]["labels"].get("redis.pyctrl.dev/shard"),
        )
        for p, v in pods.items()
    }
    roles = await c.roles()
    for shard in status["shards"]:
        index, master, replicas = shard["index"], shard["master"], shard["replicas"]
        assert shard["ready"] is True
        assert master in (f"shards-{2 * index}", f"shards-{2 * index + 1}")
        assert roles[master] == "master"
        assert labels[master] == ("master", str(index))
        assert len(replicas) == 1
        assert roles[replicas[0]] == "slave"
        assert labels[replicas[0]] == ("replica", str(index))
        assert (await c.info(replicas[0]))["master_host"] == c.pod_ip(master)
    assert sorted(s["slotCount"] for s in status["shards"]) == [5461, 5461, 5462]
    assert {cond["type"]: cond["status"] for cond in status["conditions"]} == {
        "Ready": "True",
        "Degraded": "False",
        "Resharding": "False",
    }
    assert "currentMaster" not in status
    services = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/services")["items"]
    assert [s["metadata"]["name"] for s in services] == ["shards-headless"]
    events = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
    assert {e["reason"] for e in events} >= {"SlotsAssigned"}
    # a cluster-aware client reads and writes through any node
    client = RedisCluster(host=any_ip, port=6379, decode_responses=True)
    try:
        for i in range(100):
            await client.set(f"key{i}", i)
        assert [await client.get(f"key{i}") for i in range(100)] == [str(i) for i in range(100)]
    finally:
        await client.aclose()


async def test_a_converged_cluster_mode_cluster_reconciles_without_writing(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("steadyc")
    c.create(mode="cluster", shards=3, replicasPerShard=0)
    await eventually(lambda: cluster_ready(c, 3, 0), within=120, what="3 shards Running", interval=0.3)
    mgr = operator.operator.manager
    rv = c.get()["metadata"]["resourceVersion"]

    async def cache_caught_up() -> bool:
        cached = await mgr.client.get(RedisClusterKind, c.name, namespace=c.namespace)
        return bool(cached.metadata.resource_version == rv)

    await eventually(cache_caught_up, within=30, what="the cache to hold the converged object", interval=0.2)
    await assert_idempotent(operator.operator.reconciler, Request(c.namespace, c.name), mgr.client, n=10)
