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
from typing import Any, TypeVar

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.interfaces import (
    Client,
    ListOptions,
    ObjectList,
    Preconditions,
    PropagationPolicy,
    Reader,
    ReaderBase,
    StatusWriter,
    SubResourceClient,
)
from pyctrl.client.objects import KubeObject
from pyctrl.client.patch import Patch
from pyctrl.client.scheme import Kind, kind_gvk

__all__ = ["SplitClient"]

T = TypeVar("T", bound=KubeObject)
ObjT = TypeVar("ObjT", bound=KubeObject | dict[str, Any])


class SplitClient(ReaderBase):
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

    @property
    def api_reader(self) -> Reader:
        """Reads that bypass the cache (controller-runtime ``GetAPIReader``)."""
        return self.client

    def _reader(self, kind: Kind) -> Reader:
        if kind_gvk(kind) in self._uncached:
            return self.client
        if isinstance(kind, GroupVersionKind) and not self._cache_unstructured:
            return self.client
        return self.cache

    async def _get(self, kind: Kind, name: str, namespace: str | None) -> Any:
        return await self._reader(kind).get(kind, name, namespace=namespace)

    async def _list(self, kind: Kind, opts: ListOptions) -> ObjectList[Any]:
        reader = self._reader(kind)
        if isinstance(reader, ReaderBase):  # pyctrl's own readers take the parsed options as they are
            return await reader._list(kind, opts)
        return await reader.list(kind, **opts.as_kwargs())

    async def create(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT:
        return await self.client.create(obj, dry_run=dry_run, field_manager=field_manager)

    async def update(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT:
        return await self.client.update(obj, dry_run=dry_run, field_manager=field_manager)

    async def patch(
        self,
        obj: ObjT,
        patch: Patch,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> ObjT:
        return await self.client.patch(obj, patch, dry_run=dry_run, field_manager=field_manager, force=force)

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT:
        return await self.client.apply(obj, field_manager=field_manager, force=force, dry_run=dry_run)

    async def delete(
        self,
        obj: KubeObject | dict[str, Any],
        *,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        await self.client.delete(
            obj,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
        )

    async def delete_all_of(self, kind: Kind, **options: Any) -> None:
        await self.client.delete_all_of(kind, **options)

    def status(self) -> StatusWriter:
        return self.client.status()

    def subresource(self, name: str) -> SubResourceClient:
        return self.client.subresource(name)
