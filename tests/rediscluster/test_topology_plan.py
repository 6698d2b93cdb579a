"""topology.plan: one test (or table row) per rule of REFERENCE "Redis failover essentials"."""

from __future__ import annotations

import dataclasses

import pytest

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
    SetLabel,
    Switchover,
    Wait,
)
from tests.rediscluster._builders import (
    OTHER_REPLID,
    REPLID,
    gone,
    healthy,
    master,
    masters,
    replica,
    simulate,
    with_facts,
)

POLICY = Policy(down_after=5.0)
AT_0 = ClusterState("rc-0", 1)
M, R = Role.MASTER, Role.REPLICA


def fresh(i: int) -> NodeObservation:
    """A just-started, empty Redis: a master with nothing, and no role label yet."""
    return master(i, keys=0, offset=0, replicas=0, replid=f"{i}" * 40, label=None, uptime=2)


def only_wait(p: Plan) -> str:
    assert len(p.actions) == 1, p
    action = p.actions[0]
    assert isinstance(action, Wait), p
    return action.reason


# --- bootstrap -----------------------------------------------------------------------------------


def test_bootstrap_makes_pod_0_master_and_the_rest_its_replicas() -> None:
    p = plan([fresh(0), fresh(1), fresh(2)], ClusterState(), POLICY)
    assert p.actions == (
        RecordMaster("rc-0", 1),
        SetLabel("rc-1", R),
        SetLabel("rc-2", R),
        Demote("rc-1", "rc-0"),
        Demote("rc-2", "rc-0"),
        SetLabel("rc-0", M),
    )


def test_bootstrap_waits_for_pod_0() -> None:
    assert "ordinal 0" in only_wait(plan([gone(0), fresh(1), fresh(2)], ClusterState(), POLICY))


def test_bootstrap_adopts_a_serving_master_when_status_was_lost() -> None:
    observed = [replica(0, 1), master(1), replica(2, 1)]
    p = plan(observed, ClusterState(), POLICY)
    assert p.actions[0] == RecordMaster("rc-1", 1)
    assert not [a for a in p.actions if isinstance(a, Promote | ReplicaOf | Demote)]


def test_bootstrap_records_before_any_redis_command() -> None:
    p = plan([replica(0, 1, link_up=False, keys=0), fresh(1)], ClusterState(), POLICY)
    assert p.actions[0] == RecordMaster("rc-0", 1)
    assert Promote("rc-0") in p.actions


# --- converged and drift -------------------------------------------------------------------------


def test_converged_cluster_gives_an_empty_plan() -> None:
    assert plan(healthy(3), AT_0, POLICY) == Plan()
    assert plan(healthy(3), AT_0, POLICY).converged


def test_missing_labels_are_the_only_actions() -> None:
    observed = [dataclasses.replace(n, label=None) for n in healthy(3)]
    assert plan(observed, AT_0, POLICY).actions == (
        SetLabel("rc-1", R),
        SetLabel("rc-2", R),
        SetLabel("rc-0", M),
    )


@pytest.mark.parametrize(
    ("drifted", "expected"),
    [
        pytest.param(replica(2, 1), ReplicaOf("rc-2", "rc-0"), id="follows-another-replica"),
        pytest.param(replica(2, 0, master_ip="10.9.9.9"), ReplicaOf("rc-2", "rc-0"), id="stale-master-ip"),
        pytest.param(
            master(2, keys=5, label="replica"), Demote("rc-2", "rc-0"), id="second-master-with-data"
        ),
        pytest.param(fresh(2), Demote("rc-2", "rc-0"), id="restarted-empty-replica"),
    ],
)
def test_drift_is_repaired_towards_the_recorded_master(drifted: NodeObservation, expected: object) -> None:
    observed = [*healthy(2), dataclasses.replace(drifted, label="replica")]
    assert plan(observed, AT_0, POLICY).actions == (expected,)


def test_two_masters_keep_the_recorded_one_and_unlabel_the_other_first() -> None:
    observed = [master(0), replica(1, 0), master(2, label="master")]
    p = plan(observed, AT_0, POLICY)
    assert p.actions == (SetLabel("rc-2", R), Demote("rc-2", "rc-0"))


def test_the_recorded_master_wins_even_against_a_busier_master() -> None:
    observed = [master(0, replicas=0), replica(1, 2), master(2, replicas=1, label="master")]
    p = plan(observed, AT_0, POLICY)
    assert p.actions == (SetLabel("rc-2", R), ReplicaOf("rc-1", "rc-0"), Demote("rc-2", "rc-0"))


