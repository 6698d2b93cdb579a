"""Pods on a lost node: force-deleted (opt-in) so the StatefulSet recreates them on a live node.

On a real cluster a StatefulSet pod on a node that stopped reporting stays (Terminating, once
evicted) until the kubelet confirms it stopped or someone force-deletes it: the StatefulSet never
runs two pods of one identity. The master on such a node fails over like any crash (the prober's
down-after window); what stays lost is the *pod*, and with it a replica. With
``spec.nodeLoss.forceDeletePods`` the operator force-deletes it once both signals agree for
``afterSeconds``:

- the node's Ready condition has been ``Unknown`` (kube-controller-manager's node lifecycle
  controller: no heartbeat for its grace period; also tainted ``node.kubernetes.io/unreachable``)
  that long, by its ``lastTransitionTime``; a node that reports ``Ready=False`` is still talking
  and is left alone;
- the pod's Redis has given the operator's prober no valid reply that long.

The delete carries the pod's uid as a precondition (a recreated pod of the same name is never
hit) and is an Event ``PodForceDeleted``. The ``node.kubernetes.io/out-of-service`` taint (an
administrator's confirmation, Kubernetes' non-graceful node shutdown) needs nothing from the
operator: kube-controller-manager then evicts and force-deletes the pods itself.

``Node`` here is the small typed view of core/v1 Node this module reads (conditions, taints).
"""

from __future__ import annotations

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.replication.observe import Observed
from examples.rediscluster.replication.prober import HealthProber
from examples.rediscluster.shared.pods import seconds_since
from pyctrl.client import Client, Preconditions
from pyctrl.client.errors import Conflict, NotFound
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import KubeModel, KubeObject
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = ["Node", "NodeLossGuard", "unreachable_for"]

log = get_logger("rediscluster")


class NodeCondition(KubeModel):
    type: str
    status: str
    last_transition_time: str | None = None


class NodeStatus(KubeModel):
    conditions: list[NodeCondition] | None = None


class Node(KubeObject):
    """core/v1 Node, the fields the operator reads."""

    gvk = GroupVersionKind("", "v1", "Node")
    status: NodeStatus | None = None


def unreachable_for(node: Node) -> float | None:
    """Seconds the node's Ready condition has been Unknown; None while it is True or False."""
    for c in (node.status.conditions if node.status else None) or []:
        if c.type == "Ready":
            return seconds_since(c.last_transition_time) if c.status == "Unknown" else None
    return None


class NodeLossGuard:
    """Force-deletes a cluster's pods on lost nodes when its spec asks for it."""

    def __init__(self, client: Client, recorder: EventRecorder, prober: HealthProber) -> None:
        self.client = client
        self.recorder = recorder
        self.prober = prober

    async def recover(self, cluster: RedisCluster, observed: Observed) -> list[str]:
        """Force-delete the pods the module docstring describes; return their names."""
        policy = cluster.spec.node_loss
        if not policy.force_delete_pods:
            return []
        deleted = []
        for name, pod in sorted(observed.pods.items()):
            node_name = pod.spec.node_name if pod.spec else None
            if not node_name:
                continue
            try:
                node = await self.client.get(Node, node_name)
            except NotFound:  # pods of a deleted Node are kube-controller-manager's pod GC's
                continue
            lost = unreachable_for(node)
            silent = self.prober.unhealthy_for((cluster.namespace, cluster.name), name)
            if lost is None or lost < policy.after_seconds or silent < policy.after_seconds:
                continue
            try:
                await self.client.delete(
                    pod, grace_period_seconds=0, preconditions=Preconditions(uid=pod.metadata.uid)
                )
            except (NotFound, Conflict):
                continue  # already gone, or already replaced
            message = f"force-deleted pod {name}: node {node_name} unreachable for {lost:.0f}s"
            self.recorder.event(cluster, "Warning", "PodForceDeleted", message)
            log.info("Force-deleted a pod on a lost node", cluster=cluster.name, pod=name, node=node_name)
            deleted.append(name)
        return deleted
