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
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, TypeVar

import orjson

from pyctrl.client.errors import Gone, MethodNotAllowed
from pyctrl.client.fake.core import FakeCore
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.interfaces import ListOptions, ObjectList, Preconditions, PropagationPolicy, ReaderBase
from pyctrl.client.objects import KubeObject
from pyctrl.client.patch import Patch, PatchType, apply_json_patch, apply_merge_patch
from pyctrl.client.restmapper import RESTMapping, StaticRESTMapper
from pyctrl.client.scheme import Kind, Object, Scheme, decode, default_scheme, gvk_of, kind_gvk, to_dict
from pyctrl.client.selectors import FieldSelector, Selector
from pyctrl.client.watch import INITIAL_EVENTS_END, RawEvent, RawList, WatchEvent

__all__ = ["FakeClient"]

T = TypeVar("T", bound=KubeObject)
ObjT = TypeVar("ObjT", bound=KubeObject | dict[str, Any])


def _as(obj: Object, data: dict[str, Any]) -> Any:
    return type(obj).model_validate(data) if isinstance(obj, KubeObject) else data


class FakeClient(ReaderBase):
    """An in-memory :class:`~pyctrl.client.interfaces.Client` (see the module docstring)."""

    def __init__(
        self,
        *objects: Object,
        scheme: Scheme = default_scheme,
        status_subresource: Iterable[Kind] = (),
        mapper: StaticRESTMapper | None = None,
    ) -> None:
        self.core = FakeCore(scheme=scheme, status_subresource=status_subresource, mapper=mapper)
        for obj in objects:
            self.core.create(obj, dry_run=False, manager=None)

    def index_field(self, kind: Kind, field: str, fn: Callable[[Any], Iterable[str]]) -> None:
        """Make ``list(kind, fields={field: v})`` work (controller-runtime ``WithIndex``)."""
        self.core.add_index(kind, field, fn)

    async def close(self) -> None:
        """Nothing to release (symmetry with ``ApiClient``)."""

    # -- Reader ---------------------------------------------------------------------------------
    async def _get(self, kind: Kind, name: str, namespace: str | None) -> Any:
        return decode(kind, self.core.get(kind_gvk(kind), name, namespace))

    async def _list(self, kind: Kind, opts: ListOptions) -> ObjectList[Any]:
        found = self.core.list(kind_gvk(kind), opts)
        found.items = [decode(kind, item) for item in found.items]
        return found

    # -- Writer ---------------------------------------------------------------------------------
    async def create(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT:
        return _as(obj, self.core.create(obj, dry_run=dry_run, manager=field_manager))  # type: ignore[no-any-return]

    async def update(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT:
        result = self.core.write(obj, status=False, dry_run=dry_run, manager=field_manager)
        return _as(obj, result)  # type: ignore[no-any-return]

    async def patch(
        self,
        obj: ObjT,
        patch: Patch,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> ObjT:
        return await _patch(
            self.core, obj, patch, status=False, dry_run=dry_run, manager=field_manager, force=force
        )

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT:
        if not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        result = self.core.apply(obj, manager=field_manager, force=force, status=False, dry_run=dry_run)
        return _as(obj, result)  # type: ignore[no-any-return]

    async def delete(
        self,
        obj: KubeObject | dict[str, Any],
        *,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        if propagation_policy not in (None, "Foreground", "Background", "Orphan"):
            raise ValueError(
                f"propagation_policy must be Foreground, Background or Orphan: {propagation_policy!r}"
            )
        self.core.delete(obj, preconditions=preconditions, dry_run=dry_run)

    async def delete_all_of(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        label_selector: str | Selector | None = None,
        fields: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        propagation_policy: PropagationPolicy | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        gvk = kind_gvk(kind)
        if self.core.rest_mapping(gvk).namespaced and not namespace:
            raise ValueError("delete_all_of on a namespaced kind needs a namespace")
        opts = ListOptions.build(
            namespace=namespace,
            labels=labels,
            label_selector=label_selector,
            fields=fields,
            field_selector=field_selector,
        )
        for item in self.core.list(gvk, opts).items:
            self.core.delete(item, preconditions=None, dry_run=dry_run)

    def status(self) -> _FakeStatusWriter:
        return _FakeStatusWriter(self.core)

    def subresource(self, name: str) -> _FakeSubResource:
        return _FakeSubResource(self.core, name)

    # -- list/watch source ----------------------------------------------------------------------
    async def mapping(self, kind: Kind) -> RESTMapping:
        return self.core.rest_mapping(kind_gvk(kind))

    async def list_watcher(self, kind: Kind, options: ListOptions) -> _FakeListerWatcher:
        return _FakeListerWatcher(self.core, kind_gvk(kind), options)

    async def watch(
        self, kind: Kind, *, resource_version: str = "", timeout_seconds: int = 300, **options: Any
    ) -> AsyncIterator[WatchEvent[Any]]:
        """Like :meth:`ApiClient.watch`: events after ``resource_version`` (now if empty)."""
        lw = _FakeListerWatcher(self.core, kind_gvk(kind), ListOptions.build(**options))
        async for event in lw.watch(resource_version=resource_version, timeout_seconds=timeout_seconds):
            yield WatchEvent(event.type, decode(kind, event.object))


async def _patch(
    core: FakeCore,
    obj: ObjT,
    patch: Patch,
    *,
    status: bool,
    dry_run: bool,
    manager: str | None,
    force: bool | None,
) -> ObjT:
    if force is not None and patch.patch_type is not PatchType.APPLY:
        raise ValueError("force applies only to server-side apply patches")
    if patch.patch_type is PatchType.APPLY:
        if not manager:
            raise ValueError("server-side apply needs a field_manager")
        body = orjson.loads(patch.data(obj))
        result = core.apply(body, manager=manager, force=bool(force), status=status, dry_run=dry_run)
    else:
        result = core.write(obj, status=status, dry_run=dry_run, manager=manager, patch=patch)
    return _as(obj, result)  # type: ignore[no-any-return]


class _FakeStatusWriter:
    def __init__(self, core: FakeCore) -> None:
        self._core = core

    async def update(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT:
        return _as(obj, self._core.write(obj, status=True, dry_run=dry_run, manager=field_manager))  # type: ignore[no-any-return]

    async def patch(
        self,
        obj: ObjT,
        patch: Patch,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> ObjT:
        return await _patch(
            self._core, obj, patch, status=True, dry_run=dry_run, manager=field_manager, force=force
        )

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT:
        result = self._core.apply(obj, manager=field_manager, force=force, status=True, dry_run=dry_run)
        return _as(obj, result)  # type: ignore[no-any-return]


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
                {
                    "reason": "MethodNotAllowed",
                    "code": 405,
                    "message": f"the fake does not serve {gvk.kind}/{self._name}",
                }
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
        raise MethodNotAllowed(
            {"reason": "MethodNotAllowed", "code": 405, "message": "create is not supported by the fake"}
        )

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

    def __init__(self, core: FakeCore, gvk: GroupVersionKind, options: ListOptions) -> None:
        self._core, self._gvk, self._opts = core, gvk, options

    async def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> RawList:
        page = ListOptions(
            self._opts.namespace, self._opts.label_selector, self._opts.field_selector, limit, continue_
        )
        found = self._core.list(self._gvk, page)
        return RawList(found.items, found.resource_version, found.continue_)

    async def watch(
        self, *, resource_version: str, timeout_seconds: int, send_initial_events: bool = False
    ) -> AsyncIterator[RawEvent]:
        tracker = self._core.tracker
        matching: set[tuple[str, str]] = set()
        if send_initial_events:
            since = tracker.resource_version
            for item in self._core.list(
                self._gvk,
                ListOptions(self._opts.namespace, self._opts.label_selector, self._opts.field_selector),
            ).items:
                matching.add((item["metadata"].get("namespace", ""), item["metadata"]["name"]))
                yield RawEvent("ADDED", item)
            yield RawEvent(
                "BOOKMARK",
                {"metadata": {"resourceVersion": str(since), "annotations": {INITIAL_EVENTS_END: "true"}}},
            )
        else:
            since = int(resource_version) if resource_version else tracker.resource_version
            if since < tracker.oldest_watchable():
                raise Gone(
                    {"reason": "Expired", "code": 410, "message": f"too old resource version: {since}"}
                )
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
                            yield RawEvent(event, obj)  # type: ignore[arg-type]
                        elif key in matching:
                            matching.discard(key)
                            yield RawEvent("DELETED", obj)
        finally:
            tracker.unsubscribe(sub)
