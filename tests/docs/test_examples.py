"""Every example the guide shows runs here, as its page runs it (``python docs/examples/NAME.py``)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def run(name: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out.splitlines()


async def run_on(
    name: str, kubeconfig: Path, namespace: str, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    """Run the example's ``run(kubeconfig, namespace)`` on the session's control plane (not as
    ``__main__``, which would start a control plane of its own); its stdout lines."""
    module = runpy.run_path(str(EXAMPLES / name))
    await module["run"](str(kubeconfig), namespace)
    return capsys.readouterr().out.splitlines()


def test_the_workqueue_tour_shows_each_guarantee(capsys: pytest.CaptureFixture[str]) -> None:
    out = run("workqueue_tour.py", capsys)
    assert out == [
        "1. default/a added twice -> 1 queued",
        "2. added again while processing -> 0 queued",
        "   after done(default/a) -> 1 queued (exactly one more run)",
        "3. handed out first: default/live-change, then: default/from-initial-list",
        "4. add_after 10 s, 9.9 s later -> 0 queued; at 10 s -> 1 queued",
        "5. add_rate_limited, 5 ms later -> 1 queued; failures 2-4 wait 10 ms, 20 ms, 40 ms;"
        " after forget: 0 failures counted",
        "6. after shut_down, an add -> 0 queued",
    ]


def test_the_result_table_example_takes_each_outcome_through_its_queue_action(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = run("result_table.py", capsys)
    assert out[:5] == [
        "success        reconciled as: success",
        "requeue-after  reconciled as: requeue-after -> success",
        "requeue        reconciled as: requeue -> success",
        "error          reconciled as: error -> success",
        "terminal       reconciled as: terminal",
    ]
    # the counts are the process-wide registry's: this controller name is used by this example only
    assert out[5:] == [
        "controller_runtime_reconcile_total{result='success'} = 4",
        "controller_runtime_reconcile_total{result='requeue_after'} = 1",
        "controller_runtime_reconcile_total{result='requeue'} = 1",
        "controller_runtime_reconcile_total{result='error'} = 2",
        "controller_runtime_terminal_reconcile_errors_total = 1",
    ]


def test_the_redis_decisions_example_prints_bootstrap_wait_failover_and_switchover_plans(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = "\n".join(run("redis_decisions.py", capsys))
    bootstrap, rest = text.split("steady state:")
    assert "RecordMaster(pod='demo-0', epoch=1)" in bootstrap
    assert bootstrap.index("RecordMaster") < bootstrap.index("Promote(pod='demo-0')")
    steady, rest = rest.split("master unreachable for 2 s")
    assert "(converged: nothing to do)" in steady
    waiting, rest = rest.split("master unreachable for 6 s")
    assert "Wait(reason='master demo-0 unhealthy for 2.0s < down-after 5s')" in waiting
    failover, scale = rest.split("scale-in")
    # the replica with the highest offset is promoted, after the decision is recorded
    assert failover.index("RecordMaster(pod='demo-1', epoch=2)") < failover.index("Promote(pod='demo-1')")
    assert "Switchover(pod='demo-2', to='demo-0')" in scale
    assert "Promote" not in scale  # a planned handover, not a promotion


@pytest.mark.controlplane
async def test_the_split_client_example_reads_its_write_from_the_apiserver_then_from_the_cache(
    kubeconfig: Path, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    created, direct, cached = await run_on("split_client.py", kubeconfig, namespace, capsys)
    rv = created.rsplit(" ", 1)[1]
    assert direct == f"api_reader.get: resourceVersion {rv} (the apiserver)"
    assert cached.startswith(f"client.get: resourceVersion {rv} (the cache, once its watch event arrived:")


@pytest.mark.controlplane
async def test_the_leader_election_example_hands_over_on_release_and_after_a_lost_renew(
    kubeconfig: Path, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = await run_on("leader_election.py", kubeconfig, namespace, capsys)
    steps = [line.split("  ", 1)[1] for line in lines]
    assert steps == [
        "A is leader; the Lease holder is A",
        "B is leader: False (A's Lease has not expired on B's clock)",
        "A stopped and released the Lease; holder now (nobody)",
        "B is leader; the Lease holder is B",
        "B is cut off from the apiserver; C starts campaigning",
        f"B lost leadership: lease {namespace}/guide-example: no renewal for 3.0s",
        "C is leader; the Lease holder is C",
    ]
    # when B stopped leading and when C was elected, each taken as it happened: the old leader stops
    # before the new one starts, since the renew deadline (3 s) < the lease duration (4 s)
    times = [float(line.split("s  ", 1)[0].removeprefix("t=")) for line in lines]
    cut, lost, elected = times[4], times[5], times[6]
    assert cut <= lost < elected


@pytest.mark.controlplane
async def test_the_informer_example_sees_each_change_once_in_order_and_its_index_follows_updates(
    kubeconfig: Path, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_on("informer_events.py", kubeconfig, namespace, capsys) == [
        "synced: 0 objects cached",
        "index color=blue: apple, sky; color=red: 0 objects",
        "on_add apple color=red initial_list=False",
        "on_add sky color=blue initial_list=False",
        "on_update apple color red -> blue",
        "on_delete apple",
    ]
