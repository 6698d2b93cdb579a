"""The cluster-mode rollout's pure decisions (examples/rediscluster/cluster/rollout.py ``decide``)."""

from __future__ import annotations

import dataclasses

from examples.rediscluster.cluster.nodes import PeerView
from examples.rediscluster.cluster.plan_types import Member
from examples.rediscluster.cluster.rollout import ShardFailover, decide
from examples.rediscluster.shared.rollout import MAX_LAG_BYTES, Restart
from tests.rediscluster.test_cluster_plan import World

OLD, NEW = "rev-old", "rev-new"


def linked(members: list[Member]) -> list[Member]:
    """The members with every replica's ``master_link_status:up``."""
    return [
        dataclasses.replace(m, facts=dataclasses.replace(m.facts, master_link_up=m.facts.me.is_replica))
        if m.facts is not None
        else m
        for m in members
    ]


def revisions(updated: set[int], n: int = 6) -> dict[str, str | None]:
    return {f"c-{o}": NEW if o in updated else OLD for o in range(n)}


def swapped(w: World, master: int, replica: int) -> World:
    """A planned failover done: ``replica`` serves the slots of ``master``, which follows it."""
    w.slots[replica], w.slots[master] = w.slots[master], set()
    w.master_of[replica], w.master_of[master] = None, w.ids[replica]
    return w


def test_the_first_shard_is_rolled_first_its_replica_then_a_planned_failover_then_its_old_master() -> None:
    w = World(6).formed(3)
    d = decide(linked(w.members()), revisions(set()), NEW, shards=3, replicas_per_shard=1)
    assert d.step == Restart("c-1")
    assert d.current_revision == OLD
    assert d.outdated == ("c-5", "c-4", "c-3", "c-2", "c-1", "c-0")
    d = decide(linked(w.members()), revisions({1}), NEW, shards=3, replicas_per_shard=1)
    assert d.step == ShardFailover("c-1", 0, "c-0")
    swapped(w, 0, 1)
    d = decide(linked(w.members()), revisions({1}), NEW, shards=3, replicas_per_shard=1)
    assert d.step == Restart("c-0")
    # then the next shard, its replica first
    d = decide(linked(w.members()), revisions({0, 1}), NEW, shards=3, replicas_per_shard=1)
    assert d.step == Restart("c-3")


def test_the_rollout_is_complete_when_every_pod_runs_the_update_revision() -> None:
    w = World(6).formed(3)
    d = decide(linked(w.members()), revisions(set(range(6))), NEW, shards=3, replicas_per_shard=1)
    assert d.step is None
    assert not d.in_progress
    assert d.current_revision == NEW


def test_the_failover_goes_to_the_updated_replica_furthest_along() -> None:
    w = World(6).formed(2, replicas_per_shard=2)
    members = linked(w.members())
    behind = members[1]
    assert behind.facts is not None
    members[1] = dataclasses.replace(behind, facts=dataclasses.replace(behind.facts, repl_offset=-10))
    d = decide(members, revisions({1, 2}), NEW, shards=2, replicas_per_shard=2)
    assert d.step == ShardFailover("c-2", 0, "c-0")


def test_a_pod_not_back_in_sync_pauses_the_rollout_and_names_it() -> None:
    w = World(6).formed(3)
    w.down = {4}
    d = decide(linked(w.members()), revisions({1}), NEW, shards=3, replicas_per_shard=1)
    assert d.step is None
    assert d.paused is not None
    assert "c-4: not answering" in d.paused
    lagging = linked(World(6).formed(3).members())
    m = lagging[3]
    assert m.facts is not None
    lagging[3] = dataclasses.replace(m, facts=dataclasses.replace(m.facts, repl_offset=-MAX_LAG_BYTES - 1))
    d = decide(lagging, revisions(set()), NEW, shards=3, replicas_per_shard=1)
    assert d.paused is not None
    assert f"c-3: more than {MAX_LAG_BYTES} bytes behind c-2" in d.paused


def test_an_updated_replica_whose_link_is_not_up_yet_is_waited_for_not_a_pause() -> None:
    w = World(6).formed(3)
    members = linked(w.members())
    m = members[1]
    assert m.facts is not None
    members[1] = dataclasses.replace(m, facts=dataclasses.replace(m.facts, master_link_up=False))
    d = decide(members, revisions({1}), NEW, shards=3, replicas_per_shard=1)
    assert d.step is None
    assert d.paused is None
    assert d.waiting is not None
    assert "c-1: replication link to c-0 down" in d.waiting


def test_moving_slots_or_a_failing_node_or_cluster_state_fail_pause_it() -> None:
    w = World(6).formed(3)
    w.migrating = {0: {5: "x"}}
    d = decide(linked(w.members()), revisions(set()), NEW, shards=3, replicas_per_shard=1)
    assert d.paused is not None
    assert "c-0: slots are moving" in d.paused
    members = linked(World(6).formed(3).members())
    m = members[2]
    assert m.facts is not None
    members[2] = dataclasses.replace(m, facts=dataclasses.replace(m.facts, cluster_state="fail"))
    d = decide(members, revisions(set()), NEW, shards=3, replicas_per_shard=1)
    assert d.paused is not None
    assert "c-2: cluster_state fail" in d.paused


def test_a_shard_without_replicas_restarts_its_master_only_with_persistence() -> None:
    w = World(3).formed(3, replicas_per_shard=0)
    members = linked(w.members())
    d = decide(members, revisions(set(), 3), NEW, shards=3, replicas_per_shard=0)
    assert d.step is None
    assert d.paused is not None
    assert "shard 0 has no replica and no persistence: delete c-0" in d.paused
    d = decide(members, revisions(set(), 3), NEW, shards=3, replicas_per_shard=0, persistent=True)
    assert d.step == Restart("c-0")


def test_no_update_revision_yet_reports_the_previous_one() -> None:
    w = World(6).formed(3)
    d = decide(
        linked(w.members()), revisions(set()), None, shards=3, replicas_per_shard=1, previous_current=OLD
    )
    assert (d.current_revision, d.update_revision, d.step) == (OLD, None, None)


def test_a_restarted_pod_missing_or_its_old_node_not_forgotten_yet_is_waited_for() -> None:
    w = World(6).formed(3)
    w.extra = {"dead": PeerView("dead" * 10, "127.0.9.9", 6379, frozenset({"slave", "fail"}), None, 0, False)}
    members = [m for m in linked(w.members()) if m.pod != "c-1"]
    pods = {k: v for k, v in revisions({1}).items() if k != "c-1"}
    d = decide(members, pods, NEW, shards=3, replicas_per_shard=1)
    assert d.paused is None
    assert d.waiting is not None
    assert "c-1: missing" in d.waiting
    assert "node deaddead: failing, not forgotten yet" in d.waiting
    d = decide(linked(w.members()), revisions({1}), NEW, shards=3, replicas_per_shard=1)
    assert d.paused is None  # the departed node alone: still the rollout's own doing
    assert d.step is None
    # an outdated pod that crashed: a pause
    crashed = World(6).formed(3)
    crashed.down = {3}
    d = decide(linked(crashed.members()), revisions({1}), NEW, shards=3, replicas_per_shard=1)
    assert d.paused is not None
    assert "c-3: not answering" in d.paused
