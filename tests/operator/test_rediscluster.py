"""The RedisCluster operator end to end: real control plane, local node, real redis-server pods."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from examples.rediscluster.shared.metrics import FAILOVER_PHASES
from pyctrl.metrics import registry
from pyctrl.testing import eventually
from tests.operator.conftest import (
    Cluster,
    OperatorFactory,
    Pods,
    PodSampler,
    RunningOperator,
    lost_writes,
    true,
    write_continuously,
)

pytestmark = pytest.mark.controlplane


async def test_a_new_cluster_becomes_ready_with_one_master_and_replicating_replicas(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("basic")
    await c.create_ready(3, downAfterMilliseconds=2000)
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
        "PodsScheduled": "True",
        "Progressing": "False",  # no rollout under way
    }
    # the operator's metrics follow the status it computed
    ns = c.namespace
    assert op_metric("rediscluster_phase", namespace=ns, name="basic", phase="Running") == 1
    assert op_metric("rediscluster_phase", namespace=ns, name="basic", phase="Degraded") == 0
    assert op_metric("rediscluster_ready_replicas", namespace=ns, name="basic") == 3
    assert op_metric("rediscluster_desired_replicas", namespace=ns, name="basic") == 3
    assert op_metric("rediscluster_master_epoch", namespace=ns, name="basic") == status["masterEpoch"]
    assert op_metric("rediscluster_failovers_total", namespace=ns, name="basic") is None


def op_metric(metric: str, **labels: str) -> float | None:
    """A sample of the in-process operator's metrics (None when the series does not exist)."""
    return registry.get_sample_value(metric, labels)


def masters_never_two(c: Cluster, violations: list[dict[str, str]]) -> Callable[[Pods], Awaitable[None]]:
    """A PodSampler fold: keeps every reading of the roles with more than one master."""

    async def fold(pods: Pods) -> None:
        roles = await c.roles(pods)
        if list(roles.values()).count("master") > 1:
            violations.append(roles)

    return fold


