"""The split client: reads from the informer cache, writes to the apiserver.

Mirrors controller-runtime's default manager client (``client.New`` with ``Cache.Reader``,
``Options.Cache.DisableFor``, ``Unstructured: false``) and ``mgr.GetAPIReader()``.

Guarantees:

- ``get``/``list`` of a typed kind go to the cache (starting its informer on first use), except
  for kinds in ``uncached``; unstructured kinds (named by GVK) are read from the apiserver unless
  ``cache_unstructured=True``;
- every write (and ``status()``/``subresource()``) goes straight to the apiserver, so a read right
  after a write may still return the older object until the watch delivers the change —
  compare ``resourceVersion`` or requeue, as with controller-runtime;
- :attr:`SplitClient.api_reader` always reads from the apiserver.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.interfaces import (
    Client,
    GetOptions,
    ListOptions,
    ObjectList,
    ObjT,
    Reader,
    ReaderBase,
    StatusWriter,
    SubResourceClient,
    WriterBase,
)
from pyctrl.client.objects import KubeObject
from pyctrl.client.options import (
    CreateOptions,
    DeleteAllOfOptions,
    DeleteOptions,
    PatchOptions,
    UpdateOptions,
)
from pyctrl.client.patch import Patch
from pyctrl.client.scheme import Kind, kind_gvk

__all__ = ["SplitClient"]


class SplitClient(ReaderBase, WriterBase):
    """A ``Client`` that reads through ``cache`` and writes through ``client``."""

    def __init__(
        self,
        cache: Reader,
        client: Client,
        *,
        uncached: Iterable[Kind] = (),
        cache_unstructured: bool = False,
    ) -> None:
        self.cache = cache
        self.client = client
        self._uncached = {kind_gvk(k) for k in uncached}
        self._cache_unstructured = cache_unstructured
        self._routes: dict[Kind, Reader] = {}  # kind -> the reader of its reads, decided once

    @property
    def api_reader(self) -> Reader:
        """Reads that bypass the cache (controller-runtime ``GetAPIReader``)."""
        return self.client

    def _reader(self, kind: Kind) -> Reader:
        reader = self._routes.get(kind)
        if reader is None:
            uncached = kind_gvk(kind) in self._uncached
            unstructured = isinstance(kind, GroupVersionKind) and not self._cache_unstructured
            reader = self._routes[kind] = self.client if uncached or unstructured else self.cache
        return reader

    async def _get(self, kind: Kind, name: str, opts: GetOptions) -> Any:
        reader = self._reader(kind)
        if isinstance(reader, ReaderBase):  # pyctrl's own readers take the parsed options as they are
            return await reader._get(kind, name, opts)
        return await reader.get(kind, name, namespace=opts.namespace)

    async def _list(self, kind: Kind, opts: ListOptions) -> ObjectList[Any]:
        reader = self._reader(kind)
        if isinstance(reader, ReaderBase):  # pyctrl's own readers take the parsed options as they are
            return await reader._list(kind, opts)
        return await reader.list(kind, **opts.kwargs())

    # Writes go to the apiserver client, through its public verbs (it may be any Client).
    async def _create(self, obj: ObjT, opts: CreateOptions) -> ObjT:
        return await self.client.create(obj, **opts.kwargs())

    async def _update(self, obj: ObjT, opts: UpdateOptions) -> ObjT:
        return await self.client.update(obj, **opts.kwargs())

    async def _patch(self, obj: ObjT, patch: Patch, opts: PatchOptions) -> ObjT:
        return await self.client.patch(obj, patch, **opts.kwargs())

    async def _delete(self, obj: KubeObject | dict[str, Any], opts: DeleteOptions) -> None:
        await self.client.delete(obj, **opts.kwargs())

    async def _delete_all_of(self, kind: Kind, opts: DeleteAllOfOptions) -> None:
        await self.client.delete_all_of(kind, **opts.kwargs())

    def status(self) -> StatusWriter:
        return self.client.status()

    def subresource(self, name: str) -> SubResourceClient:
        return self.client.subresource(name)