def test_unreachable_and_loading_replicas_get_only_labels() -> None:
    observed = [master(0), gone(1, label="master"), replica(2, 1, loading=True)]
    assert plan(observed, AT_0, POLICY).actions == (SetLabel("rc-1", R),)


def test_a_loading_master_means_wait() -> None:
    observed = [with_facts(master(0), loading=True), replica(1, 0)]
    assert "loading" in only_wait(plan(observed, AT_0, POLICY))


# --- failover ------------------------------------------------------------------------------------

DOWN = [
    gone(0, label="master"),
    replica(1, 0, offset=900, link_up=False, down_since=6),
    replica(2, 0, link_up=False, down_since=6),
]


@pytest.mark.parametrize("unhealthy_for", [0.0, 0.5, 4.99])
def test_no_failover_inside_the_down_after_window(unhealthy_for: float) -> None:
    reason = only_wait(plan(DOWN, AT_0, POLICY, master_unhealthy_for=unhealthy_for))
    assert "down-after" in reason


@pytest.mark.parametrize("unhealthy_for", [5.0, 6.0, 3600.0])
def test_failover_after_the_full_window_promotes_the_best_replica(unhealthy_for: float) -> None:
    p = plan(DOWN, AT_0, POLICY, master_unhealthy_for=unhealthy_for)
    assert p.actions == (
        RecordMaster("rc-2", 2),
        SetLabel("rc-0", R),
        Promote("rc-2"),
        ReplicaOf("rc-1", "rc-2"),
        SetLabel("rc-2", M),
    )
    assert p.reason == "master rc-0 is down"  # the FailoverCompleted Event says why


def test_failover_disabled_waits() -> None:
    p = plan(DOWN, AT_0, Policy(down_after=5.0, enable_auto_failover=False), master_unhealthy_for=60)
    assert "disabled" in only_wait(p)


def test_failover_without_eligible_replica_waits() -> None:
    observed = [gone(0), replica(1, 0, priority=0), replica(2, 0, link_up=False, down_since=None)]
    assert "no eligible replica" in only_wait(plan(observed, AT_0, POLICY, master_unhealthy_for=60))


def test_master_pod_without_ip_counts_as_unreachable() -> None:
    observed = [gone(0, with_ip=False), replica(1, 0, link_up=False, down_since=6)]
    assert plan(observed, AT_0, POLICY, master_unhealthy_for=6).actions[0] == RecordMaster("rc-1", 2)


def test_master_pod_missing_entirely_counts_as_unreachable() -> None:
    observed = [replica(1, 0, link_up=False, down_since=6), replica(2, 0, link_up=False, down_since=6)]
    assert plan(observed, AT_0, POLICY, master_unhealthy_for=2).actions[0] == Wait(
        "master rc-0 unhealthy for 2.0s < down-after 5s"
    )
    assert plan(observed, AT_0, POLICY, master_unhealthy_for=6).actions[0] == RecordMaster("rc-1", 2)


def test_not_ready_master_below_the_window_waits_then_hands_over_without_loss() -> None:
    observed = [master(0, ready=False, online=(1, 2)), replica(1, 0, offset=900), replica(2, 0)]
    assert "unhealthy" in only_wait(plan(observed, AT_0, POLICY, master_unhealthy_for=1))
    p = plan(observed, AT_0, POLICY, master_unhealthy_for=5)
    assert p.actions == (
        RecordMaster("rc-2", 2),
        SetLabel("rc-0", R),
        ReplicaOf("rc-1", "rc-2"),
        Switchover("rc-0", "rc-2"),
        SetLabel("rc-2", M),  # once the switchover is done
    )


def test_returning_old_master_is_demoted_to_the_new_one() -> None:
    observed = [
        master(0, replid=OTHER_REPLID, replicas=0, label="master"),
        replica(1, 2),
        master(2, replicas=1),
    ]
    p = plan(observed, ClusterState("rc-2", 2), POLICY)
    assert p.actions == (SetLabel("rc-0", R), Demote("rc-0", "rc-2"))


def test_returning_old_master_restarted_empty_is_demoted_too() -> None:
    observed = [fresh(0), replica(1, 2), master(2, replicas=1)]
    p = plan(observed, ClusterState("rc-2", 2), POLICY)
    assert p.actions == (SetLabel("rc-0", R), Demote("rc-0", "rc-2"))


