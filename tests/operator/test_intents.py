"""The day-2 intents ``kubectl rediscluster`` writes, acted on by the operator (issue 28), on the
real control plane with real redis-server pods: fencing (a planned switchover off a fenced
master; the fenced pod keeps running, out of the Services (connections through the local node's
service proxy never reach it); unfenced, it rejoins as a
replica), promote (a planned switchover to the pod asked for, no acknowledged write lost) and
hibernation (every pod stopped, the volumes kept; woken with the same master and every key; refused
without persistence)."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from examples.rediscluster.api.intents import FENCED_LABEL, FENCED_PODS, SWITCHOVER_TO
from examples.rediscluster.plugin import cli
from pyctrl.metrics import registry
from pyctrl.testing import eventually
from tests.operator.conftest import Cluster, lost_writes, true, write_continuously

pytestmark = [pytest.mark.controlplane, pytest.mark.usefixtures("operator")]

ROLE = "redis.pyctrl.dev/role"


def op_metric(metric: str, **labels: str) -> float | None:
    """A sample of the in-process operator's metrics (None when the series does not exist)."""
    return registry.get_sample_value(metric, labels)


async def run_ids(c: Cluster) -> dict[str, str]:
    """run_id -> pod, for every pod of the cluster (INFO server, straight to each pod)."""
    out = {}
    for pod in c.pods():
        client = await c.redis(pod)
        try:
            out[str((await client.info("server"))["run_id"])] = pod
        finally:
            await client.aclose()
    return out


async def served_by(c: Cluster, service: str, connections: int = 40) -> set[str]:
    """The pods that answer ``connections`` connections to ``service``'s ClusterIP: the local
    node's service proxy relays each to a Ready pod its selector matches, chosen at random (so
    40 connections reach each of two endpoints but with a chance of 2 in 2**40)."""
    ip = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/services/{service}")["spec"]["clusterIP"]
    pods = await run_ids(c)
    password = c.password()
    seen = set()
    for _ in range(connections):
        client = aioredis.Redis(
            host=ip, port=6379, password=password, socket_timeout=2, socket_connect_timeout=2
        )
        try:
            seen.add(pods.get(str((await client.info("server"))["run_id"]), "?"))
        finally:
            await client.aclose()
    return seen


def events(c: Cluster, reason: str) -> list[str]:
    items = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
    return [e["message"] for e in items if e["reason"] == reason and e["involvedObject"]["name"] == c.name]


async def services_are(c: Cluster, master: str, replicas: set[str]) -> bool:
    """Connections to the ``-master`` Service reach ``master`` only, to the ``-replicas`` Service
    each of ``replicas`` and no other pod (an AssertionError naming what differs otherwise)."""
    seen = (await served_by(c, f"{c.name}-master"), await served_by(c, f"{c.name}-replicas"))
    assert seen == ({master}, replicas), f"(master, replicas) Services served by {seen}"
    return True


