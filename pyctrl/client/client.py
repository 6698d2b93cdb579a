"""The apiserver client: every verb, typed in and typed out.

Mirrors controller-runtime ``pkg/client`` (``client.New``: typed and unstructured clients behind
one interface, ``Status()``, ``SubResource()``), talking to the apiserver through
:class:`~pyctrl.client.rest.Transport` and mapping kinds with a discovery REST mapper.

Guarantees:

- a call returns the object the apiserver stored (decoded into the argument's type: a typed
  object for a typed kind, a fresh dict for an unstructured one) and never mutates its argument;
- list items of an unstructured list carry ``apiVersion``/``kind`` (the apiserver omits them);
- ``update`` sends the object's ``resourceVersion``, so a stale object fails with ``Conflict``;
- ``apply`` is server-side apply (``fieldManager`` required, ``force`` to take fields from other
  managers); ``managedFields`` is stripped from the applied configuration as the apiserver demands;
- ``dry_run=True`` makes any write ``dryRun=All``: validated and answered, not persisted;
- failures are :mod:`pyctrl.client.errors` types carrying the apiserver's Status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar, overload

from pyctrl.client.config import Config
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.interfaces import ListOptions, ObjectList, Preconditions, PropagationPolicy, ReaderBase
from pyctrl.client.objects import KubeObject
from pyctrl.client.patch import Patch, PatchType
from pyctrl.client.rest import Transport
from pyctrl.client.restmapper import DiscoveryRESTMapper, RESTMapper, RESTMapping, resource_path
from pyctrl.client.scheme import (
    Kind,
    Object,
    Scheme,
    decode,
    default_scheme,
    encode,
    gvk_of,
    kind_gvk,
)
from pyctrl.client.selectors import FieldSelector, Selector
from pyctrl.client.subresource import (
    StatusWriterImpl,
    SubResourceClientImpl,
    apply_body,
    delete_options,
    write_params,
)
from pyctrl.client.watch import RESTListerWatcher, WatchEvent

__all__ = ["ApiClient"]

T = TypeVar("T", bound=KubeObject)
ObjT = TypeVar("ObjT", bound=KubeObject | dict[str, Any])


def _kind_of(obj: Object) -> Kind:
    return type(obj) if isinstance(obj, KubeObject) else gvk_of(obj)


def _name_ns(obj: Object) -> tuple[str, str | None]:
    meta = (
        obj.metadata.model_dump(exclude_none=True)
        if isinstance(obj, KubeObject)
        else obj.get("metadata") or {}
    )
    return str(meta.get("name") or ""), meta.get("namespace") or None


def _with_type_meta(item: dict[str, Any], gvk: GroupVersionKind) -> dict[str, Any]:
    item.setdefault("apiVersion", gvk.api_version)
    item.setdefault("kind", gvk.kind)
    return item


def decode_list_items(kind: Kind, items: list[dict[str, Any]]) -> list[Any]:
    """Decode raw list items into ``kind`` (unstructured items get their TypeMeta back)."""
    if isinstance(kind, GroupVersionKind):
        return [_with_type_meta(i, kind) for i in items]
    return [kind.model_validate(i) for i in items]


class ApiClient(ReaderBase):
    """A :class:`~pyctrl.client.interfaces.Client` that talks to the apiserver directly.

    Use as ``async with ApiClient(await load_config()) as client: ...`` (or call :meth:`close`).
    """

    def __init__(self, config: Config, *, scheme: Scheme = default_scheme, mapper: RESTMapper | None = None):
        self.config = config
        self.scheme = scheme
        self.transport = Transport(config)
        self.mapper: RESTMapper = mapper or DiscoveryRESTMapper(self.transport)

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.transport.close()

    async def mapping(self, kind: Kind) -> RESTMapping:
        """The REST mapping of a kind (discovery, cached)."""
        return await self.mapper.mapping(kind_gvk(kind))

    async def _object_path(self, obj: Object, subresource: str | None = None) -> str:
        mapping = await self.mapping(_kind_of(obj))
        name, namespace = _name_ns(obj)
        return resource_path(mapping, namespace=namespace, name=name, subresource=subresource)

    # -- Reader ---------------------------------------------------------------------------------
    async def _get(self, kind: Kind, name: str, namespace: str | None) -> Any:
        mapping = await self.mapping(kind)
        data = await self.transport.request("GET", resource_path(mapping, namespace=namespace, name=name))
        return decode(kind, data)

    async def _list(self, kind: Kind, opts: ListOptions) -> ObjectList[Any]:
        mapping = await self.mapping(kind)
        path = resource_path(mapping, namespace=opts.namespace, all_namespaces=True)
        doc = await self.transport.request_json("GET", path, params=opts.query())
        meta = doc.get("metadata") or {}
        return ObjectList(
            decode_list_items(kind, doc.get("items") or []),
            str(meta.get("resourceVersion", "")),
            meta.get("continue") or None,
            meta.get("remainingItemCount"),
        )

    # -- Writer ---------------------------------------------------------------------------------
    async def create(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT:
        mapping = await self.mapping(_kind_of(obj))
        _, namespace = _name_ns(obj)
        path = resource_path(mapping, namespace=namespace)
        data = await self.transport.request(
            "POST",
            path,
            params=write_params(dry_run, field_manager),
            body=encode(obj),
            content_type="application/json",
        )
        return decode(_kind_of(obj), data)  # type: ignore[no-any-return]

    async def update(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT:
        return await self._put(obj, None, dry_run, field_manager)

    async def _put(
        self, obj: ObjT, subresource: str | None, dry_run: bool, field_manager: str | None
    ) -> ObjT:
        path = await self._object_path(obj, subresource)
        data = await self.transport.request(
            "PUT",
            path,
            params=write_params(dry_run, field_manager),
            body=encode(obj),
            content_type="application/json",
        )
        return decode(_kind_of(obj), data)  # type: ignore[no-any-return]

    async def patch(
        self,
        obj: ObjT,
        patch: Patch,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> ObjT:
        return await self._patch(
            obj,
            patch_type=patch.patch_type,
            body=patch.data(obj),
            subresource=None,
            dry_run=dry_run,
            field_manager=field_manager,
            force=force,
        )

    async def _patch(
        self,
        obj: ObjT,
        *,
        patch_type: PatchType,
        body: bytes,
        subresource: str | None,
        dry_run: bool,
        field_manager: str | None,
        force: bool | None,
    ) -> ObjT:
        if force is not None and patch_type is not PatchType.APPLY:
            raise ValueError("force applies only to server-side apply patches")
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        path = await self._object_path(obj, subresource)
        data = await self.transport.request(
            "PATCH",
            path,
            params=write_params(dry_run, field_manager, force),
            body=body,
            content_type=patch_type.value,
        )
        return decode(_kind_of(obj), data)  # type: ignore[no-any-return]

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT:
        return await self._patch(
            obj,
            patch_type=PatchType.APPLY,
            body=apply_body(obj),
            subresource=None,
            dry_run=dry_run,
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        obj: KubeObject | dict[str, Any],
        *,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        body = delete_options(
            propagation_policy=propagation_policy,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
        )
        path = await self._object_path(obj)
        await self.transport.request("DELETE", path, body=encode(body), content_type="application/json")

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
        opts = ListOptions.build(
            namespace=namespace,
            labels=labels,
            label_selector=label_selector,
            fields=fields,
            field_selector=field_selector,
        )
        mapping = await self.mapping(kind)
        path = resource_path(mapping, namespace=opts.namespace, all_namespaces=True)
        if mapping.namespaced and not opts.namespace:
            raise ValueError("delete_all_of on a namespaced kind needs a namespace")
        body = delete_options(
            propagation_policy=propagation_policy, grace_period_seconds=grace_period_seconds, dry_run=dry_run
        )
        await self.transport.request(
            "DELETE", path, params=opts.query(), body=encode(body), content_type="application/json"
        )

    # -- Status and subresources ------------------------------------------------------------------
    def status(self) -> StatusWriterImpl:
        """The ``status`` subresource writer (controller-runtime ``Status()``)."""
        return StatusWriterImpl(self)

    def subresource(self, name: str) -> SubResourceClientImpl:
        """A client for any subresource (controller-runtime ``SubResource(name)``)."""
        if not name or "/" in name:
            raise ValueError(f"invalid subresource name {name!r}")
        return SubResourceClientImpl(self, name)

    # -- Watch ------------------------------------------------------------------------------------
    async def list_watcher(self, kind: Kind, options: ListOptions) -> RESTListerWatcher:
        """The raw list/watch source of ``kind`` for an informer."""
        mapping = await self.mapping(kind)
        path = resource_path(mapping, namespace=options.namespace, all_namespaces=True)
        return RESTListerWatcher(self.transport, path, options)

    @overload
    def watch(
        self, kind: type[T], *, resource_version: str = "", timeout_seconds: int = 300, **options: Any
    ) -> AsyncIterator[WatchEvent[T]]: ...
    @overload
    def watch(
        self,
        kind: GroupVersionKind,
        *,
        resource_version: str = "",
        timeout_seconds: int = 300,
        **options: Any,
    ) -> AsyncIterator[WatchEvent[dict[str, Any]]]: ...
    async def watch(
        self, kind: Kind, *, resource_version: str = "", timeout_seconds: int = 300, **options: Any
    ) -> AsyncIterator[WatchEvent[Any]]:
        """Watch ``kind`` from ``resource_version`` (``list`` keyword filters apply); bookmarks included.

        The stream ends when the server closes it (``timeout_seconds``); errors are raised.
        """
        lw = await self.list_watcher(kind, ListOptions.build(**options))
        async for event in lw.watch(resource_version=resource_version, timeout_seconds=timeout_seconds):
            yield WatchEvent(event.type, decode(kind, _with_type_meta(event.object, kind_gvk(kind))))
