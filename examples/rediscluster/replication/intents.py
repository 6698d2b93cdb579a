"""The day-2 intents (``api.intents``) as the replication engine answers them.

- :func:`intent_error`: why the intent annotations cannot be acted on (a malformed
  ``fenced-pods`` or ``hibernation``), which the children step reports as ``InvalidSpec``; pure;
- :func:`acknowledge_switchover`: the ``switchover-to`` annotation is removed once its pod is the
  serving master (Event ``SwitchoverDone``) or when it can never be (Event ``SwitchoverRefused``,
  naming why); the plan itself hands the master over (``decision.switchover_target``).
"""

from __future__ import annotations

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.intents import (
    SWITCHOVER_TO,
    InvalidIntent,
    fenced_pods,
    hibernation,
    switchover_to,
)
from examples.rediscluster.replication.decision import Look, switchover_refusal
from examples.rediscluster.replication.topology_types import Role
from pyctrl.client import Client, RawPatch
from pyctrl.client.patch import PatchType
from pyctrl.recorder import EventRecorder

__all__ = ["acknowledge_switchover", "intent_error"]


def intent_error(cluster: RedisCluster) -> str | None:
    """Why the ``fenced-pods`` or ``hibernation`` annotation cannot be read (None: both can)."""
    try:
        fenced_pods(cluster)
        hibernation(cluster)
    except InvalidIntent as exc:
        return str(exc)
    return None


async def acknowledge_switchover(
    client: Client, recorder: EventRecorder, cluster: RedisCluster, look: Look
) -> RedisCluster:
    """Remove a ``switchover-to`` annotation once its pod is the serving master (Event
    ``SwitchoverDone``) or when it can never be (Event ``SwitchoverRefused``, naming why); the
    cluster as stored after the patch (``cluster`` itself when there was nothing to remove)."""
    target = switchover_to(cluster)
    if target is None:
        return cluster
    refusal = switchover_refusal(cluster, look, target)
    node = next((n for n in look.observed.nodes if n.pod == target), None)
    done = look.recorded.current_master == target and node is not None and node.role is Role.MASTER
    if refusal is None and not done:
        return cluster
    if refusal is not None:
        recorder.event(cluster, "Warning", "SwitchoverRefused", f"switchover to {target}: {refusal}")
    else:
        recorder.event(cluster, "Normal", "SwitchoverDone", f"{target} is the master, as asked")
    patch = RawPatch(PatchType.MERGE, {"metadata": {"annotations": {SWITCHOVER_TO: None}}})
    stored: RedisCluster = await client.patch(cluster, patch)
    return stored