async def test_fencing_the_master_hands_it_over_first_and_keeps_the_pod_out_of_the_services(
    cluster_factory: Callable[[str], Cluster], kubeconfig: Path, namespace: str
) -> None:
    c = cluster_factory("fence")
    await c.create_ready(3, downAfterMilliseconds=2000)
    old, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    uid = c.pods()[old]["metadata"]["uid"]
    base = ["-n", namespace, "--kubeconfig", str(kubeconfig)]
    acked: list[tuple[float, int, str]] = []
    stop = asyncio.Event()
    writer = asyncio.create_task(write_continuously(c, acked, stop))
    await eventually(lambda: true(len(acked) > 20), within=30, what="some acknowledged writes", interval=0.2)

    assert await cli.run([*base, "fence", "fence", old]) == 0
    await eventually(
        lambda: true(c.status().get("currentMaster") != old), within=60, what="a switchover", interval=0.2
    )
    new = c.status()["currentMaster"]
    others = set(c.pods()) - {old, new}
    await eventually(lambda: c.ready(3), within=60, what="Running with the fenced pod", interval=0.2)
    await eventually(
        lambda: services_are(c, new, others),
        within=60,
        what="the fenced pod out of the Services",
        interval=0.5,
    )
    n = len(acked)
    await eventually(
        lambda: true(len(acked) > n + 20), within=30, what="writes on the new master", interval=0.2
    )
    stop.set()
    await writer
    assert await lost_writes(c, acked) == []
    assert c.status()["masterEpoch"] == epoch + 1
    assert [m for m in events(c, "SwitchoverStarted") if f"from {old} to {new}" in m]  # planned, not a crash
    fenced_pod = c.pods()[old]
    assert fenced_pod["metadata"]["uid"] == uid  # the same pod, still running
    assert fenced_pod["metadata"]["labels"][ROLE] == FENCED_LABEL
    info = await c.info(old)
    assert info["role"] == "slave"  # kept for inspection, following the master

    # a fenced pod is never promoted: the operator refuses the switchover and says why
    assert await cli.run([*base, "promote", "fence", old]) == 0
    await eventually(
        lambda: true(SWITCHOVER_TO not in (c.get()["metadata"].get("annotations") or {})),
        within=30,
        what="the refused switchover acknowledged",
        interval=0.2,
    )
    assert any(f"{old} is fenced" in m for m in events(c, "SwitchoverRefused"))
    assert c.status()["currentMaster"] == new

    assert await cli.run([*base, "unfence", "fence", old]) == 0
    assert FENCED_PODS not in (c.get()["metadata"].get("annotations") or {})
    await eventually(
        lambda: services_are(c, new, others | {old}), within=60, what="the unfenced pod back", interval=0.5
    )
    assert c.pods()[old]["metadata"]["labels"][ROLE] == "replica"
    info = await c.info(old)
    assert (info["role"], info["master_host"], info["master_link_status"]) == ("slave", c.pod_ip(new), "up")
    assert c.status()["currentMaster"] == new
    assert c.status()["masterEpoch"] == epoch + 1


async def test_promote_moves_the_master_without_losing_acknowledged_writes(
    cluster_factory: Callable[[str], Cluster], kubeconfig: Path, namespace: str
) -> None:
    c = cluster_factory("promo")
    await c.create_ready(3, downAfterMilliseconds=2000)
    old, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    target = sorted(set(c.pods()) - {old})[-1]
    acked: list[tuple[float, int, str]] = []
    stop = asyncio.Event()
    writer = asyncio.create_task(write_continuously(c, acked, stop))
    await eventually(lambda: true(len(acked) > 20), within=30, what="some acknowledged writes", interval=0.2)

    assert await cli.run(["-n", namespace, "--kubeconfig", str(kubeconfig), "promote", "promo", target]) == 0
    await eventually(
        lambda: true(SWITCHOVER_TO not in (c.get()["metadata"].get("annotations") or {})),
        within=60,
        what="the switchover done and its annotation removed",
        interval=0.2,
    )
    assert c.status()["currentMaster"] == target
    await eventually(lambda: c.ready(3), within=60, what="Running again", interval=0.2)
    n = len(acked)
    await eventually(
        lambda: true(len(acked) > n + 20), within=30, what="writes on the new master", interval=0.2
    )
    stop.set()
    await writer
    assert {m for _, _, m in acked} >= {old, target}  # both masters acknowledged writes
    assert await lost_writes(c, acked) == []
    assert c.status()["masterEpoch"] == epoch + 1
    assert events(c, "SwitchoverDone") == [f"{target} is the master, as asked"]


