"""``FakeClient``: the ``Client`` interface in memory, for users' unit tests.

Mirrors controller-runtime ``pkg/client/fake``. Same call shapes and error types as
:class:`~pyctrl.client.ApiClient` (one behavioural test suite runs against both); the semantics
and their limits are listed in :mod:`pyctrl.client.fake.core`. It is also a list/watch source,
so ``Cache(FakeClient(...))`` works::

    client = FakeClient(ConfigMap(metadata=ObjectMeta(name="a", namespace="ns")),
                        status_subresource=[RedisCluster])
    cm = await client.get(ConfigMap, "a", namespace="ns")
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import orjson

from pyctrl.client.errors import Gone, MethodNotAllowed, failure_status
from pyctrl.client.fake.core import FakeCore
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.interfaces import (
    GetOptions,
    ListOptions,
    ObjectList,
    ObjectWriterBase,
    ObjT,
    ReaderBase,
    T,
    WriterBase,
    stored,
)
from pyctrl.client.objects import KubeObject, PartialObjectMetadata, is_metadata_only
from pyctrl.client.options import (
    CreateOptions,
    DeleteAllOfOptions,
    DeleteOptions,
    PatchOptions,
    UpdateOptions,
)
from pyctrl.client.patch import Patch, PatchType, apply_json_patch, apply_merge_patch
from pyctrl.client.restmapper import RESTMapping, StaticRESTMapper
from pyctrl.client.scheme import Kind, Object, Scheme, decode, default_scheme, gvk_of, kind_gvk, to_dict
from pyctrl.client.watch import INITIAL_EVENTS_END, RawEvent, RawList, WatchBase

__all__ = ["FakeClient"]


def _as(obj: ObjT, data: dict[str, Any]) -> ObjT:
    return stored(obj, type(obj).model_validate(data) if isinstance(obj, KubeObject) else data)


class _FakeObjectWriter(ObjectWriterBase):
    """update and patch (apply included) of the main resource or, with ``status``, the status."""

    def __init__(self, core: FakeCore, *, status: bool) -> None:
        self.core, self._status = core, status

    async def _update(self, obj: ObjT, opts: UpdateOptions) -> ObjT:
        return _as(
            obj, self.core.write(obj, status=self._status, dry_run=opts.dry_run, manager=opts.field_manager)
        )

    async def _patch(self, obj: ObjT, patch: Patch, opts: PatchOptions) -> ObjT:
        if patch.patch_type is PatchType.APPLY:
            assert opts.field_manager  # checked by PatchOptions.build
            result = self.core.apply(
                orjson.loads(patch.data(obj)),
                manager=opts.field_manager,
                force=bool(opts.force),
                status=self._status,
                dry_run=opts.dry_run,
            )
        else:
            result = self.core.write(
                obj, status=self._status, dry_run=opts.dry_run, manager=opts.field_manager, patch=patch
            )
        return _as(obj, result)


class FakeClient(ReaderBase, WriterBase, WatchBase):
    """An in-memory :class:`~pyctrl.client.interfaces.Client` (see the module docstring)."""

    def __init__(
        self,
        *objects: Object,
        scheme: Scheme = default_scheme,
        status_subresource: Iterable[Kind] = (),
        mapper: StaticRESTMapper | None = None,
    ) -> None:
        self.core = FakeCore(scheme, status_subresource, mapper or StaticRESTMapper())
        self._objects = _FakeObjectWriter(self.core, status=False)
        for obj in objects:
            self.core.create(obj, dry_run=False, manager=None)

    def index_field(self, kind: Kind, field: str, fn: Callable[[Any], Iterable[str]]) -> None:
        """Make ``list(kind, fields={field: v})`` work (controller-runtime ``WithIndex``)."""
        self.core.add_index(kind, field, fn)

    async def close(self) -> None:
        """Nothing to release (symmetry with ``ApiClient``)."""

    # -- Reader ---------------------------------------------------------------------------------
    async def _get(self, kind: Kind, name: str, opts: GetOptions) -> Any:
        found = self.core.get(kind_gvk(kind), name, opts.namespace)
        return decode(kind, _partial(found) if is_metadata_only(kind) else found)

    async def _list(self, kind: Kind, opts: ListOptions) -> ObjectList[Any]:
        found = self.core.list(kind_gvk(kind), opts)
        items = [_partial(item) for item in found.items] if is_metadata_only(kind) else found.items
        found.items = [decode(kind, item) for item in items]
        return found

    # -- Writer ---------------------------------------------------------------------------------
    async def _create(self, obj: ObjT, opts: CreateOptions) -> ObjT:
        return _as(obj, self.core.create(obj, dry_run=opts.dry_run, manager=opts.field_manager))

    async def _update(self, obj: ObjT, opts: UpdateOptions) -> ObjT:
        return await self._objects._update(obj, opts)

    async def _patch(self, obj: ObjT, patch: Patch, opts: PatchOptions) -> ObjT:
        return await self._objects._patch(obj, patch, opts)

    async def _delete(self, obj: KubeObject | dict[str, Any], opts: DeleteOptions) -> None:
        self.core.delete(obj, preconditions=opts.preconditions, dry_run=opts.dry_run)

    async def _delete_all_of(self, kind: Kind, opts: DeleteAllOfOptions) -> None:
        gvk = kind_gvk(kind)
        if self.core.rest_mapping(gvk).namespaced and not opts.list_options.namespace:
            raise ValueError("delete_all_of on a namespaced kind needs a namespace")
        for item in self.core.list(gvk, opts.list_options).items:
            self.core.delete(item, preconditions=None, dry_run=opts.delete_options.dry_run)

    def status(self) -> _FakeObjectWriter:
        return _FakeObjectWriter(self.core, status=True)

    def subresource(self, name: str) -> _FakeSubResource:
        return _FakeSubResource(self.core, name)

    # -- list/watch source ----------------------------------------------------------------------
    async def mapping(self, kind: Kind) -> RESTMapping:
        return self.core.rest_mapping(kind_gvk(kind))

    async def list_watcher(self, kind: Kind, options: ListOptions) -> _FakeListerWatcher:
        return _FakeListerWatcher(self.core, kind_gvk(kind), options, metadata_only=is_metadata_only(kind))


def _as_is(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def _partial(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the apiserver's ``PartialObjectMetadata`` representation shows it."""
    return {
        "apiVersion": PartialObjectMetadata.API_VERSION,
        "kind": "PartialObjectMetadata",
        "metadata": obj["metadata"],
    }


