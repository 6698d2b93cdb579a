"""The RedisCluster operator on three nodes: spread, a lost node, drains, an unschedulable pod.

On the session's three-node control plane (``envtest_nodes``: kube-scheduler places the pods,
nodes in zones zone-a/b/c); the operator runs as the user holding only the generated ClusterRole,
as in the other operator e2e tests. A test that stops or drains a node starts or uncordons it
again before it ends.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest import Environment
from pyctrl.testing import eventually
from tests.operator.conftest import (
    Acked,
    Cluster,
    OperatorFactory,
    Pods,
    PodSampler,
    grant_operator_role,
    lost_writes,
    true,
    write_continuously,
)

pytestmark = pytest.mark.controlplane

#: kubectl drain's flags; the tests add --pod-selector so that other tests' pods on the shared
#: nodes (a namespace still being deleted, where evictions are refused) are left alone
DRAIN_FLAGS = ("--ignore-daemonsets", "--delete-emptydir-data", "--timeout=240s")
INSTANCE = "app.kubernetes.io/instance"


@pytest.fixture(scope="module")
def envtest(envtest_nodes: Environment) -> Environment:
    """The session's three-node control plane, for this module's namespaces and operators."""
    return envtest_nodes


@pytest.fixture(scope="module")
def operator_kubeconfig(envtest: Environment) -> Path:
    return grant_operator_role(envtest)


def nodes_of(c: Cluster) -> dict[str, str]:
    """pod -> the node it is bound to."""
    return {name: p["spec"].get("nodeName", "") for name, p in c.pods().items()}


def pods_down(pods: Pods, replicas: int) -> int:
    """Pods missing, terminating or not Ready (what a PodDisruptionBudget counts as disrupted)."""
    up = 0
    for p in pods.values():
        ready = any(
            x["type"] == "Ready" and x["status"] == "True" for x in p.get("status", {}).get("conditions", [])
        )
        up += ready and not p["metadata"].get("deletionTimestamp")
    return replicas - up


async def kubectl(env: Environment, *args: str) -> str:
    """kubectl in a thread: the operator under test runs on this event loop and must go on."""
    assert env.bin_dir is not None
    argv = [str(env.bin_dir / "kubectl"), f"--kubeconfig={env.kubeconfig_path}", *args]
    out = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
    return out.stdout


def events(c: Cluster, reason: str) -> list[dict[str, Any]]:
    items = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
    return [e for e in items if e["involvedObject"].get("name") == c.name and e["reason"] == reason]


def longest_pause(acked: Acked) -> float:
    times = [t for t, _, _ in acked]
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


class Writes:
    """Continuous WAIT-1-acknowledged writes for the length of a ``with`` block."""

    def __init__(self, c: Cluster) -> None:
        self.c, self.acked, self.stop = c, Acked(), asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Writes:
        self.task = asyncio.create_task(write_continuously(self.c, self.acked, self.stop))
        await self.more(20)
        return self

    async def more(self, n: int) -> None:
        want = len(self.acked) + n
        await eventually(lambda: true(len(self.acked) >= want), within=60, what=f"{n} acknowledged writes")

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await self.task


async def test_a_lost_node_fails_the_master_over_and_its_pod_returns_or_is_recreated_as_a_replica(
    start_operator: OperatorFactory, cluster_factory: Callable[[str], Cluster], envtest: Environment
) -> None:
    await start_operator()
    c = cluster_factory("lost")
    await c.create_ready(3, downAfterMilliseconds=2000)
    placement = nodes_of(c)
    assert sorted(placement.values()) == sorted(envtest.node_names)  # the default spread: one per node

    # 1. without force-delete: the lost master fails over; the returning node's pod is a replica
    first, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    async with Writes(c) as writes:
        await asyncio.to_thread(envtest.stop_node, placement[first])
        try:
            await eventually(
                lambda: true(c.status()["masterEpoch"] > epoch and c.status()["currentMaster"] != first),
                within=60,
                what="a failover off the lost node",
                interval=0.2,
            )
            await writes.more(20)  # acknowledged by the new master while the node is down
        finally:
            await asyncio.to_thread(envtest.start_node, placement[first])
        await eventually(
            lambda: c.ready(3), within=120, what="the old master back as a replica", interval=0.2
        )
    second = c.status()["currentMaster"]
    assert (await c.info(first))["role"] == "slave"
    assert (await c.info(first))["master_host"] == c.pod_ip(second)
    assert nodes_of(c)[first] == placement[first]  # the same pod, run again by the rebooted node
    assert await lost_writes(c, writes.acked) == []

    # 2. with force-delete: the lost pod is recreated on a live node and rejoins as a replica
    patch = {"spec": {"nodeLoss": {"forceDeletePods": True, "afterSeconds": 1}}}
    c.envtest.http.request("PATCH", f"{c.base}/{c.name}", patch, content_type="application/merge-patch+json")
    lost_node, uid = nodes_of(c)[second], c.pods()[second]["metadata"]["uid"]
    async with Writes(c) as writes:
        await asyncio.to_thread(envtest.stop_node, lost_node)
        try:

            async def recreated_elsewhere() -> bool:
                pod = c.pods().get(second)
                return bool(
                    pod and pod["metadata"]["uid"] != uid and pod["spec"].get("nodeName") != lost_node
                )

            await eventually(recreated_elsewhere, within=120, what=f"{second} recreated on a live node")
            await eventually(lambda: c.ready(3), within=120, what=f"{second} to rejoin as a replica")
            await writes.more(20)
        finally:
            await asyncio.to_thread(envtest.start_node, lost_node)
    assert c.status()["currentMaster"] != second
    assert (await c.info(second))["role"] == "slave"
    assert await lost_writes(c, writes.acked) == []
    # One Event per force-delete (the message carries the seconds, so they do not aggregate). The
    # recreated pod can be bound to the lost node again when the scheduler places it before the
    # node lifecycle controller's NoSchedule taint lands; the operator force-deletes it too. Every
    # one is of this pod on this node.
    deleted = events(c, "PodForceDeleted")
    assert deleted, "no PodForceDeleted Event"
    prefix = f"force-deleted pod {second}: node {lost_node} unreachable for "
    assert all(e["message"].startswith(prefix) for e in deleted), [e["message"] for e in deleted]


async def test_draining_every_node_in_turn_hands_the_master_over_once_per_drain_of_its_node(
    start_operator: OperatorFactory, cluster_factory: Callable[[str], Cluster], envtest: Environment
) -> None:
    await start_operator()
    c = cluster_factory("drained")
    # a long down-after: a crash failover instead of a switchover would pause writes 10 s
    await c.create_ready(3, downAfterMilliseconds=10000)
    worst = 0

    def sample(pods: Pods) -> None:
        nonlocal worst
        worst = max(worst, pods_down(pods, 3))

    master_drains = 0
    async with PodSampler(c, sample), Writes(c) as writes:
        for node in envtest.node_names:
            master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
            placement = nodes_of(c)
            held_master = placement[master] == node
            try:
                await kubectl(envtest, "drain", node, *DRAIN_FLAGS, f"--pod-selector={INSTANCE}=drained")
                await eventually(lambda: c.ready(3), within=120, what=f"Running after draining {node}")
            finally:
                await kubectl(envtest, "uncordon", node)
            handovers = [e["message"] for e in events(c, "SwitchoverStarted")]
            assert c.status()["masterEpoch"] == epoch + held_master, (
                f"drain of {node}: master {master}, pods on nodes {placement}, {handovers}"
            )
            master_drains += held_master
            await writes.more(20)
    assert master_drains >= 1
    assert len(events(c, "SwitchoverStarted")) == master_drains
    assert events(c, "FailoverCompleted") == []
    assert worst <= 1, f"{worst} pods down at once"
    assert await lost_writes(c, writes.acked) == []
    print(
        f"drain of every node: {master_drains} switchover(s), {len(writes.acked)} acknowledged writes, "
        f"longest pause between acknowledged writes {longest_pause(writes.acked):.3f}s"
    )


async def test_a_drained_master_is_handed_to_a_replica_on_another_node_not_to_its_neighbour(
    start_operator: OperatorFactory, cluster_factory: Callable[[str], Cluster], envtest: Environment
) -> None:
    """A drain evicts every pod of the node: a master handed to a replica beside it would be
    handed over again a moment later (two switchovers for one drain)."""
    await start_operator()
    c = cluster_factory("neighbours")
    await c.create_ready(3, downAfterMilliseconds=10000)
    master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    node = nodes_of(c)[master]
    neighbour, other = sorted(p for p in c.pods() if p != master)
    # put the replica `neighbour` beside the master: every other node cordoned while it is recreated
    elsewhere = [n for n in envtest.node_names if n != node]
    uid = c.pods()[neighbour]["metadata"]["uid"]
    try:
        for n in elsewhere:
            await kubectl(envtest, "cordon", n)
        c.envtest.http.request("DELETE", f"/api/v1/namespaces/{c.namespace}/pods/{neighbour}")

        async def beside_the_master() -> bool:
            pod = c.pods().get(neighbour)
            return bool(pod and pod["metadata"]["uid"] != uid and pod["spec"].get("nodeName") == node)

        await eventually(beside_the_master, within=60, what=f"{neighbour} recreated on {node}")
    finally:
        for n in elsewhere:
            await kubectl(envtest, "uncordon", n)
    await eventually(lambda: c.ready(3), within=120, what=f"{neighbour} back as a replica", interval=0.2)
    async with await c.redis(neighbour) as r:
        await r.config_set("replica-priority", 1)  # the neighbour now ranks first among the replicas

    # the master's eviction, as `kubectl drain` does it once the node is cordoned
    async with Writes(c) as writes:
        await kubectl(envtest, "cordon", node)
        try:
            eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": master}}
            c.envtest.http.request(
                "POST", f"/api/v1/namespaces/{c.namespace}/pods/{master}/eviction", eviction
            )
            await eventually(
                lambda: true(c.status()["masterEpoch"] > epoch), within=60, what="a switchover", interval=0.2
            )
            await writes.more(20)
        finally:
            await kubectl(envtest, "uncordon", node)
    assert c.status()["currentMaster"] == other, f"handed over to {c.status()['currentMaster']}"
    assert nodes_of(c)[other] != node
    assert c.status()["masterEpoch"] == epoch + 1
    assert await lost_writes(c, writes.acked) == []


async def test_pods_that_cannot_be_placed_are_reported_with_the_schedulers_reason(
    start_operator: OperatorFactory, cluster_factory: Callable[[str], Cluster]
) -> None:
    await start_operator()
    c = cluster_factory("crowded")
    selector = {"matchLabels": {"app.kubernetes.io/instance": "crowded"}}
    required = [{"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]
    c.create(
        replicas=4,
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
    )

    async def unschedulable() -> dict[str, Any] | None:
        found = [x for x in c.status().get("conditions", []) if x["type"] == "PodsScheduled"]
        return found[0] if found and found[0]["status"] == "False" else None

    condition = await eventually(unschedulable, within=60, what="PodsScheduled=False", interval=0.2)
    assert condition["reason"] == "Unschedulable"
    assert condition["message"].startswith("1 pod(s) Pending, not schedulable: crowded-")
    assert "didn't match pod anti-affinity rules" in condition["message"]
    assert c.status()["phase"] != "Running"
