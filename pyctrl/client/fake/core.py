"""The fake client's apiserver semantics, over the in-memory :mod:`.tracker`.

:class:`~pyctrl.client.fake.FakeClient` exposes them through the ``Client`` interface. Mirrors
controller-runtime ``pkg/client/fake`` (``NewClientBuilder().WithObjects(…)
.WithStatusSubresource(…).WithIndex(…)``) with these apiserver semantics:

- create sets ``uid``, ``creationTimestamp``, ``resourceVersion`` and (objects with a ``spec``)
  ``generation`` 1, honours ``generateName``, fails with ``AlreadyExists``; status is dropped on
  create for kinds with a status subresource;
- update/patch with a stale ``resourceVersion`` fail with ``Conflict``; an empty one is an
  unconditional update; ``generation`` increases when anything but metadata/status changes;
- status-subresource separation: for those kinds (built-ins with status, plus the kinds passed as
  ``status_subresource``) ``update``/``patch`` keep the stored status and ``status()`` writes change
  only the status; ``status()`` on other kinds raises ``NotFound`` as the apiserver does;
- delete of an object with finalizers only sets ``deletionTimestamp``; it is removed when an
  update or patch empties its finalizers; delete preconditions are checked;
- label selectors and field selectors (``metadata.name``, ``metadata.namespace`` and indexes
  registered with :meth:`FakeClient.index_field`), limit/continue paging in key order;
- server-side apply with field-ownership conflicts (see :mod:`.tracker` for the simplification);
  strategic merge patch is approximate (see :mod:`pyctrl.client.patch`) and, as on the apiserver,
  refused for custom resources;
- watch and the informer list/watch source, so a :class:`~pyctrl.cache.Cache` runs on it.

Not modelled: admission, validation and defaulting, garbage collection, propagation policies,
namespace existence, managedFields in responses.
"""

from __future__ import annotations

import base64
import copy
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

