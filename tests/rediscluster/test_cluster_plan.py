"""The pure cluster-mode decisions: slot arithmetic, CLUSTER NODES parsing and one test per plan rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.rediscluster.cluster.nodes import NodeFacts, PeerView, parse_cluster_nodes
from examples.rediscluster.cluster.plan import plan
from examples.rediscluster.cluster.plan_types import (
    AddSlots,
    Forget,
    Meet,
    Member,
    MoveSlots,
    Replicate,
    Reset,
    SetLabels,
    Takeover,
    Wait,
)
from examples.rediscluster.cluster.slots import SLOTS, even_counts, even_layout, format_ranges, rebalance


@given(st.integers(min_value=1, max_value=200))
def test_even_counts_cover_every_slot_and_differ_by_at_most_one(n: int) -> None:
    counts = even_counts(n)
    assert sum(counts) == SLOTS
    assert max(counts) - min(counts) <= 1
    assert [len(r) for r in even_layout(n)] == counts


@settings(deadline=None, max_examples=40)
@given(st.integers(min_value=3, max_value=12), st.integers(min_value=3, max_value=12))
def test_rebalance_reaches_an_even_layout_moving_each_slot_once_from_a_donor(before: int, after: int) -> None:
    owned = {i: set(r) for i, r in enumerate(even_layout(before))}
    moves = rebalance(owned, after)
    assert len({m.slot for m in moves}) == len(moves)
    for m in moves:
        assert m.slot in owned[m.source]
        owned[m.source].discard(m.slot)
        owned.setdefault(m.target, set()).add(m.slot)
    counts = [len(owned.get(i, ())) for i in range(after)]
    assert sum(counts) == SLOTS
    assert max(counts) - min(counts) <= 1
    assert all(not owned[i] for i in owned if i >= after)
    assert rebalance(owned, after) == []


def test_three_to_four_shards_moves_a_quarter_of_the_slots() -> None:
    moves = rebalance({i: r for i, r in enumerate(even_layout(3))}, 4)
    assert len(moves) == SLOTS // 4
    assert {m.target for m in moves} == {3}


def test_format_ranges() -> None:
    assert format_ranges([5, 1, 2, 3, 9]) == ["1-3", "5", "9"]


def test_parse_cluster_nodes_reads_slots_flags_and_open_slots() -> None:
    text = (
        "aaa 127.0.1.1:6379@16379 myself,master - 0 0 1 connected 0-2 5 [3->-bbb] [4-<-ccc]\n"
        "bbb 127.0.1.2:6379@16379,host master,fail? - 0 0 2 connected 6-8\n"
        "ccc :0@0 slave,noaddr aaa 0 0 1 disconnected\n"
    )
    me, peers, migrating, importing = parse_cluster_nodes(text)
    assert me == "aaa"
    assert peers["aaa"].slots == frozenset({0, 1, 2, 5})
    assert (migrating, importing) == ({3: "bbb"}, {4: "ccc"})
    assert peers["bbb"].failing
    assert (peers["bbb"].ip, peers["bbb"].port) == ("127.0.1.2", 6379)
    assert peers["ccc"].master_id == "aaa"
    assert peers["ccc"].failing
    assert not peers["ccc"].connected


T = TypeVar("T")

# -- a small world of nodes -------------------------------------------------------------------


def ip(ordinal: int) -> str:
    return f"127.0.1.{ordinal + 1}"


def node_id(ordinal: int, generation: int = 0) -> str:
    return f"{generation}{ordinal:039d}"


class World:
    """Pods ``c-0..`` each with a node; ``views`` say who knows whom (default: everyone)."""

    def __init__(self, pods: int) -> None:
        self.ids = {o: node_id(o) for o in range(pods)}
        self.slots: dict[int, set[int]] = {o: set() for o in range(pods)}
        self.master_of: dict[int, str | None] = dict.fromkeys(range(pods))
        self.known: dict[int, set[int]] = {o: set(range(pods)) for o in range(pods)}
        self.down: set[int] = set()
        self.extra: dict[str, PeerView] = {}
        self.migrating: dict[int, dict[int, str]] = {}
        self.importing: dict[int, dict[int, str]] = {}

    def view(self, o: int) -> PeerView:
        master = self.master_of[o]
        flags = {"slave"} if master else {"master"}
        return PeerView(self.ids[o], ip(o), 6379, frozenset(flags), master, 0, True, frozenset(self.slots[o]))

    def members(self, labels: bool = True) -> list[Member]:
        out = []
        for o in self.ids:
            facts = None
            if o not in self.down:
                peers = {self.ids[k]: self.view(k) for k in self.known[o]}
                peers.update(self.extra)
                me = self.view(o)
                peers[me.node_id] = PeerView(
                    me.node_id, me.ip, me.port, me.flags | {"myself"}, me.master_id, 0, True, me.slots
                )
                facts = NodeFacts(
                    me.node_id,
                    peers,
                    self.migrating.get(o, {}),
                    self.importing.get(o, {}),
                    "ok",
                )
            role = "replica" if self.master_of[o] else "master"
            out.append(
                Member(
                    f"c-{o}",
                    o,
                    ip(o),
                    6379,
                    True,
                    role if labels else None,
                    str(o // 2) if labels else None,
                    facts,
                )
            )
        return out

    def formed(self, shards: int, replicas_per_shard: int = 1) -> World:
        for shard, layout in enumerate(even_layout(shards)):
            first = shard * (1 + replicas_per_shard)
            self.slots[first] = set(layout)
            for r in range(1, replicas_per_shard + 1):
                self.master_of[first + r] = self.ids[first]
        return self


def of(actions: Iterable[object], kind: type[T]) -> list[T]:
    return [a for a in actions if isinstance(a, kind)]


def test_rule_meet_the_seed_meets_every_pod_it_does_not_know_at_its_current_ip() -> None:
    w = World(6)
    w.known = {o: {o} for o in range(6)}
    p = plan(w.members(), 3, 1)
    assert of(p.actions, Meet) == [Meet("c-0", ip(o), 6379) for o in range(1, 6)]
    assert p.statefulset_replicas == 6


def test_rule_meet_a_known_node_at_a_stale_address_is_met_again() -> None:
    w = World(6).formed(3)
    members = w.members()
    moved = members[3]
    members[3] = Member(
        moved.pod, 3, "127.0.9.9", 6379, True, moved.role_label, moved.shard_label, moved.facts
    )
    assert of(plan(members, 3, 1).actions, Meet) == [Meet("c-0", "127.0.9.9", 6379)]


def test_rule_assign_a_fresh_cluster_gets_an_even_split_on_each_shards_first_pod() -> None:
    p = plan(World(6).members(), 3, 1)
    adds = of(p.actions, AddSlots)
    assert [(a.pod, len(a.slots)) for a in adds] == [("c-0", 5462), ("c-2", 5461), ("c-4", 5461)]


def test_rule_assign_waits_while_a_pod_does_not_answer() -> None:
    w = World(6)
    w.down = {5}
    p = plan(w.members(), 3, 1)
    assert not of(p.actions, AddSlots)
    assert of(p.actions, Wait)


def test_rule_replicate_each_shards_other_pods_follow_the_pod_serving_its_slots() -> None:
    w = World(6)
    for shard, layout in enumerate(even_layout(3)):
        w.slots[2 * shard] = set(layout)
    p = plan(w.members(), 3, 1)
    assert of(p.actions, Replicate) == [Replicate(f"c-{2 * s + 1}", w.ids[2 * s]) for s in range(3)]


def test_a_formed_balanced_cluster_gives_an_empty_plan() -> None:
    p = plan(World(6).formed(3).members(), 3, 1)
    assert p.converged
    assert p.statefulset_replicas == 6


def test_labels_follow_the_roles_redis_reports() -> None:
    w = World(6).formed(3)
    labelled = w.members()
    w.slots[1], w.slots[0] = w.slots[0], set()  # c-1 took over shard 0
    w.master_of[1], w.master_of[0] = None, w.ids[1]
    members = [
        Member(m.pod, m.ordinal, m.ip, m.port, m.pod_ready, old.role_label, old.shard_label, m.facts)
        for m, old in zip(w.members(), labelled, strict=True)
    ]
    p = plan(members, 3, 1)
    assert of(p.actions, SetLabels) == [SetLabels("c-0", "replica", 0), SetLabels("c-1", "master", 0)]


def test_a_fresh_node_is_never_made_master_the_replica_of_its_old_id_takes_over() -> None:
    """c-0 restarted without persistence (new id, no slots) while its old id still holds shard 0's
    slots and c-1 replicates the old id: c-1 takes over (Redis never marks the old id FAIL)."""
    w = World(6).formed(3)
    old = PeerView(
        w.ids[0], ip(0), 6379, frozenset({"master", "fail"}), None, 0, False, frozenset(w.slots[0])
    )
    w.ids[0] = node_id(0, generation=1)
    w.slots[0] = set()
    w.extra = {old.node_id: old}
    p = plan(w.members(), 3, 1)
    assert [a for a in p.actions if not isinstance(a, SetLabels)] == [Takeover("c-1", old.node_id)]
    w.down = {4}  # a pod that does not answer might be the old id: wait
    p = plan(w.members(), 3, 1)
    assert not of(p.actions, Takeover)
    assert not of(p.actions, Replicate)
    assert not of(p.actions, AddSlots)


def fence(w: World, o: int) -> str:
    """Pod ``o`` restarted without data: a new node, replica of a fake master (``cluster.resources``)."""
    old, fake = w.ids[o], "f" * 40
    w.extra[old] = PeerView(
        old, "", 0, frozenset({"master", "noaddr"}), None, 0, False, frozenset(w.slots[o])
    )
    w.extra[fake] = PeerView(fake, "127.255.255.254", 1, frozenset({"master", "fail?"}), None, 0, False)
    w.ids[o] = node_id(o, generation=1)
    w.slots[o] = set()
    w.master_of[o] = fake
    return old


def test_a_fenced_restarted_master_is_taken_over_by_its_replica_then_replicates_it() -> None:
    w = World(6).formed(3)
    old = fence(w, 0)
    p = plan(w.members(), 3, 1)
    assert [a for a in p.actions if not isinstance(a, SetLabels)] == [Takeover("c-1", old)]
    w.slots[1], w.master_of[1] = set(even_layout(3)[0]), None
    forgets = {(f.pod, f.node_id) for f in of(plan(w.members(), 3, 1).actions, Forget)}
    assert forgets == {(f"c-{o}", old) for o in range(6)} | {(f"c-{o}", "f" * 40) for o in range(1, 6)}
    w.extra = {}
    assert of(plan(w.members(), 3, 1).actions, Replicate) == [Replicate("c-0", w.ids[1])]


def test_a_shard_without_any_copy_left_restarts_empty_and_gets_its_slots_back() -> None:
    w = World(3).formed(3, replicas_per_shard=0)
    lost = set(w.slots[1])
    old = fence(w, 1)
    assert {f.node_id for f in of(plan(w.members(), 3, 0).actions, Forget)} == {old, "f" * 40}
    w.extra = {}
    assert of(plan(w.members(), 3, 0).actions, Reset) == [Reset("c-1")]
    w.master_of[1] = None
    adds = of(plan(w.members(), 3, 0, recorded={1: lost}).actions, AddSlots)
    assert adds == [AddSlots("c-1", tuple(sorted(lost)))]


def test_a_hung_master_is_left_to_redis_clusters_own_election() -> None:
    w = World(6).formed(3)
    w.down = {0}
    p = plan(w.members(), 3, 1)
    assert [a for a in p.actions if not isinstance(a, SetLabels | Wait)] == []


def test_after_the_election_the_old_id_is_forgotten_and_the_fresh_node_replicates() -> None:
    w = World(6).formed(3)
    old = PeerView(w.ids[0], ip(0), 6379, frozenset({"master", "fail"}), None, 0, False, frozenset())
    w.slots[1], w.master_of[1] = w.slots[0], None
    w.ids[0] = node_id(0, generation=1)
    w.slots[0] = set()
    w.extra = {old.node_id: old}
    forgets = of(plan(w.members(), 3, 1).actions, Forget)
    assert {f.node_id for f in forgets} == {old.node_id}
    assert {f.pod for f in forgets} == {f"c-{o}" for o in range(6)}
    w.extra = {}
    assert of(plan(w.members(), 3, 1).actions, Replicate) == [Replicate("c-0", w.ids[1])]


def test_a_shard_without_replicas_whose_node_lost_its_data_gets_its_slots_back() -> None:
    w = World(3).formed(3, replicas_per_shard=0)
    lost = set(w.slots[1])
    old = PeerView(w.ids[1], ip(1), 6379, frozenset({"master", "fail"}), None, 0, False, frozenset(lost))
    w.ids[1] = node_id(1, generation=1)
    w.slots[1] = set()
    w.extra = {old.node_id: old}
    forgets = of(plan(w.members(), 3, 0).actions, Forget)
    assert {f.node_id for f in forgets} == {old.node_id}
    w.extra = {}
    adds = of(plan(w.members(), 3, 0, recorded={1: lost}).actions, AddSlots)
    assert adds == [AddSlots("c-1", tuple(sorted(lost)))]


def test_open_slots_are_finished_before_anything_else() -> None:
    w = World(8).formed(3)
    w.master_of[6] = w.master_of[7] = None
    w.migrating[0] = {100: w.ids[6]}
    w.importing[6] = {100: w.ids[0]}
    p = plan(w.members(), 4, 1)
    assert [a for a in p.actions if not isinstance(a, SetLabels)] == [
        MoveSlots("c-0", "c-6", (100,), repair=True)
    ]


def test_a_slot_already_owned_by_its_target_closes_the_flag_left_on_the_old_owner() -> None:
    w = World(8).formed(3)
    w.slots[0].discard(100)
    w.slots[6] = {100}
    w.migrating[0] = {100: w.ids[6]}
    p = plan(w.members(), 4, 1)
    assert of(p.actions, MoveSlots) == [MoveSlots("c-0", "c-6", (100,), repair=True)]


def test_scale_out_moves_a_quarter_of_the_slots_to_the_new_shard() -> None:
    w = World(8).formed(3)
    w.master_of[7] = w.ids[6]
    p = plan(w.members(), 4, 1)
    moves = of(p.actions, MoveSlots)
    assert {m.target for m in moves} == {"c-6"}
    assert sum(len(m.slots) for m in moves) == SLOTS // 4


def test_scale_out_waits_until_the_new_master_knows_the_slots_of_each_source() -> None:
    """A node learns a peer's slots from its pings, after the MEET; IMPORTING before that would
    leave the slot unbound on the target for good (an importing node ignores the owner's claim)."""
    w = World(8).formed(3)
    w.master_of[7] = w.ids[6]
    members = w.members()
    new = members[6]
    assert new.facts is not None
    blind = dataclasses.replace(new.facts.peers[w.ids[2]], slots=frozenset())  # c-2 seen, its slots not
    members[6] = dataclasses.replace(
        new, facts=dataclasses.replace(new.facts, peers={**new.facts.peers, w.ids[2]: blind})
    )
    p = plan(members, 4, 1)
    assert of(p.actions, MoveSlots) == []
    assert of(p.actions, Wait) == [Wait("c-6 does not know the slots c-2 serves yet")]
    assert of(plan(w.members(), 4, 1).actions, MoveSlots)  # once it does, the moves follow


def test_scale_in_drains_then_forgets_then_shrinks_the_statefulset() -> None:
    w = World(8).formed(4)
    w.master_of[7] = w.ids[6]
    p = plan(w.members(), 3, 1)
    assert {m.source for m in of(p.actions, MoveSlots)} == {"c-6"}
    assert p.statefulset_replicas == 8
    drained = w.slots[6]
    w.slots[6] = set()
    for shard, layout in enumerate(even_layout(3)):
        w.slots[2 * shard] = set(layout)
    assert drained
    p = plan(w.members(), 3, 1)
    forgets = of(p.actions, Forget)
    assert {(f.pod, f.node_id) for f in forgets} == {
        (f"c-{o}", w.ids[gone]) for o in range(6) for gone in (6, 7)
    }
    assert p.statefulset_replicas == 8
    for o in range(6):
        w.known[o] -= {6, 7}
    p = plan(w.members(), 3, 1)
    assert p.statefulset_replicas == 6
    assert not of(p.actions, Meet)


@pytest.mark.parametrize("shards", [3, 5])
def test_plans_are_deterministic(shards: int) -> None:
    w = World(2 * shards)
    assert plan(w.members(), shards, 1) == plan(list(reversed(w.members())), shards, 1)
