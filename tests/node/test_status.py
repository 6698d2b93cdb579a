"""Pod phase and conditions computed from container statuses, as the kubelet does."""

from __future__ import annotations

from typing import Any

import pytest

from pyctrl.envtest.node.status import pod_phase, pod_status


def running(name: str = "c", ready: bool = True) -> dict[str, Any]:
    return {"name": name, "ready": ready, "state": {"running": {"startedAt": "t"}}, "lastState": {}}


def exited(code: int, name: str = "c") -> dict[str, Any]:
    return {"name": name, "ready": False, "state": {"terminated": {"exitCode": code}}, "lastState": {}}


def waiting(reason: str, name: str = "c", restarted: bool = False) -> dict[str, Any]:
    last = {"terminated": {"exitCode": 1}} if restarted else {}
    return {"name": name, "ready": False, "state": {"waiting": {"reason": reason}}, "lastState": last}


@pytest.mark.parametrize(
    ("policy", "statuses", "phase"),
    [
        ("Always", [waiting("ContainerCreating")], "Pending"),
        ("Always", [waiting("ImageNotMapped"), running()], "Pending"),
        ("Always", [running(), running("d")], "Running"),
        ("Always", [waiting("CrashLoopBackOff", restarted=True)], "Running"),
        ("Always", [exited(0)], "Running"),
        ("OnFailure", [exited(0), exited(0, "d")], "Succeeded"),
        ("OnFailure", [exited(1)], "Running"),
        ("Never", [exited(0), exited(2, "d")], "Failed"),
        ("Never", [exited(0)], "Succeeded"),
        ("Never", [exited(0), running("d")], "Running"),
    ],
)
def test_phase_follows_the_kubelet(policy: str, statuses: list[dict[str, Any]], phase: str) -> None:
    assert pod_phase(policy, [], statuses) == phase


def test_pending_until_init_containers_succeed_and_failed_when_one_fails_under_never() -> None:
    assert pod_phase("Always", [running("init")], [waiting("PodInitializing")]) == "Pending"
    assert pod_phase("Always", [exited(1, "init")], [waiting("PodInitializing")]) == "Pending"
    assert pod_phase("Never", [exited(1, "init")], [waiting("PodInitializing")]) == "Failed"
    assert pod_phase("Always", [exited(0, "init")], [running()]) == "Running"


def test_a_deleted_pod_whose_containers_stopped_is_terminal() -> None:
    assert pod_phase("Always", [], [exited(0), exited(0, "d")], terminating=True) == "Succeeded"
    assert pod_phase("Always", [], [exited(0), exited(137, "d")], terminating=True) == "Failed"
    assert pod_phase("Always", [], [waiting("ImageNotMapped")], terminating=True) == "Failed"


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def make(pod: dict[str, Any], statuses: list[dict[str, Any]], now: str = "T1", **kw: Any) -> dict[str, Any]:
    return pod_status(
        pod,
        init_statuses=kw.pop("init_statuses", []),
        statuses=statuses,
        sandbox_ready=kw.pop("sandbox_ready", True),
        pod_ip="127.0.1.1",
        host_ip="127.0.0.1",
        start_time="T0",
        now=now,
        **kw,
    )


def test_ready_pod_has_all_kubelet_conditions_true_and_its_addresses() -> None:
    status = make({"spec": {}}, [running()])
    assert {t: c["status"] for t, c in conditions(status).items()} == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert status["phase"] == "Running"
    assert status["podIP"] == "127.0.1.1"
    assert status["podIPs"] == [{"ip": "127.0.1.1"}]
    assert status["hostIPs"] == [{"ip": "127.0.0.1"}]
    assert status["startTime"] == "T0"


def test_an_unready_container_makes_the_pod_not_ready_naming_it() -> None:
    cond = conditions(make({"spec": {}}, [running("a"), running("b", ready=False)]))
    assert cond["Ready"]["status"] == "False"
    assert cond["Ready"]["message"] == "containers with unready status: [b]"
    assert cond["ContainersReady"]["reason"] == "ContainersNotReady"


def test_last_transition_time_changes_only_when_the_status_changes() -> None:
    first = make({"spec": {}}, [running(ready=False)], now="T1")
    second = make({"spec": {}, "status": first}, [running(ready=False)], now="T2")
    assert conditions(second)["Ready"]["lastTransitionTime"] == "T1"
    third = make({"spec": {}, "status": second}, [running()], now="T3")
    assert conditions(third)["Ready"]["lastTransitionTime"] == "T3"
    assert conditions(third)["Initialized"]["lastTransitionTime"] == "T1"


def test_readiness_gates_must_be_true_and_foreign_conditions_are_kept() -> None:
    gate = {"type": "example.com/gate", "status": "False"}
    pod = {
        "spec": {"readinessGates": [{"conditionType": "example.com/gate"}]},
        "status": {"conditions": [gate]},
    }
    status = make(pod, [running()])
    assert conditions(status)["Ready"]["status"] == "False"
    assert conditions(status)["Ready"]["reason"] == "ReadinessGatesNotReady"
    assert conditions(status)["ContainersReady"]["status"] == "True"
    assert conditions(status)["example.com/gate"] == gate
    pod["status"] = {"conditions": [dict(gate, status="True")]}
    assert conditions(make(pod, [running()]))["Ready"]["status"] == "True"


def test_init_and_sandbox_state_show_in_initialized_and_ready_to_start_containers() -> None:
    status = make(
        {"spec": {}}, [waiting("PodInitializing")], init_statuses=[running("init")], sandbox_ready=False
    )
    cond = conditions(status)
    assert cond["PodReadyToStartContainers"]["status"] == "False"
    assert cond["Initialized"]["status"] == "False"
    assert cond["Initialized"]["message"] == "containers with incomplete status: [init]"
    assert status["initContainerStatuses"] == [running("init")]


def test_scheduled_condition_from_the_binding_is_kept() -> None:
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": "T0", "lastProbeTime": None}
    status = make({"spec": {}, "status": {"conditions": [scheduled]}}, [running()])
    assert conditions(status)["PodScheduled"] == scheduled
