"""Volume expansion: a raised ``spec.storageSize`` grows each pod's PersistentVolumeClaim in place.

Mirrors what a user does by hand for a StatefulSet (Kubernetes has no StatefulSet volume
expansion: ``volumeClaimTemplates`` are immutable): patch each claim's
``spec.resources.requests.storage``; the external resizer of the claim's StorageClass grows the
volume and the kubelet (or the resizer) reports the new size in the claim's ``status.capacity``.

Guarantees:

- the StatefulSet keeps the ``volumeClaimTemplates`` it was created with (:func:`pin_claim_templates`:
  the apiserver refuses any change of them), so a new ``storageSize`` never changes the pod
  template and restarts no pod; pods added later get a claim of the first size, grown like the
  others;
- every claim is checked before any is patched: when a claim's StorageClass does not set
  ``allowVolumeExpansion`` (or the claim has no StorageClass), nothing is patched and the
  condition ``VolumesResized`` is False with reason ``ExpansionNotSupported``, its message naming
  ``spec.storageSize`` and the class; the cluster keeps serving;
- otherwise the Bound claims below the size are patched (Event ``VolumeExpansionStarted``; a
  patch the apiserver refuses is ``ExpansionRefused`` with its message);
  ``VolumesResized`` is False ``Resizing`` until every claim's ``status.capacity`` reports the
  size, then True ``AsRequested``. Lowering ``storageSize`` is refused by the apiserver itself
  (a CEL transition rule on the field), so claims are never asked to shrink;
- a converged cluster costs no write: a claim already at the size is left alone.
"""

from __future__ import annotations

from typing import Any

from examples.rediscluster.api import RedisCluster, RedisClusterStatus
from examples.rediscluster.shared.resources import parse_quantity, selector_labels
from examples.rediscluster.shared.status import condition
from pyctrl.client import Client, Reader, StatefulSet
from pyctrl.client.errors import Forbidden, Invalid, NotFound
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import Condition, PersistentVolumeClaim
from pyctrl.client.patch import PatchType, RawPatch
from pyctrl.client.scheme import to_dict
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = ["RESIZED", "STORAGE_CLASS", "VolumeExpander", "pin_claim_templates"]

log = get_logger("rediscluster")

RESIZED = "VolumesResized"
STORAGE_CLASS = GroupVersionKind("storage.k8s.io", "v1", "StorageClass")


async def pin_claim_templates(client: Client, children: list[dict[str, Any]]) -> None:
    """Give the desired StatefulSet the live one's ``volumeClaimTemplates`` (immutable)."""
    for child in children:
        if child["kind"] != "StatefulSet":
            continue
        meta = child["metadata"]
        try:
            live = await client.get(StatefulSet, meta["name"], namespace=meta["namespace"])
        except NotFound:
            return
        templates = to_dict(live).get("spec", {}).get("volumeClaimTemplates")
        if templates and "volumeClaimTemplates" in child["spec"]:
            child["spec"]["volumeClaimTemplates"] = [
                {"metadata": {"name": t["metadata"]["name"]}, "spec": t["spec"]} for t in templates
            ]


def _storage(requests: dict[str, str] | None) -> float:
    return parse_quantity((requests or {}).get("storage", "0"))


def _requests(claim: PersistentVolumeClaim) -> dict[str, str] | None:
    resources = claim.spec.resources if claim.spec else None
    return resources.requests if resources else None


class VolumeExpander:
    """Grows the claims of a cluster to ``spec.storageSize`` (module docstring)."""

    def __init__(self, client: Client, api_reader: Reader, recorder: EventRecorder) -> None:
        self.client = client
        self.api_reader = api_reader
        self.recorder = recorder

    async def expand(self, cluster: RedisCluster, now: str) -> Condition | None:
        """Patch what needs growing; return the ``VolumesResized`` condition (None without persistence)."""
        if not cluster.spec.enable_persistence:
            return None
        size = cluster.spec.storage_size
        want = parse_quantity(size)
        listed = await self.client.list(
            PersistentVolumeClaim, namespace=cluster.namespace, labels=selector_labels(cluster)
        )
        claims = [c for c in listed if c.name.startswith(f"data-{cluster.name}-")]
        # a claim still Pending (a pod just added) is grown once Bound: only then may it be resized
        small = [
            c for c in claims if _storage(_requests(c)) < want and c.status and c.status.phase == "Bound"
        ]
        old = cluster.status or RedisClusterStatus()
        for claim in small:
            why = await self._not_expandable(claim)
            if why is not None:
                message = f"spec.storageSize {size}: {why}; the volumes keep their size"
                return condition(old, RESIZED, False, "ExpansionNotSupported", message, now=now)
        for claim in small:
            patch = {"spec": {"resources": {"requests": {"storage": size}}}}
            try:
                await self.client.patch(claim, RawPatch(PatchType.MERGE, patch))
            except (Invalid, Forbidden) as exc:  # the apiserver's own checks (e.g. its resize admission)
                message = f"spec.storageSize {size}: resizing {claim.name} was refused: {exc}"
                return condition(old, RESIZED, False, "ExpansionRefused", message, now=now)
            log.info("Expanding a volume", cluster=cluster.name, claim=claim.name, size=size)
        if small:
            names = ", ".join(c.name for c in small)
            self.recorder.event(cluster, "Normal", "VolumeExpansionStarted", f"growing {names} to {size}")
        pending = [c.name for c in claims if _storage(c.status.capacity if c.status else None) < want]
        if pending:
            message = f"spec.storageSize {size}: waiting for {', '.join(pending)} to report it"
            return condition(old, RESIZED, False, "Resizing", message, now=now)
        message = f"every volume has spec.storageSize {size}"
        return condition(old, RESIZED, True, "AsRequested", message, now=now)

    async def _not_expandable(self, claim: PersistentVolumeClaim) -> str | None:
        name = claim.spec.storage_class_name if claim.spec else None
        if not name:
            return f"PersistentVolumeClaim {claim.name} has no StorageClass, so it cannot be expanded"
        try:
            storage_class = await self.api_reader.get(STORAGE_CLASS, name)
        except NotFound:
            return f"StorageClass {name} of {claim.name} does not exist"
        if not to_dict(storage_class).get("allowVolumeExpansion"):
            return f"StorageClass {name} does not allow volume expansion (allowVolumeExpansion is not true)"
        return None
