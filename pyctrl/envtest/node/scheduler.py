"""Binding pending Pods to the local node (kube-scheduler's job, for a one-node cluster).

Guarantees:
- every Pod that has no ``spec.nodeName``, is not terminal or being deleted, and asks for the
  default scheduler (``schedulerName`` unset or ``default-scheduler``) is bound to this node
  through the ``pods/binding`` subresource (uid precondition), as soon as the watch shows it;
- a Pod whose ``nodeSelector`` does not match the node's labels is not bound; it gets
  ``PodScheduled=False`` (reason Unschedulable) instead;
- a failed binding is retried with back-off (0.5 s doubling to 10 s) while the Pod stays pending.
- Not considered: affinity / anti-affinity, taints and tolerations, topology spread, resources.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from pyctrl.envtest.node.kube import ApiError, Informer, Kube
from pyctrl.envtest.node.status import now_rfc3339

__all__ = ["Scheduler", "schedulable"]

log = logging.getLogger(__name__)

_PENDING_SELECTOR = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"


def schedulable(pod: Mapping[str, Any], node_labels: Mapping[str, str]) -> str | None:
    """None when ``pod`` may run on a node with ``node_labels``, else why not."""
    selector = pod.get("spec", {}).get("nodeSelector") or {}
    missing = {k: v for k, v in selector.items() if node_labels.get(k) != v}
    if missing:
        return f"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector ({missing})."
    return None


class Scheduler:
    def __init__(self, kube: Kube, node_name: str, node_labels: Mapping[str, str]) -> None:
        self.kube, self.node_name, self.node_labels = kube, node_name, node_labels
        self.informer = Informer(kube, "/api/v1/pods", self._changed, field_selector=_PENDING_SELECTOR)
        self._inflight: dict[str, asyncio.Task[None]] = {}

    async def run(self) -> None:
        await self.informer.run()

    def _changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            return
        meta, spec = new["metadata"], new.get("spec", {})
        if meta.get("deletionTimestamp") or spec.get("nodeName"):
            return
        if spec.get("schedulerName", "default-scheduler") != "default-scheduler":
            return
        uid = meta["uid"]
        if uid not in self._inflight:
            task = asyncio.create_task(self._schedule(new))
            self._inflight[uid] = task
            task.add_done_callback(lambda _: self._inflight.pop(uid, None))

    async def _schedule(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        reason = schedulable(pod, self.node_labels)
        if reason is not None:
            await self._unschedulable(pod, reason)
            return
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name},
        }
        delay = 0.5
        while uid in self.informer.store and not self.informer.store[uid]["spec"].get("nodeName"):
            try:
                await self.kube.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body=body)
                log.info("bound pod %s/%s to %s", ns, name, self.node_name)
                return
            except ApiError as exc:
                if exc.status in (404, 409):  # gone, or already bound / replaced
                    return
                log.warning("binding pod %s/%s failed: %s; retrying in %.1fs", ns, name, exc, delay)
            except (OSError, TimeoutError) as exc:
                log.warning("binding pod %s/%s failed: %s; retrying in %.1fs", ns, name, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def _unschedulable(self, pod: dict[str, Any], reason: str) -> None:
        meta = pod["metadata"]
        current = pod.get("status", {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" and c.get("message") == reason for c in current):
            return
        conditions = [c for c in current if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": reason,
                "lastTransitionTime": now_rfc3339(),
                "lastProbeTime": None,
            }
        )
        body = {"metadata": {"uid": meta["uid"]}, "status": {"conditions": conditions}}
        try:
            await self.kube.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", body)
        except (ApiError, OSError, TimeoutError) as exc:
            log.warning("pod %s/%s: recording Unschedulable failed: %s", meta["namespace"], meta["name"], exc)