# --- restart mid-failover ------------------------------------------------------------------------


def test_restart_after_record_before_promote_resumes_the_same_decision() -> None:
    recorded = ClusterState("rc-2", 2)  # RecordMaster persisted, then the operator died
    observed = [gone(0, label="master"), *DOWN[1:]]
    p = plan(observed, recorded, POLICY)
    assert p.actions == (SetLabel("rc-0", R), Promote("rc-2"), ReplicaOf("rc-1", "rc-2"), SetLabel("rc-2", M))
    assert plan(observed, recorded, POLICY) == p


def test_resume_ignores_readiness_of_the_recorded_replica() -> None:
    observed = [gone(0), replica(1, 0, link_up=False, down_since=6, ready=False)]
    p = plan(observed, ClusterState("rc-1", 2), POLICY, master_unhealthy_for=60)
    assert Promote("rc-1") in p.actions
    assert not [a for a in p.actions if isinstance(a, RecordMaster)]


def test_resume_when_the_old_master_is_back_and_in_sync_switches_over() -> None:
    observed = [master(0, online=(1, 2)), replica(1, 0), replica(2, 0)]
    assert plan(observed, ClusterState("rc-2", 2), POLICY).actions == (
        SetLabel("rc-0", R),
        ReplicaOf("rc-1", "rc-2"),
        Switchover("rc-0", "rc-2"),
        SetLabel("rc-2", M),  # once the switchover is done
    )


def test_resume_promotes_when_the_old_master_does_not_list_the_target_online() -> None:
    observed = [master(0, online=(1,)), replica(1, 0), replica(2, 0)]  # FAILOVER TO rc-2 would fail
    assert plan(observed, ClusterState("rc-2", 2), POLICY).actions == (
        SetLabel("rc-0", R),
        Promote("rc-2"),
        Demote("rc-0", "rc-2"),
        ReplicaOf("rc-1", "rc-2"),
        SetLabel("rc-2", M),
    )


def test_switchover_in_progress_waits() -> None:
    observed = [master(0, failover_state="waiting-for-sync", label="replica"), replica(1, 0), replica(2, 0)]
    assert "in progress" in only_wait(plan(observed, ClusterState("rc-2", 2), POLICY))


def test_finished_failover_converges_to_an_empty_plan() -> None:
    observed, recorded = list(DOWN), AT_0
    for _ in range(2):
        observed, recorded = simulate(
            plan(observed, recorded, POLICY, master_unhealthy_for=60), observed, recorded
        )
    assert recorded == ClusterState("rc-2", 2)
    assert plan(observed, recorded, POLICY) == Plan()


# --- empty restarted master (persistence off, auto-restart) --------------------------------------


def empty_restart(new_ip: bool) -> list[NodeObservation]:
    restarted = dataclasses.replace(fresh(0), label="master", ip="10.0.1.1" if new_ip else "10.0.0.1")
    return [
        restarted,
        replica(1, 0, offset=900, link_up=False, down_since=3),
        replica(2, 0, link_up=False, down_since=3),
    ]


@pytest.mark.parametrize("new_ip", [True, False], ids=["new-pod-ip", "same-pod-ip"])
def test_empty_restarted_master_is_never_a_sync_source(new_ip: bool) -> None:
    observed = empty_restart(new_ip)
    assert is_empty_restart(observed[0], observed)
    p = plan(observed, AT_0, POLICY)
    assert p.actions == (
        RecordMaster("rc-2", 2),
        SetLabel("rc-0", R),
        Promote("rc-2"),
        Demote("rc-0", "rc-2"),
        ReplicaOf("rc-1", "rc-2"),
        SetLabel("rc-2", M),
    )
    assert not [a for a in p.actions if isinstance(a, ReplicaOf | Demote) and a.master == "rc-0"]
    assert p.reason == "master rc-0 restarted empty while replicas hold data"


def test_empty_restarted_master_with_failover_disabled_waits_and_repoints_nobody() -> None:
    p = plan(empty_restart(True), AT_0, Policy(enable_auto_failover=False))
    assert "restarted empty" in only_wait(p)


def test_empty_restart_counts_the_downtime_when_ranking_links() -> None:
    observed = empty_restart(True)
    observed[0] = with_facts(observed[0], uptime_seconds=120)
    observed[1:] = [replica(i, 0, link_up=False, down_since=121) for i in (1, 2)]
    assert plan(observed, AT_0, POLICY).actions[0] == RecordMaster("rc-1", 2)