class _FakeSubResource:
    """``scale`` for objects with ``spec.replicas``; ``status`` as the status writer."""

    def __init__(self, core: FakeCore, name: str) -> None:
        self._core, self._name = core, name

    def _check(self, obj: Object) -> tuple[GroupVersionKind, dict[str, Any]]:
        gvk = gvk_of(obj)
        meta = to_dict(obj).get("metadata") or {}
        cur = self._core.get(gvk, str(meta.get("name", "")), meta.get("namespace"))
        if self._name != "scale" or "replicas" not in (cur.get("spec") or {}):
            raise MethodNotAllowed(
                failure_status("MethodNotAllowed", 405, f"the fake does not serve {gvk.kind}/{self._name}")
            )
        return gvk, cur

    def _scale(self, cur: dict[str, Any]) -> dict[str, Any]:
        meta = cur["metadata"]
        status = cur.get("status") or {}
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta},
            "spec": {"replicas": cur["spec"]["replicas"]},
            "status": {"replicas": status.get("replicas", 0)},
        }

    async def get(self, obj: Object, into: type[T]) -> T:
        _, cur = self._check(obj)
        return into.model_validate(self._scale(cur))

    async def create(self, obj: Object, body: Object, *, dry_run: bool = False) -> dict[str, Any]:
        raise MethodNotAllowed(failure_status("MethodNotAllowed", 405, "create is not supported by the fake"))

    async def update(self, obj: Object, body: T, *, dry_run: bool = False) -> T:
        _, cur = self._check(obj)
        replicas = (to_dict(body).get("spec") or {}).get("replicas")
        cur["spec"]["replicas"] = replicas
        cur["metadata"]["resourceVersion"] = (to_dict(body).get("metadata") or {}).get("resourceVersion")
        result = self._core.write(cur, status=False, dry_run=dry_run, manager=None)
        return type(body).model_validate(self._scale(result))

    async def patch(self, obj: Object, patch: Patch, into: type[T], *, dry_run: bool = False) -> T:
        _, cur = self._check(obj)
        scale, body = self._scale(cur), orjson.loads(patch.data(obj))
        patched = (
            apply_json_patch(scale, body)
            if patch.patch_type is PatchType.JSON
            else apply_merge_patch(scale, body)
        )
        return await self.update(obj, into.model_validate(patched), dry_run=dry_run)


class _FakeListerWatcher:
    """The fake's informer source: lists and watches the tracker."""

    def __init__(
        self, core: FakeCore, gvk: GroupVersionKind, options: ListOptions, *, metadata_only: bool = False
    ) -> None:
        self._core, self._gvk, self._opts = core, gvk, options
        # What the objects look like on the wire.
        self._shown: Callable[[dict[str, Any]], dict[str, Any]] = _partial if metadata_only else _as_is

    async def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> RawList:
        found = self._core.list(self._gvk, self._opts.page(limit, continue_))
        return RawList([self._shown(item) for item in found.items], found.resource_version, found.continue_)

    async def watch(
        self, *, resource_version: str, timeout_seconds: int, send_initial_events: bool = False
    ) -> AsyncIterator[RawEvent]:
        tracker = self._core.tracker
        matching: set[tuple[str, str]] = set()
        if send_initial_events:
            since = tracker.resource_version
            for item in self._core.list(self._gvk, self._opts.page(None, None)).items:
                matching.add((item["metadata"].get("namespace", ""), item["metadata"]["name"]))
                yield RawEvent("ADDED", self._shown(item))
            yield RawEvent(
                "BOOKMARK",
                {"metadata": {"resourceVersion": str(since), "annotations": {INITIAL_EVENTS_END: "true"}}},
            )
        else:
            since = int(resource_version) if resource_version else tracker.resource_version
            if since < tracker.oldest_watchable():
                raise Gone(failure_status("Expired", 410, f"too old resource version: {since}"))
        sub = tracker.subscribe(self._gvk, self._opts.namespace, since)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_seconds):
                    while True:
                        event, data, _ = await sub.queue.get()
                        obj = orjson.loads(data)
                        meta = obj.get("metadata") or {}
                        key = (meta.get("namespace", ""), meta.get("name", ""))
                        if self._core.matches(self._gvk, obj, self._opts):
                            if event == "DELETED":
                                matching.discard(key)
                            else:
                                matching.add(key)
                            yield RawEvent(event, self._shown(obj))  # type: ignore[arg-type]
                        elif key in matching:
                            matching.discard(key)
                            yield RawEvent("DELETED", self._shown(obj))
        finally:
            tracker.unsubscribe(sub)
