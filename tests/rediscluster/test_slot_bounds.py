"""Slot maps held as runs (``cluster.slots.SlotSet``) and a ``CLUSTER NODES`` reply bounded before
it is believed (``cluster.nodes.parse_cluster_nodes``): a hostile "Redis" answering
``connected 0-9999999999`` is refused without allocating for it."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.rediscluster.cluster.nodes import MAX_NODES, PeerView, parse_cluster_nodes
from examples.rediscluster.cluster.slots import (
    SLOTS,
    SlotSet,
    format_ranges,
    parse_ranges,
    parse_slot_set,
    ranges,
)

SLOT_SETS = st.frozensets(st.integers(0, SLOTS - 1), max_size=64) | st.frozensets(
    st.integers(0, 40), max_size=30
)
ME = "a" * 40
PEER = "b" * 40


def line(node: str, flags: str, *slots: str, master: str = "-") -> str:
    return f"{node} 127.0.1.1:6379@16379 {flags} {master} 0 0 1 connected {' '.join(slots)}".rstrip()


@given(SLOT_SETS, SLOT_SETS)
def test_a_slot_set_behaves_as_the_frozenset_of_its_slots(a: frozenset[int], b: frozenset[int]) -> None:
    sa, sb = SlotSet(a), SlotSet(b)
    assert len(sa) == len(a)
    assert list(sa) == sorted(a)
    assert sa == a
    assert a == sa
    assert hash(sa) == hash(a)
    assert (sa == sb) == (a == b)
    assert sa & sb == a & b
    assert sa | sb == a | b
    assert sa - sb == a - b
    assert sa & set(b) == a & b
    assert set(b) | sa == a | b
    assert all((s in sa) == (s in a) for s in range(-1, 42))
    assert SlotSet.from_runs(ranges(a)) == sa
    assert parse_slot_set(format_ranges(sa)) == sa
    assert sa.runs == ranges(a)


def test_a_slot_set_holds_runs_not_slots() -> None:
    everything = SlotSet.from_runs([(0, SLOTS - 1)])
    assert len(everything) == SLOTS
    assert everything.runs == [(0, SLOTS - 1)]
    assert SlotSet.from_runs([(5, 9), (0, 4), (7, 20)]).runs == [(0, 20)]  # merged, any order
    for bad in ([(0, SLOTS)], [(-1, 3)], [(9, 3)]):
        with pytest.raises(ValueError, match="slot"):
            SlotSet.from_runs(bad)
    with pytest.raises(ValueError, match="not a hash slot"):
        SlotSet([SLOTS])


def test_parse_ranges_refuses_slots_out_of_range_without_expanding_them() -> None:
    assert parse_ranges(["0-3", "10"]) == {0, 1, 2, 3, 10}
    for bad in (["0-9999999999"], ["16384"], ["-5"], ["3-1"], ["x"]):
        with pytest.raises(ValueError, match="slot"):
            parse_ranges(bad)


def test_peer_views_hold_their_slots_as_runs_whatever_they_are_given() -> None:
    view = PeerView(PEER, "127.0.0.1", 6379, frozenset({"master"}), None, 0, True, frozenset(range(100)))
    assert isinstance(view.slots, SlotSet)
    assert view.slots == frozenset(range(100))
    me, peers, _, _ = parse_cluster_nodes(line(ME, "myself,master", "0-8191", "8192-16383"))
    mine = peers[me].slots
    assert isinstance(mine, SlotSet)
    assert mine.runs == [(0, SLOTS - 1)]


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (line(ME, "myself,master", "0-9999999999"), "outside 0 .. 16383"),
        (line(ME, "myself,master", "16384"), "outside 0 .. 16383"),
        (line(ME, "myself,master", "[99999999999->-" + PEER + "]"), "outside 0 .. 16383"),
        (line(ME, "myself,master", "0-16383") + "\n" + line(PEER, "master", "0-16383"),
         "more than 16384 slots"),
        (line(ME, "myself,master", *(["1"] * (SLOTS + 1))), "more than 16384 slot entries"),
        (line(ME, "myself,master", "0", master="c" * 41), "node id of 41 characters"),
        (line("x" * 1000, "myself,master"), "node id of 1000 characters"),
        ("\n".join(line(f"{i:040d}", "master") for i in range(MAX_NODES)) + "\n" + line(ME, "myself,master"),
         f"lists {MAX_NODES + 1} nodes"),
        (line(ME, "myself,master") + " " * 5_000_000, "characters"),
    ],
)  # fmt: skip
def test_a_hostile_cluster_nodes_reply_is_refused_in_bounded_memory(reply: str, says: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=says):
            parse_cluster_nodes(reply)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a set of the 10^10 slots the first reply claims would need hundreds of GiB; the lines of the
    # longest reply here (1001 nodes) are what bounds the peak
    assert peak < 2 * 2**20, f"parsing the refused reply allocated {peak} bytes"


def test_a_full_healthy_reply_is_accepted() -> None:
    masters = [f"{i:040d}" for i in range(100)]
    start, lines = 0, []
    for i, node in enumerate(masters):
        count = SLOTS // 100 + (1 if i < SLOTS % 100 else 0)
        lines.append(line(node, "myself,master" if i == 0 else "master", f"{start}-{start + count - 1}"))
        start += count
    lines += [line(f"r{i:039d}", "slave", master=masters[i % 100]) for i in range(500)]
    me, peers, _, _ = parse_cluster_nodes("\n".join(lines))
    assert me == masters[0]
    assert sum(len(p.slots) for p in peers.values()) == SLOTS
    assert len(peers) == 600
