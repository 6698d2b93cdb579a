"""The rollout's pure decisions (examples/rediscluster/replication/rollout.py ``decide``): one test per
guarantee."""

from __future__ import annotations

import dataclasses

from examples.rediscluster.replication.rollout import decide
from examples.rediscluster.replication.topology_types import (
    ClusterState,
    Plan,
    Policy,
    RecordMaster,
    Switchover,
)
from examples.rediscluster.shared.rollout import MAX_LAG_BYTES, Restart
from tests.rediscluster._builders import gone, healthy, master, pod, replica

OLD, NEW = "rev-old", "rev-new"
POLICY = Policy(down_after=2.0)


def revisions(updated: set[int], n: int = 3) -> dict[str, str | None]:
    return {pod(i): NEW if i in updated else OLD for i in range(n)}


def test_replicas_are_restarted_first_highest_ordinal_first_whatever_the_master_ordinal() -> None:
    for master_at, first in ((0, 2), (1, 2), (2, 1)):
        d = decide(
            healthy(3, master_at), revisions(set()), NEW, ClusterState(pod(master_at), 4), POLICY, replicas=3
        )
        assert d.step == Restart(pod(first)), master_at
        assert d.current_revision == OLD
        assert d.update_revision == NEW


def test_the_master_is_handed_over_once_to_an_updated_replica_when_only_it_is_outdated() -> None:
    d = decide(healthy(3, 2), revisions({0, 1}), NEW, ClusterState(pod(2), 4), POLICY, replicas=3)
    assert isinstance(d.step, Plan)
    assert d.step.actions[0] == RecordMaster(pod(0), 5)  # best updated replica: lowest run id on a tie
    assert sum(isinstance(a, Switchover) for a in d.step.actions) == 1
    assert Switchover(pod(2), pod(0)) in d.step.actions


def test_the_old_master_is_restarted_once_it_is_a_replica_and_then_the_rollout_is_complete() -> None:
    d = decide(healthy(3, 0), revisions({0, 1}), NEW, ClusterState(pod(0), 5), POLICY, replicas=3)
    assert d.step == Restart(pod(2))
    done = decide(healthy(3, 0), revisions({0, 1, 2}), NEW, ClusterState(pod(0), 5), POLICY, replicas=3)
    assert done.step is None
    assert not done.outdated
    assert done.current_revision == NEW


def test_a_crashed_outdated_replica_pauses_the_rollout_and_names_the_pod() -> None:
    nodes = [master(0, online=(2,)), replica(1, 0), gone(2)]
    nodes[1] = dataclasses.replace(nodes[1], pod_ready=True)
    d = decide(nodes, revisions({1}), NEW, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.step is None
    assert d.paused is not None
    assert f"{pod(2)}: not answering" in d.paused
    # back: the rollout resumes with it
    resumed = decide(healthy(3, 0), revisions({1}), NEW, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert resumed.step == Restart(pod(2))


def test_an_updated_replica_still_syncing_is_waited_for_not_a_pause() -> None:
    nodes = [master(0, online=(1,)), replica(1, 0), replica(2, 0, link_up=False)]
    d = decide(nodes, revisions({2}), NEW, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.step is None
    assert d.paused is None
    assert d.waiting is not None
    assert pod(2) in d.waiting


def test_a_replica_too_far_behind_or_not_listed_online_is_not_in_sync() -> None:
    lagging = [
        master(0, online=(1, 2), offset=10 + MAX_LAG_BYTES + 1),
        replica(1, 0, offset=10),
        replica(2, 0),
    ]
    lagging[2] = replica(2, 0, offset=10 + MAX_LAG_BYTES + 1)
    d = decide(lagging, revisions(set()), NEW, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.step is None
    assert d.paused is not None
    assert "bytes behind" in d.paused
    unlisted = [master(0, online=(1,)), replica(1, 0), replica(2, 0)]
    d = decide(unlisted, revisions(set()), NEW, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.step is None
    assert d.paused is not None
    assert "not listed online" in d.paused


def test_a_missing_pod_or_master_that_does_not_serve_pauses() -> None:
    d = decide(healthy(3, 0)[:2], revisions(set(), 2), NEW, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.step is None
    assert d.paused is not None
    assert "2/3 pods exist" in d.paused
    nodes = [gone(0, label="master"), replica(1, 0), replica(2, 0)]
    d = decide(nodes, revisions(set()), NEW, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.step is None
    assert d.paused is not None
    assert "does not serve" in d.paused


def test_no_update_revision_yet_or_nothing_outdated_takes_no_step() -> None:
    d = decide(healthy(3), revisions(set()), None, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.step is None
    assert not d.outdated
    d = decide(healthy(3), revisions(set()), OLD, ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.step is None
    assert not d.outdated
    assert d.current_revision == OLD


def test_current_revision_keeps_the_previous_one_while_pods_still_run_it() -> None:
    revs = {pod(0): "a", pod(1): "b", pod(2): "b"}
    d = decide(healthy(3), revs, "c", ClusterState(pod(0), 1), POLICY, replicas=3, previous_current="a")
    assert d.current_revision == "a"
    d = decide(healthy(3), revs, "c", ClusterState(pod(0), 1), POLICY, replicas=3)
    assert d.current_revision == "b"  # the revision most outdated pods run


def test_a_one_pod_cluster_restarts_its_master_only_when_its_data_persists() -> None:
    nodes = [master(0, replicas=0)]
    d = decide(nodes, {pod(0): OLD}, NEW, ClusterState(pod(0), 1), POLICY, replicas=1, persistent=True)
    assert d.step == Restart(pod(0))
    d = decide(nodes, {pod(0): OLD}, NEW, ClusterState(pod(0), 1), POLICY, replicas=1)
    assert d.step is None
    assert d.paused is not None
    assert f"delete {pod(0)}" in d.paused