async def test_a_crashed_master_fails_over_without_losing_acknowledged_writes(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("crash")
    await c.create_ready(3, downAfterMilliseconds=2000)
    old_master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    acked: list[tuple[float, int, str]] = []
    stop = asyncio.Event()
    writer = asyncio.create_task(write_continuously(c, acked, stop))
    await eventually(lambda: true(len(acked) > 20), within=30, what="some acknowledged writes", interval=0.2)
    crashed_at = time.monotonic()
    victim = await c.redis(old_master)
    with contextlib.suppress(Exception):
        await victim.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
    await victim.aclose()

    def served_by_new_master() -> list[float]:
        return [t for t, _, m in acked if m != old_master and t > crashed_at]

    await eventually(
        lambda: true(bool(served_by_new_master())),
        within=60,
        what="writes acknowledged by a new master",
        interval=0.2,
    )
    took = served_by_new_master()[0] - crashed_at
    violations: list[dict[str, str]] = []
    async with PodSampler(c, masters_never_two(c, violations)):
        await eventually(
            lambda: c.ready(3),
            within=90,
            what="Running again with the old master back as a replica",
            interval=0.2,
        )
        n = len(acked)
        await eventually(
            lambda: true(len(acked) > n + 20), within=30, what="more writes on the new master", interval=0.2
        )
    stop.set()
    await writer
    new = c.status()["currentMaster"]
    assert new != old_master
    assert c.status()["masterEpoch"] == epoch + 1
    assert (await c.info(old_master))["role"] == "slave"
    assert (await c.info(old_master))["master_host"] == c.pod_ip(new)
    missing = await lost_writes(c, acked)
    assert missing == [], f"{len(missing)} of {len(acked)} acknowledged writes lost"
    assert violations == []
    failovers = [
        (e["message"], e.get("count"))
        for e in c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
        if e["reason"] == "FailoverCompleted"
    ]
    assert op_metric("rediscluster_failovers_total", namespace=c.namespace, name="crash") == 1, failovers
    phases = {
        phase: op_metric(
            "rediscluster_failover_phase_seconds_sum", namespace=c.namespace, name="crash", phase=phase
        )
        for phase in FAILOVER_PHASES
    }
    assert phases["promotion"] is not None, phases  # the reconcile that promoted timed its phases
    print(
        f"failover after crash: first write acknowledged by the new master {took:.2f}s after "
        "SHUTDOWN NOSAVE; phases: "
        + ", ".join(f"{phase} {seconds:.3f}s" for phase, seconds in phases.items() if seconds is not None)
    )


async def test_an_unrunnable_spec_change_is_reported_applies_nothing_and_failover_still_works(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("guarded")
    await c.create_ready(2, downAfterMilliseconds=2000)
    config_path = f"/api/v1/namespaces/{c.namespace}/configmaps/guarded-config"
    before = c.envtest.http.get(config_path)["data"]
    patch = {"spec": {"redisConfig": {"client-output-buffer-limit": "replica 0 0 0"}}}  # CEL admits it
    c.envtest.http.request("PATCH", f"{c.base}/{c.name}", patch, content_type="application/merge-patch+json")

    async def reported() -> str | None:
        ready = [x for x in c.status().get("conditions", []) if x["type"] == "Ready"]
        return ready[0]["message"] if ready and ready[0]["reason"] == "InvalidSpec" else None

    message = await eventually(reported, within=30, what="the InvalidSpec condition", interval=0.2)
    assert "spec.redisConfig key 'client-output-buffer-limit'" in message
    assert c.envtest.http.get(config_path)["data"] == before  # nothing of the bad spec applied
    old_master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    victim = await c.redis(old_master)
    with contextlib.suppress(Exception):
        await victim.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
    await victim.aclose()
    await eventually(
        lambda: true(c.status().get("masterEpoch", 0) > epoch and c.status()["currentMaster"] != old_master),
        within=60,
        what="a failover while the spec is invalid",
        interval=0.2,
    )
    fix = {"spec": {"redisConfig": None}}
    c.envtest.http.request("PATCH", f"{c.base}/{c.name}", fix, content_type="application/merge-patch+json")
    await eventually(lambda: c.ready(2), within=90, what="Running again once the spec is fixed", interval=0.2)
    reasons = {x["type"]: x["reason"] for x in c.status()["conditions"]}
    assert reasons == {
        "Ready": "AllReplicasReady",
        "Degraded": "AsExpected",
        "PodsScheduled": "AllPodsScheduled",
        "Progressing": "RolloutComplete",
    }


async def test_a_hung_master_fails_over_and_is_demoted_after_it_resumes(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("hung")
    await c.create_ready(3, downAfterMilliseconds=1500)
    old_master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    pid = int((await _server_info(c, old_master))["process_id"])
    os.kill(pid, signal.SIGSTOP)
    try:
        await eventually(
            lambda: true(c.status().get("masterEpoch", 0) > epoch),
            within=60,
            what="a new master",
            interval=0.2,
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    new = c.status()["currentMaster"]
    assert new != old_master

    async def demoted() -> bool:
        info = await c.info(old_master)
        return bool(info["role"] == "slave" and info["master_host"] == c.pod_ip(new))

    await eventually(demoted, within=60, what="the resumed old master to be demoted", interval=0.2)
    assert list((await c.roles()).values()).count("master") == 1


async def _server_info(c: Cluster, pod: str) -> dict[str, str]:
    client = await c.redis(pod)
    try:
        return dict(await client.info("server"))
    finally:
        await client.aclose()


def _scale(c: Cluster, replicas: int) -> None:
    c.envtest.http.request(
        "PATCH",
        f"{c.base}/{c.name}/scale",
        {"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
    )


async def test_scaling_through_the_scale_subresource_keeps_the_master_and_the_data(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("scale")
    await c.create_ready(3, downAfterMilliseconds=2000)
    master = c.status()["currentMaster"]
    client = await c.redis(master)
    await client.set("kept", "yes")
    await client.wait(2, 2000)
    await client.aclose()
    _scale(c, 5)
    await eventually(lambda: c.ready(5), within=90, what="Running with 5", interval=0.2)
    assert c.status()["currentMaster"] == master
    _scale(c, 2)
    await eventually(lambda: c.ready(2), within=90, what="Running with 2", interval=0.2)
    await eventually(
        lambda: true(sorted(c.pods()) == ["scale-0", "scale-1"]),
        within=60,
        what="the scaled-in pods gone",
        interval=0.2,
    )
    assert c.status()["currentMaster"] == master
    scale = c.envtest.http.get(f"{c.base}/{c.name}/scale")
    assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (2, 2)
    for pod in c.pods():
        reader = await c.redis(pod)
        assert await reader.get("kept") == "yes"
        await reader.aclose()


async def test_scale_in_hands_the_master_over_before_removing_its_pod(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("handover")
    await c.create_ready(3, downAfterMilliseconds=1500)
    first, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    client = await c.redis(first)
    await client.set("kept", "yes")
    await client.wait(2, 2000)
    with contextlib.suppress(Exception):
        await client.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
    await client.aclose()
    await eventually(
        lambda: true(c.status().get("masterEpoch", 0) > epoch), within=60, what="a failover", interval=0.2
    )
    await eventually(lambda: c.ready(3), within=90, what="Running again", interval=0.2)
    assert c.status()["currentMaster"] != "handover-0"  # the old master is never the candidate
    _scale(c, 1)
    await eventually(lambda: c.ready(1), within=120, what="Running with one pod", interval=0.2)
    await eventually(
        lambda: true(sorted(c.pods()) == ["handover-0"]), within=60, what="only pod 0 left", interval=0.2
    )
    assert c.status()["currentMaster"] == "handover-0"
    reader = await c.redis("handover-0")
    assert await reader.get("kept") == "yes"
    assert (await reader.info("replication"))["role"] == "master"
    await reader.aclose()


async def test_deleting_a_persistent_cluster_snapshots_then_garbage_collects_everything(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("gone")
    await c.create_ready(2, enablePersistence=True, storageSize="64Mi", downAfterMilliseconds=2000)
    assert c.get()["metadata"]["finalizers"] == ["redis.pyctrl.dev/finalizer"]
    client = await c.redis(c.status()["currentMaster"])
    await client.set("persisted", "1")
    await client.aclose()
    c.envtest.http.request("DELETE", f"{c.base}/{c.name}")

    async def gone() -> bool:
        try:
            c.get()
        except Exception as exc:
            return "404" in str(exc)
        return False

    await eventually(gone, within=90, what="the RedisCluster to be gone", interval=0.2)

    async def reasons() -> set[str]:
        events = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
        return {e["reason"] for e in events if e["involvedObject"].get("name") == c.name}

    # Events are written in the background (the recorder never blocks a reconcile), so the one
    # recorded just before the finalizer was removed may land after the object is gone.
    async def snapshot_reported() -> bool:
        return "SnapshotTaken" in await reasons()

    await eventually(snapshot_reported, within=30, what="the SnapshotTaken event", interval=0.2)
    assert "SnapshotSkipped" not in await reasons()
    # The series go when the operator has seen its finalizer patch answered, a moment after the
    # apiserver deleted the object (the test and the operator share one event loop).
    await eventually(
        lambda: true(op_metric("rediscluster_ready_replicas", namespace=c.namespace, name="gone") is None),
        within=30,
        what="the deleted cluster's metric series to be removed",
        interval=0.2,
    )
    ns = c.namespace

    async def children_gone() -> bool:
        sts = c.envtest.http.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets")["items"]
        cms = c.envtest.http.get(
            f"/api/v1/namespaces/{ns}/configmaps?labelSelector=app.kubernetes.io/instance%3Dgone"
        )
        return not sts and not cms["items"] and not c.pods()

    await eventually(children_gone, within=90, what="children garbage-collected", interval=0.2)


async def test_an_operator_restarted_mid_failover_converges_on_the_recorded_master(
    start_operator: OperatorFactory, cluster_factory: Callable[[str], Cluster]
) -> None:
    first = await start_operator()
    c = cluster_factory("resume")
    await c.create_ready(3, downAfterMilliseconds=2000)
    old, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    client = await c.redis(old)
    await client.set("survives", "yes")
    await client.wait(2, 2000)
    await client.aclose()
    await first.shutdown()
    # The state a crash right after RecordMaster leaves: the decision is in status, Redis unchanged.
    target = next(p for p in sorted(c.pods()) if p != old)
    c.envtest.http.request(
        "PATCH",
        f"{c.base}/{c.name}/status",
        {"status": {"currentMaster": target, "masterEpoch": epoch + 1, "phase": "Failover"}},
        content_type="application/merge-patch+json",
    )
    await start_operator()

    async def converged() -> bool:
        roles = await c.roles()
        return await c.ready(3) and roles[target] == "master" and list(roles.values()).count("master") == 1

    await eventually(converged, within=90, what="the recorded master to be the only master", interval=0.2)
    assert c.status()["masterEpoch"] == epoch + 1
    for pod in c.pods():
        reader = await c.redis(pod)
        assert await reader.get("survives") == "yes"
        await reader.aclose()


async def test_a_converged_cluster_reconciles_without_writing(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    from pyctrl import Request
    from pyctrl.testing import assert_idempotent

    c = cluster_factory("steady")
    await c.create_ready(3)
    mgr = operator.operator.manager
    rv = c.get()["metadata"]["resourceVersion"]

    async def cache_caught_up() -> bool:
        from examples.rediscluster.api import RedisCluster

        cached = await mgr.client.get(RedisCluster, c.name, namespace=c.namespace)
        return bool(cached.metadata.resource_version == rv)

    await eventually(cache_caught_up, within=30, what="the cache to hold the converged object", interval=0.2)
    await assert_idempotent(operator.operator.reconciler, Request(c.namespace, c.name), mgr.client, n=10)


async def test_the_password_comes_from_the_secret_is_only_data_and_appears_nowhere_else(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    """Issue 24, test 4: a password holding ``"``, ``\\``, a newline, ``enable-debug-command yes``,
    spaces, ``$``, non-ASCII text (512 bytes in all) is a password: clients and the replica
    authenticate with it, ``CONFIG GET enable-debug-command`` says no, and its marker is in no
    object, Event or argv."""
    import base64
    import json

    marker = "Zq9-marker"
    password = f'{marker}" \\ \nenable-debug-command yes\n$HOME `id` pässwörd '
    password += "x" * (512 - len(password.encode()))
    assert len(password.encode()) == 512
    c = cluster_factory("auth")
    c.envtest.http.request(
        "POST",
        f"/api/v1/namespaces/{c.namespace}/secrets",
        {
            "metadata": {"name": "redis-auth"},
            "data": {"password": base64.b64encode(password.encode()).decode()},
        },
    )
    await c.create_ready(2, auth={"passwordSecret": {"name": "redis-auth", "key": "password"}})
    master = c.status()["currentMaster"]
    anonymous = aioredis.Redis(host=c.pod_ip(master), port=6379, decode_responses=True)  # no password
    with pytest.raises(Exception, match=r"NOAUTH|authenticat"):
        await anonymous.get("x")
    await anonymous.aclose()
    for pod in c.pods():
        client = aioredis.Redis(host=c.pod_ip(pod), port=6379, password=password, decode_responses=True)
        try:
            assert await client.config_get("enable-debug-command") == {"enable-debug-command": "no"}
            role = (await client.info("replication"))["role"]
            if pod != master:  # the replica logged in to the master with the same bytes (masterauth)

                async def link_up(client: aioredis.Redis = client) -> bool:
                    return bool((await client.info("replication")).get("master_link_status") == "up")

                await eventually(link_up, within=60, what=f"{pod} in sync with the password", interval=0.2)
            assert role == ("master" if pod == master else "slave")
        finally:
            await client.aclose()
    ns = c.namespace
    visible = json.dumps(
        [
            c.get(),
            c.envtest.http.get(f"/api/v1/namespaces/{ns}/configmaps"),
            c.envtest.http.get(f"/api/v1/namespaces/{ns}/events"),
            c.envtest.http.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets"),
            c.pods(),
        ]
    )
    assert marker not in visible
    cmdlines = _redis_cmdlines()
    assert cmdlines, "no redis-server process found"
    assert not [c for c in cmdlines if marker.encode() in c]


def _redis_cmdlines() -> list[bytes]:
    """The argv of every redis-server process on the machine."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if b"redis-server" in cmdline:
                out.append(cmdline)
    return out
