"""Cluster-mode rollouts end to end: real control plane, local node, real redis-server pods.

A pod template change (the image) of a ``mode: cluster`` RedisCluster is rolled by the operator
one shard at a time: the shard's replica, a planned ``CLUSTER FAILOVER``, then its old master —
under writes acknowledged by ``WAIT 1`` through redis-py's cluster-aware client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pyctrl.testing import eventually
from tests.operator.conftest import Cluster, Pods, PodSampler, RunningOperator
from tests.operator.test_cluster_mode import (
    Readiness,
    Writer,
    assert_check_clean,
    cluster_check,
    cluster_ready,
)
from tests.operator.test_nodes import events

pytestmark = pytest.mark.controlplane

REVISION = "controller-revision-hash"
IMAGE = "redis:7.2.4"


def _shard_of(pod: str) -> int:
    return int(pod.rsplit("-", 1)[1]) // 2  # replicasPerShard 1: two pods a shard


def _serving(p: dict[str, Any]) -> bool:
    ready = any(
        c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions", [])
    )
    return ready and not p["metadata"].get("deletionTimestamp")


class Watch:
    """A PodSampler fold: the most shards with a pod down at once, and the order pods got the new image."""

    def __init__(self, c: Cluster, pods: int) -> None:
        self.names = [f"{c.name}-{i}" for i in range(pods)]
        self.most_shards_down = 0
        self.down_at_once: set[int] = set()
        self.order: list[str] = []

    def __call__(self, pods: Pods) -> None:
        down = {_shard_of(n) for n in self.names if n not in pods or not _serving(pods[n])}
        if len(down) > self.most_shards_down:
            self.most_shards_down, self.down_at_once = len(down), down
        for n, p in sorted(pods.items()):
            if p["spec"]["containers"][0]["image"] == IMAGE and n not in self.order:
                self.order.append(n)


async def _rolled(c: Cluster, old_revision: str) -> bool | Readiness:
    s = c.status()
    progressing: dict[str, Any] = next((x for x in s.get("conditions", []) if x["type"] == "Progressing"), {})
    return (
        s.get("updateRevision") not in (None, old_revision)
        and s.get("currentRevision") == s.get("updateRevision")
        and progressing.get("reason") == "RolloutComplete"
        and await cluster_ready(c, 3)
    )


async def test_an_image_change_is_rolled_one_shard_at_a_time_with_one_planned_failover_per_shard(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("croll")
    c.create(mode="cluster", shards=3, replicasPerShard=1, downAfterMilliseconds=2000)
    await eventually(lambda: cluster_ready(c, 3), within=120, what="3 shards Running", interval=0.3)
    status = c.status()
    old_revision = status["updateRevision"]
    assert status["currentRevision"] == old_revision
    masters = {s["index"]: s["master"] for s in status["shards"]}
    uids = {name: p["metadata"]["uid"] for name, p in c.pods().items()}
    writer = Writer(c.pod_ip("croll-0"), password=c.password()).start()
    watch = Watch(c, 6)
    try:
        async with PodSampler(c, watch):
            await writer.more(30)
            c.envtest.http.request(
                "PATCH",
                f"{c.base}/{c.name}",
                {"spec": {"image": IMAGE}},
                content_type="application/merge-patch+json",
            )
            await eventually(lambda: _rolled(c, old_revision), within=240, what="the rollout to complete")
            await writer.more(30)
    finally:
        await writer.finish()
    story = "\n".join(
        f"{e['reason']}: {e['message']}"
        for e in c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
    )
    pods = c.pods()
    assert all(pods[p]["metadata"]["uid"] != uids[p] for p in uids), "every pod was restarted"
    assert {p["spec"]["containers"][0]["image"] for p in pods.values()} == {IMAGE}
    assert watch.most_shards_down == 1, f"shards {watch.down_at_once} down at once\n{story}"
    # shard 0 first, then 1, then 2; in each, the replica first, the old master last
    replicas = {i: next(p for p in uids if _shard_of(p) == i and p != masters[i]) for i in masters}
    assert watch.order == [p for i in sorted(masters) for p in (replicas[i], masters[i])], story
    final = {s["index"]: s["master"] for s in c.status()["shards"]}
    assert final == replicas, "each shard's master went to its (updated) replica"
    for i in masters:
        handed = [e for e in events(c, "FailoverCompleted") if e["message"].startswith(f"shard {i}:")]
        assert len(handed) == 1, story
    assert len(events(c, "RolloutSwitchover")) == 3, story
    assert len(events(c, "RolloutRestartingPod")) == 6, story
    assert events(c, "ShardTakeover") == [], story
    writer.ip = c.pod_ip(final[0])
    assert await writer.missing() == []
    assert_check_clean(await cluster_check(writer.ip, password=c.password()), masters=3)
    print(
        f"cluster rollout of 6 pods: {len(writer.acked)} acknowledged writes, {writer.errors} client errors"
    )
