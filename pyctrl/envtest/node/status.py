"""Pod status from container states (kubelet ``generateAPIPodStatus`` / ``getPhase`` / ``status``).

Pure functions: given the container statuses the runtime reports, compute ``status.phase`` and the
Pod conditions the kubelet owns.

Guarantees:
- phase follows the kubelet: Pending while an init container has not succeeded or a container has
  never started; Running while one runs (or, with restartPolicy Always / OnFailure-after-failure, is
  being restarted); Succeeded / Failed once all have stopped and none will restart; a Pod being
  deleted whose containers all stopped is terminal (Succeeded only if all exited 0);
- conditions PodReadyToStartContainers, Initialized, ContainersReady, Ready and PodScheduled are
  always present; Ready also needs every ``readinessGates`` condition True;
- ``lastTransitionTime`` changes only when a condition's status changes;
- conditions the kubelet does not own (readiness gates, DisruptionTarget, ...) are kept as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = ["KUBELET_CONDITIONS", "now_rfc3339", "pod_phase", "pod_status"]

KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")

Status = Mapping[str, Any]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _exit_code(state: Mapping[str, Any]) -> int | None:
    terminated = state.get("terminated")
    return None if terminated is None else int(terminated.get("exitCode", 0))


def _init_done(init_statuses: Sequence[Status]) -> tuple[bool, bool, list[str]]:
    """(all succeeded, one failed for good under Never, names not yet done)."""
    pending = [s["name"] for s in init_statuses if _exit_code(s.get("state", {})) != 0]
    failed = any((_exit_code(s.get("state", {})) or 0) != 0 for s in init_statuses)
    return not pending, failed, pending


def pod_phase(
    restart_policy: str,
    init_statuses: Sequence[Status],
    statuses: Sequence[Status],
    *,
    terminating: bool = False,
) -> str:
    """The Pod phase, as the kubelet's ``getPhase`` computes it."""
    done, init_failed, _ = _init_done(init_statuses)
    if not done:
        return "Failed" if init_failed and (restart_policy == "Never" or terminating) else "Pending"
    waiting = running = stopped = succeeded = 0
    for status in statuses:
        state = status.get("state", {})
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += _exit_code(state) == 0
        elif terminating or "terminated" in status.get("lastState", {}):
            stopped += 1
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if not stopped:
        return "Pending"
    if terminating:
        return "Succeeded" if stopped == succeeded else "Failed"
    if restart_policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    return "Failed" if restart_policy == "Never" else "Running"


def _condition(kind: str, ok: bool, reason: str = "", message: str = "") -> dict[str, Any]:
    cond: dict[str, Any] = {"type": kind, "status": "True" if ok else "False"}
    if not ok and reason:
        cond["reason"] = reason
    if not ok and message:
        cond["message"] = message
    return cond


def pod_status(
    pod: Mapping[str, Any],
    *,
    init_statuses: Sequence[Status],
    statuses: Sequence[Status],
    sandbox_ready: bool,
    pod_ip: str | None,
    host_ip: str,
    start_time: str,
    terminating: bool = False,
    now: str | None = None,
) -> dict[str, Any]:
    """The full ``status`` the node writes for ``pod`` (a JSON merge patch body's ``status``)."""
    now = now or now_rfc3339()
    spec = pod.get("spec", {})
    old = pod.get("status", {})
    old_conditions = {c.get("type"): c for c in old.get("conditions") or []}
    phase = pod_phase(spec.get("restartPolicy", "Always"), init_statuses, statuses, terminating=terminating)
    terminal = phase in ("Succeeded", "Failed")
    initialized, _, pending_init = _init_done(init_statuses)
    unready = [s["name"] for s in statuses if not s.get("ready")]
    if terminal:
        containers_ready = _condition("ContainersReady", False, "PodCompleted")
    elif not initialized:
        containers_ready = _condition(
            "ContainersReady", False, "ContainersNotReady", "containers not initialized"
        )
    else:
        containers_ready = _condition(
            "ContainersReady",
            not unready,
            "ContainersNotReady",
            f"containers with unready status: [{' '.join(unready)}]",
        )
    ready = dict(containers_ready, type="Ready")
    if ready["status"] == "True":
        for gate in spec.get("readinessGates") or []:
            gate_type = gate.get("conditionType")
            gate_status = old_conditions.get(gate_type, {}).get("status")
            if gate_status != "True":
                ready = _condition(
                    "Ready",
                    False,
                    "ReadinessGatesNotReady",
                    f'corresponding condition of pod readiness gate "{gate_type}" does not exist.'
                    if gate_status is None
                    else f'the status of pod readiness gate "{gate_type}" is not "True", but {gate_status}',
                )
                break
    scheduled = old_conditions.get("PodScheduled") or _condition("PodScheduled", True)
    conditions = [
        _condition("PodReadyToStartContainers", sandbox_ready),
        _condition(
            "Initialized",
            initialized,
            "ContainersNotInitialized",
            f"containers with incomplete status: [{' '.join(pending_init)}]",
        ),
        ready,
        containers_ready,
        {k: v for k, v in scheduled.items() if k != "lastTransitionTime"},
    ]
    for cond in conditions:
        previous = old_conditions.get(cond["type"], {})
        same = previous.get("status") == cond["status"] and previous.get("lastTransitionTime")
        cond["lastTransitionTime"] = previous["lastTransitionTime"] if same else now
        cond["lastProbeTime"] = None
    conditions += [c for t, c in old_conditions.items() if t not in KUBELET_CONDITIONS]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "containerStatuses": list(statuses),
    }
    if init_statuses:
        status["initContainerStatuses"] = list(init_statuses)
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    return status
