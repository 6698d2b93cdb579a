"""Facts of a pod from its Kubernetes object alone (no I/O): its StatefulSet ordinal, readiness and
how long it has been NotReady; used by both modes' observations and the node-loss guard.
"""

from __future__ import annotations

import datetime
from typing import TypedDict

from examples.rediscluster.shared.resources import REDIS_CONTAINER, REDIS_PORT
from pyctrl.client import Pod

__all__ = ["PodFacts", "not_ready_for", "ordinal", "pod_condition", "pod_facts", "pod_ready", "seconds_since"]


def ordinal(pod: Pod) -> int:
    """The StatefulSet ordinal of ``pod`` (-1 for a name without one)."""
    tail = pod.name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def pod_condition(pod: Pod, type_: str) -> tuple[str | None, str | None, str | None]:
    """(status, lastTransitionTime, message) of the pod's condition ``type_``."""
    for c in (pod.status.conditions if pod.status else None) or []:
        if c.type == type_:
            return c.status, c.last_transition_time, c.message
    return None, None, None


def pod_ready(pod: Pod) -> tuple[bool, str | None]:
    """(Ready, lastTransitionTime of the Ready condition)."""
    status, since, _ = pod_condition(pod, "Ready")
    return status == "True", since


def not_ready_for(pod: Pod) -> float:
    """Seconds ``pod`` has been NotReady since it was Ready in its current container run.

    0 while it is Ready, and 0 while it has not been Ready yet since its Redis container (re)started:
    a Redis that is starting — a master just chosen at bootstrap, a restarted one — is not a failing
    one (the prober's PINGs say whether it answers). Counting from the pod's creation instead made
    a freshly promoted master whose readiness probe had not passed yet look down for longer than
    ``downAfterMilliseconds``, and fail over at once.
    """
    ready, since = pod_ready(pod)
    statuses = (pod.status.container_statuses if pod.status else None) or []
    running = next((c.state or {} for c in statuses if c.name == REDIS_CONTAINER), {}).get("running")
    started = running.get("startedAt") if isinstance(running, dict) else None
    if ready or not since or not started or _time(since) <= _time(started):
        return 0.0
    return seconds_since(since)


def _time(rfc3339: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))


def seconds_since(rfc3339: str | None) -> float:
    """Seconds from an RFC 3339 time to now (0 for None or a time in the future)."""
    if not rfc3339:
        return 0.0
    return max(0.0, (datetime.datetime.now(datetime.UTC) - _time(rfc3339)).total_seconds())


class PodFacts(TypedDict):
    """What both modes' observations say of a pod before its Redis is asked anything."""

    pod: str
    ordinal: int
    ip: str | None
    port: int
    pod_ready: bool


def pod_facts(pod: Pod) -> PodFacts:
    """The pod's name, ordinal, IP (None before it has one), Redis port and readiness."""
    ip = pod.status.pod_ip if pod.status else None
    return PodFacts(pod=pod.name, ordinal=ordinal(pod), ip=ip, port=REDIS_PORT, pod_ready=pod_ready(pod)[0])
