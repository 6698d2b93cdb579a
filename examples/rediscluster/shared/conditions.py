"""Status conditions (``metav1.Condition``) of a RedisCluster, written the same way by every step.

Mirrors apimachinery's ``meta.SetStatusCondition``: ``lastTransitionTime`` moves only when the
condition's status changes.
"""

from __future__ import annotations

from examples.rediscluster.api import RedisClusterStatus
from pyctrl.client.objects import Condition

__all__ = ["condition"]


def condition(
    old: RedisClusterStatus, type_: str, status: bool, reason: str, message: str, *, now: str
) -> Condition:
    """The condition ``type_`` as it should be now; its ``lastTransitionTime`` kept from ``old``
    while its status does not change (so a converged status stays byte-for-byte the same)."""
    value = "True" if status else "False"
    prev = next((c for c in old.conditions if c.type == type_), None)
    since = prev.last_transition_time if prev is not None and prev.status == value else now
    return Condition(type=type_, status=value, reason=reason, message=message, last_transition_time=since)
