"""The RedisCluster operator end to end: real control plane, local node, real redis-server pods."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable

import pytest

from tests.operator.conftest import Cluster, RunningOperator, eventually

pytestmark = pytest.mark.controlplane


async def test_a_new_cluster_becomes_ready_with_one_master_and_replicating_replicas(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("basic")
    c.create(replicas=3, downAfterMilliseconds=2000)
    await eventually("Running with 3 ready replicas", lambda: c.ready(3), 90)
    status = c.status()
    master = status["currentMaster"]
    roles = await c.roles()
    assert sorted(roles.values()) == ["master", "slave", "slave"]
    assert roles[master] == "master"
    for pod, role in roles.items():
        if role == "slave":
            info = await c.info(pod)
            assert info["master_link_status"] == "up"
            assert info["master_host"] == c.pod_ip(master)
    writer = await c.redis(master)
    await writer.set("answer", "42")
    assert await writer.wait(2, 2000) == 2
    await writer.aclose()
    for pod in roles:
        reader = await c.redis(pod)
        assert await reader.get("answer") == "42"
        await reader.aclose()
    labels = {p: pod["metadata"]["labels"].get("redis.pyctrl.dev/role") for p, pod in c.pods().items()}
    assert labels == {p: ("master" if r == "master" else "replica") for p, r in roles.items()}
    svc = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/services/basic-master")
    assert svc["spec"]["selector"]["redis.pyctrl.dev/role"] == "master"
    assert status["selector"] == "app.kubernetes.io/instance=basic,app.kubernetes.io/name=redis"
    assert {cond["type"]: cond["status"] for cond in status["conditions"]} == {
        "Ready": "True",
        "Degraded": "False",
    }


async def _writer(c: Cluster, acked: list[int], stop: asyncio.Event) -> None:
    """Write increasing keys to whoever the master is; keep those acknowledged by WAIT 1."""
    i = 0
    while not stop.is_set():
        try:
            master = c.status()["currentMaster"]
            client = await c.redis(master)
            try:
                while not stop.is_set():
                    await client.set(f"k{i}", i)
                    if await client.wait(1, 500) >= 1:
                        acked.append(i)
                    i += 1
            finally:
                await client.aclose()
        except Exception:
            await asyncio.sleep(0.05)  # master gone: retry against the next recorded master


async def _masters_never_two(c: Cluster, violations: list[dict[str, str]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        roles = await c.roles()
        if list(roles.values()).count("master") > 1:
            violations.append(roles)
        await asyncio.sleep(0.1)


async def test_a_crashed_master_fails_over_without_losing_acknowledged_writes(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("crash")
    c.create(replicas=3, downAfterMilliseconds=2000)
    await eventually("Running", lambda: c.ready(3), 90)
    old_master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    acked: list[int] = []
    stop = asyncio.Event()
    writer = asyncio.create_task(_writer(c, acked, stop))
    await eventually("some acknowledged writes", lambda: _true(len(acked) > 20), 30)
    crashed_at = time.monotonic()
    victim = await c.redis(old_master)
    with contextlib.suppress(Exception):
        await victim.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
    await victim.aclose()

    async def new_master() -> bool:
        s = c.status()
        return s.get("masterEpoch", 0) > epoch and (await c.roles()).get(s["currentMaster"]) == "master"

    await eventually("a new master", new_master, 2 + 30)
    took = time.monotonic() - crashed_at
    violations: list[dict[str, str]] = []
    watcher = asyncio.create_task(_masters_never_two(c, violations, stop))
    await eventually("Running again with the old master back as a replica", lambda: c.ready(3), 90)
    n = len(acked)
    await eventually("writes on the new master", lambda: _true(len(acked) > n + 20), 30)
    stop.set()
    await asyncio.gather(writer, watcher)
    new = c.status()["currentMaster"]
    assert new != old_master
    assert (await c.info(old_master))["role"] == "slave"
    assert (await c.info(old_master))["master_host"] == c.pod_ip(new)
    client = await c.redis(new)
    missing = [i for i in acked if await client.get(f"k{i}") is None]
    await client.aclose()
    assert missing == [], f"{len(missing)} acknowledged writes lost"
    assert violations == []
    print(f"failover after crash: new master serving {took:.2f}s after SHUTDOWN NOSAVE")


async def _true(value: bool) -> bool:
    return value


async def test_a_hung_master_fails_over_and_is_demoted_after_it_resumes(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("hung")
    c.create(replicas=3, downAfterMilliseconds=1500)
    await eventually("Running", lambda: c.ready(3), 90)
    old_master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    pid = int((await _server_info(c, old_master))["process_id"])
    os.kill(pid, signal.SIGSTOP)
    try:
        await eventually("a new master", lambda: _true(c.status().get("masterEpoch", 0) > epoch), 60)
    finally:
        os.kill(pid, signal.SIGCONT)
    new = c.status()["currentMaster"]
    assert new != old_master

    async def demoted() -> bool:
        info = await c.info(old_master)
        return bool(info["role"] == "slave" and info["master_host"] == c.pod_ip(new))

    await eventually("the resumed old master to be demoted", demoted, 60)
    assert list((await c.roles()).values()).count("master") == 1


async def _server_info(c: Cluster, pod: str) -> dict[str, str]:
    client = await c.redis(pod)
    try:
        return dict(await client.info("server"))
    finally:
        await client.aclose()