def redis_processes_bound_to(ips: set[str]) -> list[str]:
    """Every redis-server process serving on one of ``ips`` (Redis sets its process title to
    ``redis-server IP:PORT``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                title = f.read().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue
        if title.startswith("redis-server") and any(f" {ip}:" in title or f" {ip} " in title for ip in ips):
            found.append(title)
    return found


async def test_hibernation_stops_every_pod_keeps_the_volumes_and_wakes_with_the_same_master_and_data(
    cluster_factory: Callable[[str], Cluster], kubeconfig: Path, namespace: str
) -> None:
    c = cluster_factory("sleepy")
    await c.create_ready(3, enablePersistence=True, storageSize="64Mi", downAfterMilliseconds=2000)
    master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    client = await c.redis(master)
    for start in range(0, 10_000, 1000):
        await client.mset({f"key:{i}": str(i) for i in range(start, start + 1000)})
    await client.aclose()
    ips = {p["status"]["podIP"] for p in c.pods().values()}
    assert len(redis_processes_bound_to(ips)) == 3
    failovers = op_metric("rediscluster_failovers_total", namespace=namespace, name="sleepy")
    # the gauge the alert rules are silenced by (charts/rediscluster-operator/files/alerts.yaml)
    assert op_metric("rediscluster_hibernated", namespace=namespace, name="sleepy") == 0
    base = ["-n", namespace, "--kubeconfig", str(kubeconfig)]

    assert await cli.run([*base, "hibernate", "on", "sleepy"]) == 0
    await eventually(
        lambda: true(c.status().get("phase") == "Hibernated"),
        within=120,
        what="phase Hibernated",
        interval=0.5,
    )
    assert c.pods() == {}
    assert redis_processes_bound_to(ips) == []
    sts = c.envtest.http.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/sleepy")
    assert sts["spec"]["replicas"] == 0
    claims = c.envtest.http.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims")["items"]
    assert sorted(p["metadata"]["name"] for p in claims) == [f"data-sleepy-{i}" for i in range(3)]
    status = c.status()
    assert status["currentMaster"] == master
    conditions = {cond["type"]: (cond["status"], cond["reason"]) for cond in status["conditions"]}
    assert conditions["Hibernated"] == ("True", "Hibernated")
    assert conditions["Ready"] == ("False", "Hibernated")
    assert op_metric("rediscluster_hibernated", namespace=namespace, name="sleepy") == 1

    assert await cli.run([*base, "hibernate", "off", "sleepy"]) == 0
    await eventually(lambda: c.ready(3), within=180, what="Running again with 3 ready pods", interval=0.5)
    status = c.status()
    assert (status["currentMaster"], status["masterEpoch"]) == (master, epoch)  # the same master
    conditions = {cond["type"]: (cond["status"], cond["reason"]) for cond in status["conditions"]}
    assert conditions["Hibernated"] == ("False", "Awake")
    assert op_metric("rediscluster_hibernated", namespace=namespace, name="sleepy") == 0
    assert op_metric("rediscluster_failovers_total", namespace=namespace, name="sleepy") == failovers
    assert (await c.roles())[master] == "master"
    for pod in c.pods():
        reader = await c.redis(pod)
        try:
            if pod != master:
                await eventually(
                    functools.partial(_synced, reader), within=60, what=f"{pod} in sync", interval=0.2
                )
            assert await reader.dbsize() == 10_000
            assert await reader.get("key:9999") == "9999"
        finally:
            await reader.aclose()


async def _synced(reader: aioredis.Redis) -> bool:
    info = await reader.info("replication")
    return bool(info.get("master_link_status") == "up")


async def test_hibernation_without_persistence_is_refused_and_the_cluster_keeps_running(
    cluster_factory: Callable[[str], Cluster], kubeconfig: Path, namespace: str
) -> None:
    c = cluster_factory("awake")
    await c.create_ready(2, downAfterMilliseconds=2000)
    assert await cli.run(["-n", namespace, "--kubeconfig", str(kubeconfig), "hibernate", "on", "awake"]) == 0

    async def refused() -> tuple[str, str] | None:
        conds = {cond["type"]: cond for cond in c.status().get("conditions", [])}
        h = conds.get("Hibernated")
        return (h["reason"], h["message"]) if h is not None and h["status"] == "False" else None

    reason, message = await eventually(refused, within=60, what="the refusal condition", interval=0.2)
    assert reason == "HibernationRefused"
    assert "spec.enablePersistence is false" in message
    assert await c.ready(2)
    assert len(c.pods()) == 2
