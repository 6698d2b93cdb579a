"""Requests on one object's URL or one of its subresources: the writes of
:class:`~pyctrl.client.ApiClient`, its ``status`` writer and its generic subresource client.

Mirrors controller-runtime ``client.SubResourceWriter``/``SubResourceClient`` (``Status()``,
``SubResource("scale")``). :class:`ObjectRequests` depends only on an :class:`Endpoint` (a
transport and the REST mapping of kinds), not on the client, so the main resource, ``status``
and any other subresource share one implementation of each request.

Guarantees: status writes go to ``<object>/status`` and answer the whole object; other
subresources take and answer their own type (``Scale`` for ``scale``); answers are decoded into
the argument's type (a typed object or a fresh dict); server-side apply bodies never carry
``managedFields`` (:data:`~pyctrl.client.patch.Apply`).
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from pyctrl.client.interfaces import ObjectWriterBase, ObjT, T, stored
from pyctrl.client.objects import KubeObject
from pyctrl.client.options import PatchOptions, UpdateOptions
from pyctrl.client.patch import Patch
from pyctrl.client.rest import HTTPRequest, HTTPTransport
from pyctrl.client.restmapper import RESTMapping, resource_path
from pyctrl.client.scheme import Kind, Object, decode, encode, kind_of

__all__ = ["Endpoint", "ObjectRequests", "StatusWriterImpl", "SubResourceClientImpl", "name_ns"]


_JSON = "application/json"


class Endpoint(Protocol):
    """Where requests go: a transport, and the REST mapping of a kind (``ApiClient`` is one)."""

    @property
    def transport(self) -> HTTPTransport: ...

    async def mapping(self, kind: Kind) -> RESTMapping: ...


def name_ns(obj: Object) -> tuple[str, str | None]:
    if isinstance(obj, KubeObject):  # attributes: no dump of the metadata (managedFields and all)
        return obj.metadata.name or "", obj.metadata.namespace or None
    meta = obj.get("metadata") or {}
    return str(meta.get("name") or ""), meta.get("namespace") or None


class ObjectRequests:
    """PUT/PATCH/POST/GET/DELETE on ``<object>[/<subresource>]`` through an :class:`Endpoint`."""

    def __init__(self, endpoint: Endpoint, subresource: str | None = None) -> None:
        self._endpoint, self.subresource = endpoint, subresource

    async def path(self, obj: Object) -> str:
        mapping = await self._endpoint.mapping(kind_of(obj))
        name, namespace = name_ns(obj)
        return resource_path(mapping, namespace=namespace, name=name, subresource=self.subresource)

    async def send(self, obj: Object, request: HTTPRequest) -> bytes:
        """``request`` on the object's URL (``request.path``, usually empty, is appended to it)."""
        r = request  # with the object's path before its own (dataclasses.replace costs 6x this)
        path = await self.path(obj) + r.path
        request = HTTPRequest(r.method, path, r.params, r.body, r.content_type, r.timeout, r.accept)
        return await self._endpoint.transport.send(request)

    async def put(self, obj: ObjT, opts: UpdateOptions) -> ObjT:
        data = await self.send(obj, HTTPRequest("PUT", "", opts.query(), encode(obj), _JSON))
        return stored(obj, decode(kind_of(obj), data))

    async def patch(self, obj: ObjT, patch: Patch, opts: PatchOptions) -> ObjT:
        body, content_type = patch.data(obj), patch.patch_type.value
        data = await self.send(obj, HTTPRequest("PATCH", "", opts.query(), body, content_type))
        return stored(obj, decode(kind_of(obj), data))


class StatusWriterImpl(ObjectWriterBase):
    """``client.status()``: writes go to ``<object>/status``; the response is the whole object."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._requests = ObjectRequests(endpoint, "status")

    async def _update(self, obj: ObjT, opts: UpdateOptions) -> ObjT:
        return await self._requests.put(obj, opts)

    async def _patch(self, obj: ObjT, patch: Patch, opts: PatchOptions) -> ObjT:
        return await self._requests.patch(obj, patch, opts)


class SubResourceClientImpl:
    """``client.subresource(name)``: bodies are the subresource's own type (e.g. ``Scale``)."""

    def __init__(self, endpoint: Endpoint, name: str) -> None:
        if not name or "/" in name:
            raise ValueError(f"invalid subresource name {name!r}")
        self._requests = ObjectRequests(endpoint, name)

    @staticmethod
    def _params(dry_run: bool) -> dict[str, Any]:
        return UpdateOptions(dry_run=dry_run).query()

    async def get(self, obj: Object, into: type[T]) -> T:
        return into.model_validate_json(await self._requests.send(obj, HTTPRequest("GET", "")))

    async def create(self, obj: Object, body: Object, *, dry_run: bool = False) -> dict[str, Any]:
        data = await self._requests.send(
            obj, HTTPRequest("POST", "", self._params(dry_run), encode(body), _JSON)
        )
        result: dict[str, Any] = orjson.loads(data) if data else {}
        return result

    async def update(self, obj: Object, body: T, *, dry_run: bool = False) -> T:
        data = await self._requests.send(
            obj, HTTPRequest("PUT", "", self._params(dry_run), encode(body), _JSON)
        )
        return type(body).model_validate_json(data)

    async def patch(self, obj: Object, patch: Patch, into: type[T], *, dry_run: bool = False) -> T:
        request = HTTPRequest("PATCH", "", self._params(dry_run), patch.data(obj), patch.patch_type.value)
        data = await self._requests.send(obj, request)
        return into.model_validate_json(data)
