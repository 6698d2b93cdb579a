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

from typing import Any

from pyctrl.client.config import Config
from pyctrl.client.errors import NotAcceptable
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.interfaces import (
    GetOptions,
    ListOptions,
    ObjectList,
    ObjT,
    ReaderBase,
    WriterBase,
    stored,
)
from pyctrl.client.objects import KubeObject, is_metadata_only
from pyctrl.client.options import (
    CreateOptions,
    DeleteAllOfOptions,
    DeleteOptions,
    PatchOptions,
    UpdateOptions,
)
from pyctrl.client.patch import Patch
from pyctrl.client.rest import HTTPRequest, HTTPTransport, Transport, parse_json
from pyctrl.client.restmapper import DiscoveryRESTMapper, RESTMapper, RESTMapping, resource_path
from pyctrl.client.scheme import Kind, Scheme, decode, default_scheme, encode, kind_gvk, kind_of
from pyctrl.client.subresource import (
    ObjectRequests,
    StatusWriterImpl,
    SubResourceClientImpl,
    name_ns,
)
from pyctrl.client.watch import (
    ACCEPT_METADATA,
    ACCEPT_METADATA_LIST,
    RESTListerWatcher,
    WatchBase,
    metadata_not_served,
    require_metadata,
    with_type_meta,
)

__all__ = ["ApiClient"]

_JSON = "application/json"


def decode_list_items(kind: Kind, items: list[dict[str, Any]]) -> list[Any]:
    """Decode raw list items into ``kind`` (unstructured items get their TypeMeta back)."""
    if isinstance(kind, GroupVersionKind):
        return [with_type_meta(i, kind) for i in items]
    return [kind.model_validate(i) for i in items]


class ApiClient(ReaderBase, WriterBase, WatchBase):
    """A :class:`~pyctrl.client.interfaces.Client` that talks to the apiserver directly.

    Use as ``async with ApiClient(await load_config()) as client: ...`` (or call :meth:`close`).

    ``transport`` is the seam every request goes through, watch streams included (an
    :class:`~pyctrl.client.rest.HTTPTransport`; default: :attr:`rest`, the
    :class:`~pyctrl.client.rest.Transport` for ``config``). It may be replaced by a wrapper of
    itself at any time (``pyctrl.testing``'s write recording does); a list/watch source
    (:meth:`list_watcher`, what an informer uses) keeps the transport of the moment it was made,
    so wrap it before starting a cache whose every request the wrapper should see.
    """

    def __init__(
        self,
        config: Config,
        *,
        scheme: Scheme = default_scheme,
        mapper: RESTMapper | None = None,
        transport: HTTPTransport | None = None,
    ):
        self.config = config
        self.scheme = scheme
        self.rest = Transport(config)
        self.transport: HTTPTransport = transport if transport is not None else self.rest
        self.mapper: RESTMapper = mapper or DiscoveryRESTMapper(self.transport)
        self._object = ObjectRequests(self)

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.rest.close()

    async def mapping(self, kind: Kind) -> RESTMapping:
        """The REST mapping of a kind (discovery, cached)."""
        return await self.mapper.mapping(kind_gvk(kind))

    async def _collection(self, kind: Kind, opts: ListOptions) -> tuple[RESTMapping, str]:
        mapping = await self.mapping(kind)
        return mapping, resource_path(mapping, namespace=opts.namespace, all_namespaces=True)

    # -- Reader ---------------------------------------------------------------------------------
    async def _get(self, kind: Kind, name: str, opts: GetOptions) -> Any:
        mapping = await self.mapping(kind)
        path = resource_path(mapping, namespace=opts.namespace, name=name)
        if is_metadata_only(kind):
            return decode(kind, await self._get_metadata(HTTPRequest("GET", path, accept=ACCEPT_METADATA)))
        return decode(kind, await self.transport.send(HTTPRequest("GET", path)))

    async def _list(self, kind: Kind, opts: ListOptions) -> ObjectList[Any]:
        _, path = await self._collection(kind, opts)
        if is_metadata_only(kind):
            doc = await self._get_metadata(
                HTTPRequest("GET", path, opts.query(), accept=ACCEPT_METADATA_LIST)
            )
        else:
            doc = parse_json(await self.transport.send(HTTPRequest("GET", path, opts.query())), f"GET {path}")
        meta = doc.get("metadata") or {}
        return ObjectList(
            decode_list_items(kind, doc.get("items") or []),
            str(meta.get("resourceVersion", "")),
            meta.get("continue") or None,
            meta.get("remainingItemCount"),
        )

    async def _get_metadata(self, request: HTTPRequest) -> dict[str, Any]:
        """A metadata-only GET (``request.accept`` names the representation), checked."""
        what = f"GET {request.path}"
        wanted = (
            "PartialObjectMetadataList" if request.accept == ACCEPT_METADATA_LIST else "PartialObjectMetadata"
        )
        try:
            body = await self.transport.send(request)
        except NotAcceptable as exc:
            raise metadata_not_served(exc, wanted, what) from exc
        doc: dict[str, Any] = parse_json(body, what)
        require_metadata(doc, wanted, what)
        return doc

    # -- Writer ---------------------------------------------------------------------------------
    async def _create(self, obj: ObjT, opts: CreateOptions) -> ObjT:
        mapping = await self.mapping(kind_of(obj))
        path = resource_path(mapping, namespace=name_ns(obj)[1])
        data = await self.transport.send(HTTPRequest("POST", path, opts.query(), encode(obj), _JSON))
        return stored(obj, decode(kind_of(obj), data))

    async def _update(self, obj: ObjT, opts: UpdateOptions) -> ObjT:
        return await self._object.put(obj, opts)

    async def _patch(self, obj: ObjT, patch: Patch, opts: PatchOptions) -> ObjT:
        return await self._object.patch(obj, patch, opts)

    async def _delete(self, obj: KubeObject | dict[str, Any], opts: DeleteOptions) -> None:
        await self._object.send(obj, HTTPRequest("DELETE", "", None, encode(opts.body()), _JSON))

    async def _delete_all_of(self, kind: Kind, opts: DeleteAllOfOptions) -> None:
        selection = opts.list_options
        mapping, path = await self._collection(kind, selection)
        if mapping.namespaced and not selection.namespace:
            raise ValueError("delete_all_of on a namespaced kind needs a namespace")
        body = encode(opts.delete_options.body())
        await self.transport.send(HTTPRequest("DELETE", path, selection.query(), body, _JSON))

    # -- Status and subresources ------------------------------------------------------------------
    def status(self) -> StatusWriterImpl:
        """The ``status`` subresource writer (controller-runtime ``Status()``)."""
        return StatusWriterImpl(self)

    def subresource(self, name: str) -> SubResourceClientImpl:
        """A client for any subresource (controller-runtime ``SubResource(name)``)."""
        return SubResourceClientImpl(self, name)

    # -- Watch ------------------------------------------------------------------------------------
    async def list_watcher(self, kind: Kind, options: ListOptions) -> RESTListerWatcher:
        """The raw list/watch source of ``kind`` for an informer."""
        _, path = await self._collection(kind, options)
        return RESTListerWatcher(self.transport, path, options, metadata_only=is_metadata_only(kind))
