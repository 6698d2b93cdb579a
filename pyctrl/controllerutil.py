"""Helpers for reconcilers (controller-runtime ``pkg/controller/controllerutil``).

- ``create_or_update(client, obj, mutate)``: get the object named by ``obj`` (when it is missing,
  ``obj`` itself is mutated and created), apply ``mutate`` to the current state, then update it
  only if ``mutate`` changed anything — no write at all when nothing changed (the operator rule:
  zero writes when converged). Returns the stored object and an ``OperationResult``; unlike Go,
  ``obj`` is not overwritten with the stored state: use the returned object.
- ``create_or_patch``: the same with merge patches, writing the status subresource separately when
  ``mutate`` changed ``status``.
- ``set_controller_reference`` / ``set_owner_reference``: owner references (controller owners get
  ``controller: true`` and ``blockOwnerDeletion: true``); a second, different controller raises
  ``AlreadyOwnedError``; a cluster-scoped object cannot be owned by a namespaced one, nor an object
  by an owner in another namespace.
- ``add_finalizer`` / ``remove_finalizer`` / ``contains_finalizer``: return whether they changed
  anything, so the caller knows whether to write.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable
from typing import Any, TypeVar

from pyctrl import _access
from pyctrl.client.errors import NotFound
from pyctrl.client.interfaces import Client, Reader, stored
from pyctrl.client.objects import KubeObject, OwnerReference
from pyctrl.client.patch import MergeFrom
from pyctrl.client.scheme import Object, gvk_of, kind_of, to_dict

__all__ = [
    "AlreadyOwnedError",
    "OperationResult",
    "add_finalizer",
    "contains_finalizer",
    "create_or_patch",
    "create_or_update",
    "remove_finalizer",
    "set_controller_reference",
    "set_owner_reference",
]

ObjT = TypeVar("ObjT", bound=KubeObject | dict[str, Any])


class OperationResult(enum.StrEnum):
    UNCHANGED = "unchanged"
    CREATED = "created"
    UPDATED = "updated"
    UPDATED_STATUS = "updatedStatus"
    UPDATED_STATUS_ONLY = "updatedStatusOnly"


class AlreadyOwnedError(Exception):
    """The object already has a different controller owner."""


def _snapshot(obj: Object) -> dict[str, Any]:
    return copy.deepcopy(to_dict(obj))


async def _get_into(client: Reader, obj: ObjT) -> ObjT | None:
    try:
        found = await client.get(kind_of(obj), _access.name(obj), namespace=_access.namespace(obj) or None)
    except NotFound:
        return None
    return stored(obj, found)


def _check_mutation(before: dict[str, Any], after: Object) -> None:
    meta_b, meta_a = before.get("metadata") or {}, to_dict(after).get("metadata") or {}
    if (meta_b.get("name"), meta_b.get("namespace")) != (meta_a.get("name"), meta_a.get("namespace")):
        raise ValueError("mutate must not change the object's name or namespace")


async def _fetch_and_mutate(
    client: Client, obj: ObjT, mutate: Callable[[ObjT], None]
) -> tuple[ObjT, dict[str, Any] | None]:
    """Apply ``mutate`` to ``obj``'s current state: (mutated current, its state before).

    When ``obj`` does not exist yet, ``mutate`` is applied to ``obj`` itself, which is created:
    (created object, None).
    """
    current = await _get_into(client, obj)
    target = obj if current is None else current
    before = _snapshot(target)
    mutate(target)
    _check_mutation(before, target)
    if current is None:
        created: ObjT = await client.create(obj)
        return created, None
    return current, before


async def create_or_update(
    client: Client, obj: ObjT, mutate: Callable[[ObjT], None]
) -> tuple[ObjT, OperationResult]:
    """Create or update ``obj`` so that ``mutate`` holds; no write when already so."""
    current, before = await _fetch_and_mutate(client, obj, mutate)
    if before is None:
        return current, OperationResult.CREATED
    if to_dict(current) == before:
        return current, OperationResult.UNCHANGED
    return await client.update(current), OperationResult.UPDATED


async def create_or_patch(
    client: Client, obj: ObjT, mutate: Callable[[ObjT], None]
) -> tuple[ObjT, OperationResult]:
    """Like ``create_or_update`` with merge patches; a changed ``status`` goes to the status subresource."""
    current, before = await _fetch_and_mutate(client, obj, mutate)
    return (current, OperationResult.CREATED) if before is None else await _patch(client, current, before)


async def _patch(client: Client, current: ObjT, before: dict[str, Any]) -> tuple[ObjT, OperationResult]:
    """Write what ``mutate`` changed in ``current`` since ``before``: the status separately."""
    after = to_dict(current)
    status_changed = after.get("status") != before.get("status")
    rest_changed = {k: v for k, v in after.items() if k != "status"} != {
        k: v for k, v in before.items() if k != "status"
    }
    stored: ObjT = current
    if rest_changed:
        stored = await client.patch(current, MergeFrom(before))
    if status_changed:
        target = _with_status(stored, after.get("status"))
        stored = await client.status().patch(target, MergeFrom(_with_status(stored, before.get("status"))))
    if rest_changed and status_changed:
        return stored, OperationResult.UPDATED_STATUS
    if status_changed:
        return stored, OperationResult.UPDATED_STATUS_ONLY
    return stored, OperationResult.UPDATED if rest_changed else OperationResult.UNCHANGED


def _with_status(obj: ObjT, status: Any) -> ObjT:
    data = _snapshot(obj)
    if status is None:
        data.pop("status", None)
    else:
        data["status"] = status
    return type(obj).model_validate(data) if isinstance(obj, KubeObject) else data  # type: ignore[return-value]


def _owner_ref(owner: Object, *, controller: bool) -> dict[str, Any]:
    if not _access.uid(owner) or not _access.name(owner):
        raise ValueError("the owner must have a name and a uid (set_*_reference on a stored object)")
    gvk = gvk_of(owner)
    ref: dict[str, Any] = {
        "apiVersion": gvk.api_version,
        "kind": gvk.kind,
        "name": _access.name(owner),
        "uid": _access.uid(owner),
    }
    if controller:
        ref["controller"] = True
        ref["blockOwnerDeletion"] = True
    return ref


def _set_refs(obj: Object, refs: list[dict[str, Any]]) -> None:
    if isinstance(obj, KubeObject):
        obj.metadata.owner_references = [OwnerReference.model_validate(r) for r in refs] or None
    else:
        obj.setdefault("metadata", {})["ownerReferences"] = refs


def _check_scope(owner: Object, obj: Object) -> None:
    owner_ns, obj_ns = _access.namespace(owner), _access.namespace(obj)
    if owner_ns and not obj_ns:
        raise ValueError("a cluster-scoped object cannot have a namespaced owner")
    if owner_ns and owner_ns != obj_ns:
        raise ValueError(f"cross-namespace owner references are not allowed ({owner_ns} vs {obj_ns})")


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _upsert(refs: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Replace the reference to the same owner (group, kind, name) or append ``new``."""
    ident = (_group(new["apiVersion"]), new["kind"], new["name"])
    kept = [r for r in refs if (_group(r.get("apiVersion", "")), r.get("kind"), r.get("name")) != ident]
    return [*kept, new]