from pyctrl.client.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    FieldNotIndexed,
    InternalError,
    Invalid,
    NotFound,
    UnsupportedMediaType,
    failure_status,
)
from pyctrl.client.fake.ssa import applied_configuration, merge_apply
from pyctrl.client.fake.tracker import Tracker, leaf_paths, value_at
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.interfaces import ObjectList
from pyctrl.client.objects import (
    KubeObject,
    Namespace,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    Service,
    StatefulSet,
)
from pyctrl.client.options import ListOptions, Preconditions
from pyctrl.client.patch import (
    Patch,
    PatchType,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from pyctrl.client.restmapper import RESTMapping, StaticRESTMapper
from pyctrl.client.scheme import Kind, Object, Scheme, decode, gvk_of, kind_gvk, to_dict

__all__ = ["FakeCore"]

T = TypeVar("T", bound=KubeObject)
Key = tuple[str, str]
_STATUS_BUILTINS: tuple[Kind, ...] = (
    Pod,
    Service,
    StatefulSet,
    PodDisruptionBudget,
    PersistentVolumeClaim,
    Namespace,
)
_BUILTIN_GROUPS = {
    "",
    "apps",
    "policy",
    "coordination.k8s.io",
    "batch",
    "autoscaling",
    "rbac.authorization.k8s.io",
}
_SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeCore:
    """Object semantics of the fake (the verbs in :class:`~pyctrl.client.fake.FakeClient` call these)."""

    def __init__(self, scheme: Scheme, status_subresource: Iterable[Kind], mapper: StaticRESTMapper) -> None:
        self.tracker = Tracker()
        #: Called with (verb, object) before each write is attempted, dry runs included
        #: (``pyctrl.testing.recording_writes`` observes the fake through this).
        self.write_observers: list[Callable[[str, Object], None]] = []
        self.scheme = scheme
        self.mapper = mapper
        self._status_kinds = {kind_gvk(k) for k in (*_STATUS_BUILTINS, *status_subresource)}
        self._indexes: dict[GroupVersionKind, dict[str, tuple[Kind, Callable[[Any], Iterable[str]]]]] = {}

    # -- helpers --------------------------------------------------------------------------------
    def rest_mapping(self, gvk: GroupVersionKind) -> RESTMapping:
        return self.mapper.mapping_sync(gvk)

    def key_of(self, gvk: GroupVersionKind, meta: Mapping[str, Any]) -> Key:
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        if not name:
            raise Invalid(failure_status("Invalid", 422, f"{gvk.kind}: metadata.name: Required value"))
        if self.rest_mapping(gvk).namespaced:
            if not namespace:
                raise Invalid(
                    failure_status("Invalid", 422, f"{gvk.kind} {name}: metadata.namespace: Required value")
                )
            return namespace, name
        return "", name

    def not_found(self, gvk: GroupVersionKind, name: str) -> NotFound:
        plural = self.rest_mapping(gvk).resource.resource
        return NotFound(
            failure_status("NotFound", 404, f'{plural} "{name}" not found', name=name, kind=plural)
        )

    def conflict(self, gvk: GroupVersionKind, name: str) -> Conflict:
        plural = self.rest_mapping(gvk).resource.resource
        return Conflict(
            failure_status(
                "Conflict",
                409,
                f'Operation cannot be fulfilled on {plural} "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
                name=name,
                kind=plural,
            )
        )

    def current(self, gvk: GroupVersionKind, key: Key) -> dict[str, Any]:
        cur = self.tracker.get(gvk, key)
        if cur is None:
            raise self.not_found(gvk, key[1])
        return cur

    def has_status(self, gvk: GroupVersionKind) -> bool:
        return gvk in self._status_kinds

    def add_index(self, kind: Kind, field: str, fn: Callable[[Any], Iterable[str]]) -> None:
        self._indexes.setdefault(kind_gvk(kind), {})[field] = (kind, fn)

    # -- reads ----------------------------------------------------------------------------------
    def get(self, gvk: GroupVersionKind, name: str, namespace: str | None) -> dict[str, Any]:
        key = self.key_of(gvk, {"name": name, "namespace": namespace})
        return self.current(gvk, key)

    def list(self, gvk: GroupVersionKind, opts: ListOptions) -> ObjectList[dict[str, Any]]:
        indexes = self._indexes.get(gvk, {})
        for field, _, _ in opts.field_selector.clauses:
            if field not in ("metadata.name", "metadata.namespace") and field not in indexes:
                raise FieldNotIndexed(
                    f"field {field!r} is not indexed for {gvk.kind}: call index_field first"
                )
        after = _decode_token(opts.continue_) if opts.continue_ else None
        out: list[dict[str, Any]] = []
        remaining = 0
        for key, data in self.tracker.items(gvk):
            if (opts.namespace and key[0] != opts.namespace) or (after is not None and key <= after):
                continue
            obj = orjson.loads(data)
            if not self.matches(gvk, obj, opts):
                continue
            if opts.limit and len(out) >= opts.limit:
                remaining += 1
                continue
            out.append(obj)
        token = None
        if remaining:
            meta = out[-1]["metadata"]
            token = _encode_token((meta.get("namespace") or "", meta["name"]))
        return ObjectList(out, str(self.tracker.resource_version), token, remaining or None)

    def matches(self, gvk: GroupVersionKind, obj: dict[str, Any], opts: ListOptions) -> bool:
        meta = obj.get("metadata") or {}
        if opts.namespace and meta.get("namespace") != opts.namespace:
            return False
        if not opts.label_selector.matches(meta.get("labels")):
            return False
        if not opts.field_selector:
            return True
        values: dict[str, str] = {
            "metadata.name": meta.get("name", ""),
            "metadata.namespace": meta.get("namespace", ""),
        }
        indexes = self._indexes.get(gvk, {})
        for field, op, value in opts.field_selector.clauses:
            if field in indexes:
                kind, fn = indexes[field]
                found = set(fn(decode(kind, copy.deepcopy(obj))))
                if (value in found) != (op == "="):
                    return False
            elif (values.get(field, "") == value) != (op == "="):
                return False
        return True

    # -- writes ---------------------------------------------------------------------------------
    def _observe(self, verb: str, obj: Object) -> None:
        for observer in self.write_observers:
            observer(verb, obj)

    def create(self, obj: Object, *, dry_run: bool, manager: str | None) -> dict[str, Any]:
        self._observe("POST", obj)
        gvk, new = gvk_of(obj), copy.deepcopy(to_dict(obj))
        meta = new.setdefault("metadata", {})
        if meta.get("resourceVersion"):
            raise InternalError(
                failure_status(
                    "InternalError", 500, "resourceVersion should not be set on objects to be created"
                )
            )
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        key = self.key_of(gvk, meta)
        if self.tracker.get(gvk, key) is not None:
            plural = self.rest_mapping(gvk).resource.resource
            raise AlreadyExists(
                failure_status(
                    "AlreadyExists", 409, f'{plural} "{key[1]}" already exists', name=key[1], kind=plural
                )
            )
        if self.has_status(gvk):
            new.pop("status", None)
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now())
        if "spec" in new:
            meta["generation"] = 1
        self._own(gvk, key, {}, new, manager)
        return self._commit(gvk, key, new, "ADDED", dry_run)

    def write(
        self, obj: Object, *, status: bool, dry_run: bool, manager: str | None, patch: Patch | None = None
    ) -> dict[str, Any]:
        """update (``patch=None``) or patch, of the object or (``status``) its status."""
        self._observe("PUT/PATCH", obj)
        gvk = gvk_of(obj)
        if status and not self.has_status(gvk):
            raise self.not_found(gvk, str(to_dict(obj).get("metadata", {}).get("name", "")))
        key = self.key_of(gvk, to_dict(obj).get("metadata") or {})
        cur = self.current(gvk, key)
        new = copy.deepcopy(to_dict(obj)) if patch is None else self._patched(gvk, cur, obj, patch)
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise self.conflict(gvk, key[1])
        result = self.merge_write(gvk, cur, new, status)
        self._own(gvk, key, cur, result, manager)
        return self.finish_write(gvk, key, cur, result, dry_run)

    def _patched(
        self, gvk: GroupVersionKind, cur: dict[str, Any], obj: Object, patch: Patch
    ) -> dict[str, Any]:
        body = orjson.loads(patch.data(obj))
        try:
            match patch.patch_type:
                case PatchType.MERGE:
                    return apply_merge_patch(cur, body)  # type: ignore[no-any-return]
                case PatchType.JSON:
                    return apply_json_patch(cur, body)  # type: ignore[no-any-return]
                case PatchType.STRATEGIC_MERGE:
                    if gvk.group not in _BUILTIN_GROUPS:
                        raise UnsupportedMediaType(
                            failure_status(
                                "UnsupportedMediaType",
                                415,
                                "strategic merge patch is not supported for custom resources",
                            )
                        )
                    return apply_strategic_merge_patch(cur, body)
        except ValueError as exc:
            raise Invalid(failure_status("Invalid", 422, f"the patch cannot be applied: {exc}")) from exc
        raise ValueError(f"use apply() for {patch.patch_type}")

    def merge_write(
        self, gvk: GroupVersionKind, cur: dict[str, Any], new: dict[str, Any], status: bool
    ) -> dict[str, Any]:
        if status:
            result = copy.deepcopy(cur)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            return result
        result = new
        meta = result.setdefault("metadata", {})
        for field in _SYSTEM_META:
            if field in cur["metadata"]:
                meta[field] = cur["metadata"][field]
            else:
                meta.pop(field, None)
        if self.has_status(gvk):
            if "status" in cur:
                result["status"] = cur["status"]
            else:
                result.pop("status", None)
        return result

    def finish_write(
        self, gvk: GroupVersionKind, key: Key, cur: dict[str, Any], result: dict[str, Any], dry_run: bool
    ) -> dict[str, Any]:
        spec_changed = any(
            cur.get(k) != result.get(k)
            for k in {*cur, *result} - {"metadata", "status", "apiVersion", "kind"}
        )
        if spec_changed and "generation" in result["metadata"]:
            result["metadata"]["generation"] += 1
        if result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            if not dry_run:
                result["metadata"]["resourceVersion"] = self.tracker.next_rv()
                self.tracker.remove(gvk, key, result)
            return result
        if _without_rv(result) == _without_rv(cur):
            return cur  # a write that changes nothing keeps the resourceVersion, as on the apiserver
        return self._commit(gvk, key, result, "MODIFIED", dry_run)

    def _commit(
        self, gvk: GroupVersionKind, key: Key, obj: dict[str, Any], event: str, dry_run: bool
    ) -> dict[str, Any]:
        obj.setdefault("apiVersion", gvk.api_version)
        obj.setdefault("kind", gvk.kind)
        if dry_run:
            return obj
        obj["metadata"]["resourceVersion"] = self.tracker.next_rv()
        self.tracker.put(gvk, key, obj, event)
        return obj

    def _own(
        self, gvk: GroupVersionKind, key: Key, cur: dict[str, Any], new: dict[str, Any], manager: str | None
    ) -> None:
        """An update-style write: the writer takes ownership of the leaves it changed."""
        owners = self.tracker.managers.setdefault((gvk, key), {})
        changed = {p for p in leaf_paths(new) if value_at(cur, p) != value_at(new, p)}
        for owned in owners.values():
            owned.difference_update(changed)
        if changed:
            owners.setdefault(manager or "unknown", set()).update(changed)

    def apply(self, obj: Object, *, manager: str, force: bool, status: bool, dry_run: bool) -> dict[str, Any]:
        """Server-side apply with field ownership (see :mod:`.ssa`); creates a missing object."""
        self._observe("PATCH", obj)
        gvk = gvk_of(obj)
        applied = applied_configuration(obj, status=status, separate_status=self.has_status(gvk))
        key = self.key_of(gvk, applied.get("metadata") or {})
        cur = self.tracker.get(gvk, key)
        if cur is None:
            if status:
                raise self.not_found(gvk, key[1])
            applied.get("metadata", {}).pop("resourceVersion", None)
            created = self.create(applied, dry_run=dry_run, manager=None)
            if not dry_run:
                self.tracker.managers[(gvk, key)] = {manager: set(leaf_paths(applied))}
            return created
        owners = self.tracker.managers.setdefault((gvk, key), {})
        result, new_owners = merge_apply(cur, applied, owners, manager=manager, force=force)
        if not dry_run:
            self.tracker.managers[(gvk, key)] = new_owners
        rv = applied.get("metadata", {}).get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise self.conflict(gvk, key[1])
        return self.finish_write(gvk, key, cur, self.merge_write(gvk, cur, result, status), dry_run)

    def delete(self, obj: Object, *, preconditions: Preconditions | None, dry_run: bool) -> None:
        self._observe("DELETE", obj)
        gvk = gvk_of(obj)
        key = self.key_of(gvk, to_dict(obj).get("metadata") or {})
        cur = self.current(gvk, key)
        meta = cur["metadata"]
        if preconditions is not None:
            for what, want, have, why in (
                ("UID", preconditions.uid, meta.get("uid"), "deleted and then recreated"),
                ("ResourceVersion", preconditions.resource_version, meta.get("resourceVersion"), "modified"),
            ):
                if want and want != have:
                    message = (
                        f'Operation cannot be fulfilled on {gvk.kind} "{key[1]}": the {what} in the '
                        f"precondition ({want}) does not match the {what} in record ({have}). "
                        f"The object might have been {why}"
                    )
                    raise Conflict(failure_status("Conflict", 409, message))
        if dry_run:
            return
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                meta.update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
                self._commit(gvk, key, cur, "MODIFIED", dry_run=False)
            return
        meta["resourceVersion"] = self.tracker.next_rv()
        self.tracker.remove(gvk, key, cur)


def _without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _encode_token(key: Key) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(key))).decode()


def _decode_token(token: str) -> Key:
    try:
        ns, name = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return str(ns), str(name)
    except (ValueError, TypeError) as exc:
        raise BadRequest(failure_status("BadRequest", 400, f"invalid continue token {token!r}")) from exc
