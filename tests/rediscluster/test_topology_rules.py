"""Candidate ranking, down detection, scale-in and planned switchover (pure topology rules)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from examples.rediscluster.replication.topology import (
    choose_failover_candidate,
    evacuate,
    scale_down_victims,
    switchover,
)
from examples.rediscluster.replication.topology_types import (
    ClusterState,
    DownDetector,
    NodeObservation,
    Plan,
    Policy,
    RecordMaster,
    ReplicaOf,
    Role,
    ScaleDown,
    SetLabel,
    Switchover,
    Wait,
)
from tests.rediscluster._builders import OTHER_REPLID, gone, healthy, master, replica

POLICY = Policy(down_after=5.0)  # links down > 50 s (+ master downtime) disqualify a replica


def best(observed: list[NodeObservation], **kwargs: float | str) -> str | None:
    chosen = choose_failover_candidate([gone(0), *observed], "rc-0", POLICY, **kwargs)  # type: ignore[arg-type]
    return chosen.pod if chosen is not None else None


@pytest.mark.parametrize(
    ("observed", "expected"),
    [
        pytest.param([replica(1, 0, offset=5), replica(2, 0, offset=9)], "rc-2", id="highest-offset"),
        pytest.param(
            [replica(1, 0, offset=5, priority=10), replica(2, 0, offset=9, priority=100)],
            "rc-1",
            id="lowest-priority-beats-offset",
        ),
        pytest.param(
            [replica(1, 0, offset=5), replica(2, 0, offset=9, priority=0)], "rc-1", id="priority-0-skipped"
        ),
        pytest.param(
            [replica(1, 0, run_id="bbb"), replica(2, 0, run_id="aaa"), replica(3, 0, run_id="ccc")],
            "rc-2",
            id="tie-lowest-run-id",
        ),
        pytest.param(
            [replica(1, 0, offset=5), replica(2, 0, offset=9, link_up=False, down_since=51)],
            "rc-1",
            id="disconnected-too-long-skipped",
        ),
        pytest.param(
            [replica(1, 0, offset=5), replica(2, 0, offset=9, link_up=False, down_since=50)],
            "rc-2",
            id="disconnected-at-the-limit-kept",
        ),
        pytest.param(
            [replica(1, 0, offset=5), replica(2, 0, offset=9, link_up=False, down_since=None)],
            "rc-1",
            id="never-connected-skipped",
        ),
        pytest.param(
            [replica(1, 0, offset=5), replica(2, 0, offset=9, link_up=False, down_since=0)],
            "rc-2",
            id="link-down-for-0s-kept",
        ),
        pytest.param(
            [replica(1, 0, offset=5), replica(2, 0, offset=9, loading=True)], "rc-1", id="loading-skipped"
        ),
        pytest.param(
            [replica(1, 0, offset=5), replica(2, 0, offset=9, terminating=True)],
            "rc-1",
            id="terminating-skipped",
        ),
        pytest.param([replica(1, 0, offset=5), gone(2)], "rc-1", id="unreachable-skipped"),
        pytest.param([master(1), replica(2, 0, offset=1)], "rc-2", id="masters-are-not-candidates"),
        pytest.param(
            [replica(1, 0, offset=5), replica(2, 1, offset=10**9, replid=OTHER_REPLID)],
            "rc-1",
            id="offsets-not-compared-across-replids-old-master-lineage-wins",
        ),
        pytest.param(
            [
                replica(1, 3, offset=5, master_ip="10.1.1.1"),
                replica(2, 3, offset=7, master_ip="10.1.1.1"),
                replica(3, 3, offset=10**9, replid=OTHER_REPLID, master_ip="10.1.1.1"),
            ],
            "rc-2",
            id="larger-lineage-wins-when-none-followed-the-old-master",
        ),
        pytest.param([replica(1, 0, priority=0)], None, id="nobody-eligible"),
        pytest.param([], None, id="no-replicas"),
    ],
)
def test_failover_candidate_ranking(observed: list[NodeObservation], expected: str | None) -> None:
    assert best(observed) == expected


def test_master_downtime_extends_the_link_allowance() -> None:
    observed = [replica(1, 0, link_up=False, down_since=70)]
    assert best(observed) is None
    assert best(observed, master_unhealthy_for=20) == "rc-1"


def test_excluded_lineage_is_never_chosen() -> None:
    observed = [replica(1, 0, offset=5), replica(2, 0, offset=9, replid=OTHER_REPLID)]
    assert best(observed, exclude_replid=OTHER_REPLID) == "rc-1"


def test_old_master_is_never_its_own_successor() -> None:
    assert choose_failover_candidate([replica(0, 1)], "rc-0", POLICY) is None


def test_ranking_does_not_depend_on_input_order() -> None:
    observed = [replica(i, 0, offset=7, run_id=f"r{9 - i}") for i in range(1, 6)]
    assert best(observed) == best(list(reversed(observed))) == "rc-5"


def test_duplicate_pods_are_rejected() -> None:
    with pytest.raises(ValueError, match="twice"):
        choose_failover_candidate([replica(1, 0), replica(1, 0)], "rc-0", POLICY)


# --- DownDetector: never down on one bad probe -------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "now", "unhealthy_for", "down"),
    [
        pytest.param([], 100.0, 0.0, False, id="no-samples"),
        pytest.param([(0, True)], 100.0, 0.0, False, id="healthy"),
        pytest.param([(0, True), (1, False)], 1.0, 1.0, False, id="one-bad-probe"),
        pytest.param([(0, True), (1, False)], 4.99, 4.99, False, id="bad-just-inside-window"),
        pytest.param([(0, True), (1, False)], 5.0, 5.0, True, id="whole-window-without-reply"),
        pytest.param([(0, True), (1, False), (3, True), (4, False)], 7.0, 4.0, False, id="reply-mid-window"),
        pytest.param([(0, False)], 4.0, 4.0, False, id="never-valid-window-from-first-sample"),
        pytest.param([(0, False), (2, False)], 5.0, 5.0, True, id="never-valid-full-window"),
        pytest.param([(0, True), (6, False)], 6.0, 6.0, True, id="gap-between-probes-counts"),
        pytest.param([(0, True), (9, False), (8, True)], 9.0, 9.0, True, id="late-sample-ignored"),
    ],
)
def test_down_detector(
    samples: list[tuple[float, bool]], now: float, unhealthy_for: float, down: bool
) -> None:
    detector = DownDetector()
    for at, ok in samples:
        detector.record(at, ok)
    assert detector.unhealthy_for(now) == pytest.approx(unhealthy_for)
    assert detector.is_down(now, 5.0) is down


def test_down_detector_window_starts_when_watching_began() -> None:
    detector = DownDetector(since=10.0)  # a first probe sent at 10 hung until 13
    detector.record(13.0, False)
    assert detector.unhealthy_for(13.0) == 3.0
    assert not detector.is_down(14.9, 5.0)
    assert detector.is_down(15.0, 5.0)
    assert DownDetector(since=10.0).unhealthy_for(99.0) == 0.0  # no sample yet: nothing known


def test_down_detector_tracks_the_last_valid_reply() -> None:
    detector = DownDetector()
    assert detector.last_valid_reply is None
    assert detector.answering
    detector.record(1.0, True)
    detector.record(2.0, False)
    assert detector.last_valid_reply == 1.0
    assert not detector.answering
    detector.record(3.0, True)
    assert detector.answering
    assert detector.unhealthy_for(math.inf) == 0.0


# --- scale-in never removes the master -----------------------------------------------------------


@pytest.mark.parametrize(
    ("master_at", "replicas", "expected"),
    [
        pytest.param(0, 2, ScaleDown(("rc-2",)), id="replica-removed"),
        pytest.param(0, 1, ScaleDown(("rc-2", "rc-1")), id="all-replicas-removed"),
        pytest.param(1, 3, ScaleDown(()), id="no-change"),
        pytest.param(2, 2, ScaleDown(("rc-2",), True, "rc-0"), id="master-highest-ordinal"),
        pytest.param(1, 1, ScaleDown(("rc-2", "rc-1"), True, "rc-0"), id="master-among-victims"),
    ],
)
def test_scale_down_never_removes_the_master(master_at: int, replicas: int, expected: ScaleDown) -> None:
    observed = healthy(3, master_at)
    assert scale_down_victims(observed, ClusterState(f"rc-{master_at}", 1), replicas, POLICY) == expected


def test_scale_down_picks_the_best_in_sync_survivor() -> None:
    observed = [
        replica(0, 3, offset=5),
        replica(1, 3, offset=9),
        replica(2, 3, link_up=False, offset=99),
        master(3),
    ]
    decision = scale_down_victims(observed, ClusterState("rc-3", 1), 3, POLICY)
    assert decision == ScaleDown(("rc-3",), True, "rc-1")


def test_scale_down_without_in_sync_survivor_names_no_target() -> None:
    observed = [replica(0, 1, link_up=False, down_since=1), master(1)]
    assert scale_down_victims(observed, ClusterState("rc-1", 1), 1, POLICY) == ScaleDown(
        ("rc-1",), True, None
    )


def test_scale_down_to_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one pod"):
        scale_down_victims(healthy(2), ClusterState("rc-0", 1), 0, POLICY)


# --- planned switchover --------------------------------------------------------------------------


def test_switchover_records_chains_the_other_replicas_below_the_target_then_hands_over() -> None:
    p = switchover(healthy(3, 2), ClusterState("rc-2", 4), "rc-0")
    assert p.actions == (
        RecordMaster("rc-0", 5),
        SetLabel("rc-2", Role.REPLICA),
        ReplicaOf("rc-1", "rc-0"),  # the new master keeps a replica when the old one leaves
        Switchover("rc-2", "rc-0"),
        SetLabel("rc-0", Role.MASTER),  # once the switchover is done
    )


def test_switchover_to_the_current_master_is_a_no_op() -> None:
    assert switchover(healthy(3), ClusterState("rc-0", 1), "rc-0") == Plan()


ONLINE = master(0, online=(1,))


@pytest.mark.parametrize(
    ("observed", "reason"),
    [
        pytest.param(
            [ONLINE, replica(1, 0, link_up=False, down_since=3)], "in-sync", id="target-out-of-sync"
        ),
        pytest.param([ONLINE, replica(1, 0, priority=0)], "may not", id="target-priority-0"),
        pytest.param([ONLINE, replica(1, 0, terminating=True)], "may not", id="target-terminating"),
        pytest.param([ONLINE, gone(1)], "in-sync", id="target-unreachable"),
        pytest.param([gone(0), replica(1, 0)], "not serving", id="master-unreachable"),
        pytest.param([ONLINE, replica(1, 2)], "in-sync", id="target-follows-someone-else"),
        pytest.param(
            [master(0, online=(2,)), replica(1, 0), replica(2, 0)], "online", id="target-not-online"
        ),
    ],
)
def test_switchover_refuses_unsafe_targets(observed: list[NodeObservation], reason: str) -> None:
    p = switchover(observed, ClusterState("rc-0", 1), "rc-1")
    assert len(p.actions) == 1
    assert isinstance(p.actions[0], Wait)
    assert reason in p.actions[0].reason


# --- evacuation: a terminating master (drain) ----------------------------------------------------


def test_a_master_that_is_not_terminating_or_not_serving_needs_no_evacuation() -> None:
    assert evacuate(healthy(3), ClusterState("rc-0", 1), POLICY) is None
    dead = NodeObservation("rc-0", 0, "10.0.0.1", terminating=True)  # a failover, not a handover
    assert evacuate([dead, replica(1, 0), replica(2, 0)], ClusterState("rc-0", 1), POLICY) is None


def test_a_terminating_master_is_handed_over_to_the_best_live_in_sync_replica() -> None:
    observed = [
        master(0, online=(1, 2, 3), terminating=True),
        replica(1, 0, offset=99, terminating=True),  # most advanced, but its pod goes too
        replica(2, 0, offset=5),
        replica(3, 0, offset=9),
    ]
    p = evacuate(observed, ClusterState("rc-0", 4), POLICY)
    assert p is not None
    assert p.actions == (
        RecordMaster("rc-3", 5),
        SetLabel("rc-0", Role.REPLICA),
        ReplicaOf("rc-1", "rc-3"),
        ReplicaOf("rc-2", "rc-3"),
        Switchover("rc-0", "rc-3"),
        SetLabel("rc-3", Role.MASTER),
    )


def test_a_terminating_master_is_handed_to_a_replica_on_another_node_before_its_neighbour() -> None:
    on = {0: "node-a", 1: "node-a", 2: "node-b"}  # rc-1 beside the master: the drain takes it next
    observed = [
        dataclasses.replace(n, node=on[n.ordinal])
        for n in (
            master(0, online=(1, 2), terminating=True),
            replica(1, 0, offset=99),
            replica(2, 0, offset=5),
        )
    ]
    p = evacuate(observed, ClusterState("rc-0", 4), POLICY)
    assert p is not None
    assert p.actions[0] == RecordMaster("rc-2", 5)
    # with no in-sync replica elsewhere, the neighbour is still better than a crash failover
    behind = [*observed[:2], replica(2, 0, link_up=False, down_since=2)]
    p = evacuate(behind, ClusterState("rc-0", 4), POLICY)
    assert p is not None
    assert p.actions[0] == RecordMaster("rc-1", 5)


def test_a_terminating_master_without_an_in_sync_replica_waits() -> None:
    observed = [master(0, online=(), terminating=True), replica(1, 0, link_up=False, down_since=2)]
    p = evacuate(observed, ClusterState("rc-0", 1), POLICY)
    assert p is not None
    assert len(p.actions) == 1
    assert isinstance(p.actions[0], Wait)
    assert "terminating" in p.actions[0].reason