def test_a_master_whose_replicas_synced_its_empty_dataset_is_kept() -> None:
    new = "c" * 40
    observed = [
        master(0, keys=0, replid=new),
        replica(1, 0, keys=0, replid=new),
        replica(2, 0, keys=0, replid=new),
    ]
    assert not is_empty_restart(observed[0], observed)
    assert plan(observed, AT_0, POLICY) == Plan()


def test_a_master_with_no_keys_is_kept_when_no_replica_holds_keys() -> None:
    observed = [master(0, keys=0), replica(1, 0, keys=0, replid=OTHER_REPLID), replica(2, 0, keys=0)]
    assert not is_empty_restart(observed[0], observed)
    assert masters(simulate(plan(observed, AT_0, POLICY), observed, AT_0)[0]) == {"rc-0"}


def test_a_promoted_replica_is_not_mistaken_for_an_empty_restart() -> None:
    # rc-1 was promoted (its replid2 is the old lineage); a lagging replica of the old lineage has keys.
    new_master = master(1, keys=0, replid=OTHER_REPLID, replid2=REPLID)
    observed = [replica(0, 1, replid=REPLID, keys=3), new_master]
    assert not is_empty_restart(new_master, observed)


def test_bootstrap_without_status_promotes_a_replica_that_holds_data_not_an_empty_pod_0() -> None:
    observed = [
        fresh(0),
        replica(1, 0, offset=900, link_up=False, down_since=9),
        replica(2, 0, link_up=False),
    ]
    p = plan(observed, ClusterState(), POLICY)
    assert p.actions == (
        RecordMaster("rc-2", 1),
        SetLabel("rc-0", R),
        Promote("rc-2"),
        Demote("rc-0", "rc-2"),
        ReplicaOf("rc-1", "rc-2"),
        SetLabel("rc-2", M),
    )


def test_bootstrap_waits_while_a_pod_loads_its_dataset() -> None:
    observed = [fresh(0), replica(1, 0, loading=True), replica(2, 0, keys=0)]
    assert "load" in only_wait(plan(observed, ClusterState(), POLICY))


def test_a_handover_also_fences_a_stray_master_and_moves_the_old_masters_replicas_first() -> None:
    observed = [master(0, online=(1, 2)), replica(1, 0), replica(2, 0), master(3, keys=4, label="master")]
    p = plan(observed, ClusterState("rc-2", 2), POLICY)
    assert p.actions == (
        SetLabel("rc-0", R),
        SetLabel("rc-3", R),
        ReplicaOf("rc-1", "rc-2"),
        Switchover("rc-0", "rc-2"),
        Demote("rc-3", "rc-2"),
        SetLabel("rc-2", M),
    )


def fenced(i: int, *, keys: int = 0) -> NodeObservation:
    """A pod booted fenced: a replica of an address where nothing listens, link down, fresh replid."""
    base = replica(
        i, i, keys=keys, replid=f"{i}" * 40, link_up=False, master_ip="127.255.255.254", label="master"
    )
    return base


def test_a_recorded_master_restarted_fenced_and_empty_is_never_promoted_or_synced_from() -> None:
    observed = [
        fenced(0),
        replica(1, 0, offset=900, link_up=False, down_since=1),
        replica(2, 0, link_up=False, down_since=1),
    ]
    assert is_empty_restart(observed[0], observed)
    p = plan(observed, AT_0, POLICY)
    assert p.actions[0] == RecordMaster("rc-2", 2)
    assert Promote("rc-0") not in p.actions
    assert not [a for a in p.actions if isinstance(a, ReplicaOf | Demote) and a.master == "rc-0"]
    assert masters(simulate(p, observed, AT_0)[0]) == {"rc-2"}


def test_a_recorded_master_restarted_fenced_with_its_data_is_promoted_again() -> None:
    observed = [
        fenced(0, keys=10),
        replica(1, 0, link_up=False, down_since=1),
        replica(2, 0, link_up=False, down_since=1),
    ]
    assert not is_empty_restart(observed[0], observed)
    p = plan(observed, AT_0, POLICY)
    assert Promote("rc-0") in p.actions
    assert RecordMaster("rc-1", 2) not in p.actions


def test_a_recorded_master_still_replicating_from_the_old_one_is_not_an_empty_restart() -> None:
    observed = [master(1, keys=10), replica(0, 1, keys=0, replid=REPLID)]
    assert not is_empty_restart(observed[1], observed)