def set_controller_reference(owner: Object, obj: Object) -> None:
    """Make ``owner`` the controller of ``obj`` (cascading deletion, owner-triggered reconciles)."""
    _check_scope(owner, obj)
    new = _owner_ref(owner, controller=True)
    refs = _access.owner_references(obj)
    ident = (_group(new["apiVersion"]), new["kind"], new["name"])
    for r in refs:
        if r.get("controller") and (_group(r.get("apiVersion", "")), r.get("kind"), r.get("name")) != ident:
            raise AlreadyOwnedError(
                f"{_access.name(obj)} is already controlled by {r.get('kind')} {r.get('name')}"
            )
    _set_refs(obj, _upsert(refs, new))


def set_owner_reference(owner: Object, obj: Object) -> None:
    """Add ``owner`` as a (non-controller) owner of ``obj``."""
    _check_scope(owner, obj)
    _set_refs(obj, _upsert(_access.owner_references(obj), _owner_ref(owner, controller=False)))


def _finalizers(obj: Object) -> list[str]:
    if isinstance(obj, KubeObject):
        return list(obj.metadata.finalizers or [])
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def _set_finalizers(obj: Object, finalizers: list[str]) -> None:
    if isinstance(obj, KubeObject):
        obj.metadata.finalizers = finalizers or None
    else:
        meta = obj.setdefault("metadata", {})
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)


def contains_finalizer(obj: Object, finalizer: str) -> bool:
    return finalizer in _finalizers(obj)


def add_finalizer(obj: Object, finalizer: str) -> bool:
    """Add ``finalizer``; True when it was not there yet."""
    current = _finalizers(obj)
    if finalizer in current:
        return False
    _set_finalizers(obj, [*current, finalizer])
    return True


def remove_finalizer(obj: Object, finalizer: str) -> bool:
    """Remove ``finalizer``; True when it was there."""
    current = _finalizers(obj)
    if finalizer not in current:
        return False
    _set_finalizers(obj, [f for f in current if f != finalizer])
    return True
