"""Properties of topology.plan over arbitrary observed clusters (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from examples.rediscluster.replication.topology import is_empty_restart, plan
from examples.rediscluster.replication.topology_types import (
    ClusterState,
    Demote,
    NodeObservation,
    Plan,
    Policy,
    Promote,
    RecordMaster,
    ReplicaOf,
    Role,
    Switchover,
    Wait,
)
from tests.rediscluster._builders import OTHER_REPLID, REPLID, gone, master, replica, simulate

POLICY = Policy(down_after=5.0)
replids = st.sampled_from([REPLID, OTHER_REPLID, "c" * 40])
labels = st.sampled_from([None, "master", "replica"])


@st.composite
def node(draw: st.DrawFn, i: int, n: int) -> NodeObservation:
    kind = draw(st.sampled_from(["master", "replica", "replica", "gone"]))
    label, ready = draw(labels), draw(st.booleans())
    if kind == "gone":
        return gone(i, label=label, with_ip=draw(st.booleans()))
    if kind == "master":
        return master(
            i,
            keys=draw(st.integers(0, 3)),
            replid=draw(replids),
            replid2=draw(st.sampled_from(["0" * 40, REPLID])),
            offset=draw(st.integers(0, 2000)),
            replicas=draw(st.integers(0, 3)),
            ready=ready,
            label=label,
            uptime=draw(st.integers(0, 100)),
            failover_state=draw(st.sampled_from(["no-failover", "no-failover", "waiting-for-sync"])),
        )
    link_up = draw(st.booleans())
    return replica(
        i,
        draw(st.integers(0, n - 1)),
        offset=draw(st.integers(0, 2000)),
        replid=draw(replids),
        priority=draw(st.sampled_from([0, 1, 100, 100])),
        link_up=link_up,
        down_since=None if link_up else draw(st.one_of(st.none(), st.floats(0, 200))),
        keys=draw(st.integers(0, 3)),
        ready=ready,
        label=label,
        run_id=draw(st.sampled_from(["r1", "r2", "r3"])),
        master_ip=draw(st.sampled_from([None, None, "10.9.9.9"])),
        loading=draw(st.sampled_from([False, False, False, True])),
        terminating=draw(st.sampled_from([False, False, True])),
    )


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[NodeObservation], ClusterState, float]:
    n = draw(st.integers(1, 5))
    observed = [draw(node(i, n)) for i in range(n)]
    recorded = draw(
        st.one_of(
            st.just(ClusterState()),
            st.builds(ClusterState, st.sampled_from([f"rc-{i}" for i in range(n + 1)]), st.integers(1, 5)),
        )
    )
    return observed, recorded, draw(st.sampled_from([0.0, 1.0, 4.9, 5.0, 100.0]))


def promoted(p: Plan) -> list[str]:
    return [
        a.pod if isinstance(a, Promote) else a.to for a in p.actions if isinstance(a, Promote | Switchover)
    ]


def serving_masters(observed: list[NodeObservation]) -> set[str]:
    return {
        n.pod for n in observed if n.reachable and n.redis and n.role is Role.MASTER and not n.redis.loading
    }


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_plans_are_deterministic_and_order_independent(
    case: tuple[list[NodeObservation], ClusterState, float],
) -> None:
    observed, recorded, unhealthy = case
    p = plan(observed, recorded, POLICY, master_unhealthy_for=unhealthy)
    assert plan(observed, recorded, POLICY, master_unhealthy_for=unhealthy) == p
    assert plan(list(reversed(observed)), recorded, POLICY, master_unhealthy_for=unhealthy) == p


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_plan_shape(case: tuple[list[NodeObservation], ClusterState, float]) -> None:
    """Wait stands alone; RecordMaster comes first, bumps the epoch by one and names the new master."""
    observed, recorded, unhealthy = case
    p = plan(observed, recorded, POLICY, master_unhealthy_for=unhealthy)
    if any(isinstance(a, Wait) for a in p.actions):
        assert len(p.actions) == 1
    records = [a for a in p.actions if isinstance(a, RecordMaster)]
    assert len(promoted(p)) <= 1
    if records:
        assert p.actions[0] == records[0] == RecordMaster(records[0].pod, recorded.master_epoch + 1)
        assert len(records) == 1
        assert promoted(p) in ([], [records[0].pod])


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_a_plan_never_leaves_two_masters(case: tuple[list[NodeObservation], ClusterState, float]) -> None:
    observed, recorded, unhealthy = case
    p = plan(observed, recorded, POLICY, master_unhealthy_for=unhealthy)
    if p.converged or isinstance(p.actions[0], Wait):
        return
    after, now = simulate(p, observed, recorded)
    assert now.current_master is not None
    assert serving_masters(after) <= {now.current_master}
    assert {n.pod for n in after if n.label == "master"} <= {now.current_master}


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_no_failover_while_the_recorded_master_serves(
    case: tuple[list[NodeObservation], ClusterState, float],
) -> None:
    observed, recorded, unhealthy = case
    if recorded.current_master is None:
        return  # bootstrap
    m = next((n for n in observed if n.pod == recorded.current_master), None)
    p = plan(observed, recorded, POLICY, master_unhealthy_for=unhealthy)
    if m is None or not m.reachable or m.redis is None or m.role is not Role.MASTER:
        if unhealthy < POLICY.down_after and (m is None or not m.reachable):
            assert [type(a) for a in p.actions] in ([], [Wait]), "a change of master inside the window"
        return
    if (m.pod_ready or unhealthy < POLICY.down_after) and not is_empty_restart(m, observed):
        assert not [a for a in p.actions if isinstance(a, RecordMaster | Promote | Switchover)]


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_nobody_is_pointed_at_an_empty_restarted_master(
    case: tuple[list[NodeObservation], ClusterState, float],
) -> None:
    observed, recorded, unhealthy = case
    empty = {n.pod for n in observed if is_empty_restart(n, observed)}
    p = plan(observed, recorded, POLICY, master_unhealthy_for=unhealthy)
    assert not [a for a in p.actions if isinstance(a, ReplicaOf | Demote) and a.master in empty]
    assert not set(promoted(p)) & empty


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_planning_reaches_a_fixpoint(case: tuple[list[NodeObservation], ClusterState, float]) -> None:
    """Carrying plans out converges within four rounds (or stops at a Wait), and stays converged.

    Four: a resumed switchover to a NotReady pod, a second failover away from it, labels, done.
    """
    observed, recorded, unhealthy = case
    for _ in range(4):
        p = plan(observed, recorded, POLICY, master_unhealthy_for=unhealthy)
        if p.converged or isinstance(p.actions[0], Wait):
            break
        observed, changed = simulate(p, observed, recorded)
        if changed != recorded:
            unhealthy = 0.0  # a new master has its own, fresh health history
        recorded = changed
    else:
        raise AssertionError(f"no fixpoint after 4 rounds, last plan {p}")
    assert plan(observed, recorded, POLICY, master_unhealthy_for=unhealthy) == p
