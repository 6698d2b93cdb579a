"""How long a master's pod counts as NotReady (``shared.pods.not_ready_for``), from the pod's status."""

from __future__ import annotations

import datetime

from examples.rediscluster.shared.pods import not_ready_for
from pyctrl.client import Pod


def _ago(seconds: float) -> str:
    then = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds)
    return then.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(*, ready: bool, ready_changed: float, started: float | None) -> Pod:
    """A pod whose Ready condition last changed ``ready_changed`` s ago and whose redis container
    runs since ``started`` s ago (None: not running)."""
    state = {"running": {"startedAt": _ago(started)}} if started is not None else {"waiting": {}}
    return Pod.model_validate(
        {
            "metadata": {"name": "rc-0", "namespace": "ns"},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": str(ready), "lastTransitionTime": _ago(ready_changed)}
                ],
                "containerStatuses": [{"name": "redis", "ready": ready, "state": state}],
            },
        }
    )


def test_a_pod_that_turned_not_ready_while_its_redis_ran_counts_from_that_moment() -> None:
    assert 9 <= not_ready_for(pod(ready=False, ready_changed=10, started=60)) <= 12


def test_a_ready_pod_counts_nothing() -> None:
    assert not_ready_for(pod(ready=True, ready_changed=10, started=60)) == 0.0


def test_a_pod_not_ready_yet_since_its_container_started_counts_nothing() -> None:
    # NotReady since its creation 10 s ago, Redis running for 2 s: a starting master (bootstrap)
    # or a restarted one, not a failing one — the prober's PINGs decide whether it answers
    assert not_ready_for(pod(ready=False, ready_changed=10, started=2)) == 0.0
    assert not_ready_for(pod(ready=False, ready_changed=10, started=None)) == 0.0
