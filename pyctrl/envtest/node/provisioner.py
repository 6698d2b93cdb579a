"""A local volume provisioner (in the role of an external provisioner such as
``rancher/local-path-provisioner``), so PersistentVolumeClaims become Bound without a cloud.

Guarantees:
- for each Pending claim without a volume, one PersistentVolume ``pvc-<claim uid>`` is created: a
  hostPath under ``<state dir>/volumes/pvc-<claim uid>``, the claim's requested capacity, access
  modes and storageClassName (``""`` when the claim names none), volumeMode Filesystem,
  reclaim policy Delete, pre-bound to the claim (``claimRef`` with uid) and annotated
  ``pv.kubernetes.io/provisioned-by: pyctrl.dev/local-node``; kube-controller-manager's
  PV binder then binds the two (claims using a StorageClass whose provisioner is another one, or
  ``volumeMode: Block``, are left alone);
- data lives in the volume's directory, so it survives container restarts and Pod deletion and
  recreation, until the claim is deleted;
- when a provisioned volume is Released (its claim is gone) it is deleted together with its
  directory; a deleted provisioned volume's directory is removed as well;
- with ``provision=False`` (a second node on the same control plane) nothing is created or
  deleted; the claims and volumes are only watched;
- ``claim_path`` tells the kubelet side where a bound claim's data is;
- expansion (in the roles of kubernetes-csi's external-resizer and the kubelet's filesystem
  resize, which report the new size in two steps): when a Bound claim of a volume this node
  provisioned asks for more storage than its ``status.capacity`` (the apiserver admits that only
  when the claim's StorageClass sets ``allowVolumeExpansion``), the volume's ``spec.capacity`` is
  raised, then the claim's status gets the new ``capacity`` and ``allocatedResources`` (a
  directory has no size to grow, so both steps are done at once), and ``kubectl get pvc`` shows
  it. Claims never shrink (the apiserver refuses a lower request).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

from pyctrl.envtest.node.envvars import parse_quantity
from pyctrl.envtest.node.kube import ApiError, Informer, Kube

__all__ = ["PROVISIONER_NAME", "Provisioner"]

log = logging.getLogger(__name__)

PROVISIONER_NAME = "pyctrl.dev/local-node"
_ANNOTATION = "pv.kubernetes.io/provisioned-by"


class Provisioner:
    def __init__(
        self, kube: Kube, volumes_dir: Path, *, provision: bool = True, on_claims_changed: Any = None
    ) -> None:
        self.kube = kube
        self.provision = provision
        self.volumes_dir = volumes_dir
        self.claims = Informer(kube, "/api/v1/persistentvolumeclaims", self._claim_changed)
        self.volumes = Informer(kube, "/api/v1/persistentvolumes", self._volume_changed)
        self._on_claims_changed = on_claims_changed
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending: set[str] = set()
        self._resizing: set[str] = set()  # uids of claims being expanded

    async def run(self) -> None:
        await asyncio.gather(self.claims.run(), self.volumes.run())

    @property
    def synced(self) -> bool:
        return self.claims.synced.is_set() and self.volumes.synced.is_set()

    def claim_path(self, namespace: str, name: str) -> str | None:
        """Host directory of claim ``namespace/name`` once it is Bound to a volume with a path."""
        claim = next(
            (
                c
                for c in self.claims.store.values()
                if c["metadata"]["namespace"] == namespace and c["metadata"]["name"] == name
            ),
            None,
        )
        if claim is None or claim.get("status", {}).get("phase") != "Bound":
            return None
        volume_name = claim.get("spec", {}).get("volumeName")
        volume = next((v for v in self.volumes.store.values() if v["metadata"]["name"] == volume_name), None)
        if volume is None:
            return None
        spec = volume.get("spec", {})
        path = (spec.get("hostPath") or spec.get("local") or {}).get("path")
        return str(path) if path else None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _claim_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if self._on_claims_changed is not None:
            self._on_claims_changed()
        if not self.provision or new is None or new["metadata"].get("deletionTimestamp"):
            return
        spec = new.get("spec", {})
        if self._resize_wanted(new):
            self._spawn(self._expand(new))
            return
        if new.get("status", {}).get("phase", "Pending") != "Pending" or spec.get("volumeName"):
            return
        if spec.get("volumeMode", "Filesystem") != "Filesystem" or spec.get("dataSource"):
            return
        wanted = new["metadata"].get("annotations", {}).get("volume.kubernetes.io/storage-provisioner")
        if wanted not in (None, PROVISIONER_NAME):
            return
        uid = new["metadata"]["uid"]
        if uid not in self._pending:
            self._pending.add(uid)
            self._spawn(self._provision(new))

    def _volume_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if self._on_claims_changed is not None:
            self._on_claims_changed()
        obj = new or old
        if (
            not self.provision
            or obj is None
            or obj["metadata"].get("annotations", {}).get(_ANNOTATION) != PROVISIONER_NAME
        ):
            return
        if new is None:
            self._remove_dir(obj)
        elif new.get("status", {}).get("phase") in ("Released", "Failed") and not new["metadata"].get(
            "deletionTimestamp"
        ):
            self._spawn(self._delete(new))

    async def _provision(self, claim: dict[str, Any]) -> None:
        meta, spec = claim["metadata"], claim.get("spec", {})
        name = f"pvc-{meta['uid']}"
        path = self.volumes_dir / name
        path.mkdir(parents=True, exist_ok=True)
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {_ANNOTATION: PROVISIONER_NAME}},
            "spec": {
                "capacity": {"storage": spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": spec.get("storageClassName") or "",
                "volumeMode": "Filesystem",
                "hostPath": {"path": str(path), "type": "Directory"},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        try:
            await self.kube.request("POST", "/api/v1/persistentvolumes", body=volume)
            log.info("provisioned %s for claim %s/%s", name, meta["namespace"], meta["name"])
        except ApiError as exc:
            if exc.code != 409:
                log.warning(
                    "provisioning %s for %s/%s failed: %s", name, meta["namespace"], meta["name"], exc
                )
                self._pending.discard(meta["uid"])
        except (OSError, TimeoutError) as exc:
            log.warning("provisioning %s failed: %s", name, exc)
            self._pending.discard(meta["uid"])

    def _resize_wanted(self, claim: dict[str, Any]) -> str | None:
        """The size a Bound claim of one of our volumes asks for beyond its capacity, if it does."""
        status, spec = claim.get("status", {}), claim.get("spec", {})
        if status.get("phase") != "Bound" or not spec.get("volumeName"):
            return None
        volume = next(
            (v for v in self.volumes.store.values() if v["metadata"]["name"] == spec["volumeName"]), None
        )
        if volume is None or volume["metadata"].get("annotations", {}).get(_ANNOTATION) != PROVISIONER_NAME:
            return None
        wanted = spec.get("resources", {}).get("requests", {}).get("storage")
        have = status.get("capacity", {}).get("storage")
        if wanted is None or have is None or parse_quantity(wanted) <= parse_quantity(have):
            return None
        return str(wanted)

    async def _expand(self, claim: dict[str, Any]) -> None:
        meta = claim["metadata"]
        size = self._resize_wanted(claim)
        if size is None or meta["uid"] in self._resizing:
            return
        self._resizing.add(meta["uid"])
        where = f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}"
        try:
            await self.kube.patch(
                f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}",
                {"spec": {"capacity": {"storage": size}}},
            )
            status = {"capacity": {"storage": size}, "allocatedResources": {"storage": size}}
            await self.kube.patch(f"{where}/status", {"status": status})
            log.info("expanded claim %s/%s to %s", meta["namespace"], meta["name"], size)
        except ApiError as exc:
            log.warning("expanding %s/%s failed: %s", meta["namespace"], meta["name"], exc)
        except (OSError, TimeoutError) as exc:
            log.warning("expanding %s/%s failed: %s", meta["namespace"], meta["name"], exc)
        finally:
            self._resizing.discard(meta["uid"])

    async def _delete(self, volume: dict[str, Any]) -> None:
        name = volume["metadata"]["name"]
        try:
            await self.kube.request("DELETE", f"/api/v1/persistentvolumes/{name}")
            log.info("deleted released volume %s", name)
        except ApiError as exc:
            if exc.code != 404:
                log.warning("deleting released volume %s failed: %s", name, exc)
        except (OSError, TimeoutError) as exc:
            log.warning("deleting released volume %s failed: %s", name, exc)
        self._remove_dir(volume)

    def _remove_dir(self, volume: dict[str, Any]) -> None:
        path = Path((volume.get("spec", {}).get("hostPath") or {}).get("path", ""))
        if path.parent == self.volumes_dir and path.name.startswith("pvc-"):
            shutil.rmtree(path, ignore_errors=True)
