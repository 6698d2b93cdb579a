"""The client interfaces: ``Reader``, ``Writer``, ``StatusWriter``, ``SubResourceClient``, ``Client``.

Mirrors controller-runtime ``pkg/client/interfaces.go``. Every implementation — the apiserver
client, the cache-backed split client, the fake client — satisfies these Protocols, so
reconcilers depend on the Protocol and tests swap the implementation. ``ReaderBase`` carries the
typed signatures once for pyctrl's own readers and writers (each implements only primitives).

Call shape (controller-runtime's obj-in, typed-out)::

    cm = await client.get(ConfigMap, "name", namespace="ns")        # -> ConfigMap
    pods = await client.list(Pod, namespace="ns", labels={"app": "redis"})  # -> ObjectList[Pod]
    cm = await client.update(cm)                                     # -> the stored ConfigMap
    await client.status().update(cluster)

A kind is a typed class or a ``GroupVersionKind`` (then objects are plain dicts). Writes return
the object as stored by the apiserver and leave their argument unmodified.

Each verb's keywords are spelled once (:mod:`pyctrl.client.options`); ``ReaderBase``,
``ObjectWriterBase`` and ``WriterBase`` parse them into option objects and hand those to the
private primitives (``_get``, ``_list``, ``_create``, ``_update``, ``_patch``, ``_delete``,
``_delete_all_of``), which are all an implementation writes. The reader's options are
re-exported here beside the bases that build them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, Unpack, cast, overload

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import KubeObject
from pyctrl.client.options import (
    CreateOptions,
    DeleteAllOfKwargs,
    DeleteAllOfOptions,
    DeleteKwargs,
    DeleteOptions,
    GetOptions,
    ListKwargs,
    ListOptions,
    PatchKwargs,
    PatchOptions,
    UpdateOptions,
    WriteKwargs,
)
from pyctrl.client.patch import Apply, Patch
from pyctrl.client.scheme import Kind

__all__ = [
    "Client",
    "GetOptions",
    "ListKwargs",
    "ListOptions",
    "ObjectList",
    "ObjectWriterBase",
    "Reader",
    "ReaderBase",
    "StatusWriter",
    "SubResourceClient",
    "Writer",
    "WriterBase",
]

T = TypeVar("T", bound=KubeObject)
ObjT = TypeVar("ObjT", bound=KubeObject | dict[str, Any])
ItemT = TypeVar("ItemT")


@dataclass
class ObjectList(Generic[ItemT]):
    """One list response: the items plus the list's ``resourceVersion`` and paging token."""

    items: list[ItemT]
    resource_version: str = ""
    #: Pass as ``continue_`` to get the next page; ``None`` on the last page.
    continue_: str | None = None
    remaining_item_count: int | None = None

    def __iter__(self) -> Iterator[ItemT]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def stored(obj: ObjT, answer: Any) -> ObjT:
    """``answer`` (decoded into ``obj``'s type by the implementation) typed as ``obj`` is."""
    return cast(ObjT, answer)


class Reader(Protocol):
    """controller-runtime ``client.Reader``: get and list."""

    @overload
    async def get(self, kind: type[T], name: str, *, namespace: str | None = None) -> T:
        """The object named ``name``, as ``kind``; ``NotFound`` when there is none."""

    @overload
    async def get(self, kind: GroupVersionKind, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The object named ``name``, as a dict (a kind known by its GVK only)."""

    @overload
    async def list(self, kind: type[T], **options: Unpack[ListKwargs]) -> ObjectList[T]:
        """The objects the options select, as ``kind``."""

    @overload
    async def list(self, kind: GroupVersionKind, **options: Unpack[ListKwargs]) -> ObjectList[dict[str, Any]]:
        """The objects the options select, as dicts."""


class ReaderBase(ABC):
    """The typed ``get``/``list`` of :class:`Reader`, written once for every implementation.

    A subclass implements :meth:`_get` and :meth:`_list`; the overloads give callers a typed
    object for a class and a dict for a ``GroupVersionKind``, and the options are parsed and
    checked (:class:`~pyctrl.client.options.ListOptions`) before the primitives see them.
    """

    @overload
    async def get(self, kind: type[T], name: str, *, namespace: str | None = None) -> T: ...
    @overload
    async def get(
        self, kind: GroupVersionKind, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]: ...
    async def get(self, kind: Kind, name: str, *, namespace: str | None = None) -> Any:
        return await self._get(kind, name, GetOptions(namespace or None))

    @overload
    async def list(self, kind: type[T], **options: Unpack[ListKwargs]) -> ObjectList[T]: ...
    @overload
    async def list(
        self, kind: GroupVersionKind, **options: Unpack[ListKwargs]
    ) -> ObjectList[dict[str, Any]]: ...
    async def list(self, kind: Kind, **options: Unpack[ListKwargs]) -> ObjectList[Any]:
        return await self._list(kind, ListOptions.build(**options))

    @abstractmethod
    async def _get(self, kind: Kind, name: str, opts: GetOptions) -> Any:
        """The object ``name`` (typed for a class, a dict for a GVK); ``NotFound`` when absent."""

    @abstractmethod
    async def _list(self, kind: Kind, opts: ListOptions) -> ObjectList[Any]:
        """The objects matching ``opts`` (typed for a class, dicts for a GVK)."""


class _ObjectWriter(Protocol):
    """update, patch and apply: what the main resource and the status subresource both offer."""

    async def update(self, obj: ObjT, **options: Unpack[WriteKwargs]) -> ObjT: ...

    async def patch(self, obj: ObjT, patch: Patch, **options: Unpack[PatchKwargs]) -> ObjT: ...

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT: ...


class Writer(_ObjectWriter, Protocol):
    """controller-runtime ``client.Writer``: create, update, patch, apply, delete, delete_all_of."""

    async def create(self, obj: ObjT, **options: Unpack[WriteKwargs]) -> ObjT: ...

    async def delete(self, obj: KubeObject | dict[str, Any], **options: Unpack[DeleteKwargs]) -> None: ...

    async def delete_all_of(self, kind: Kind, **options: Unpack[DeleteAllOfKwargs]) -> None: ...


class StatusWriter(_ObjectWriter, Protocol):
    """controller-runtime ``client.SubResourceWriter`` for ``status``: writes only ``.status``."""


class ObjectWriterBase(ABC):
    """The typed ``update``/``patch``/``apply`` written once; a subclass implements :meth:`_update`
    and :meth:`_patch` (``apply`` is a patch with :data:`~pyctrl.client.patch.Apply`)."""

    async def update(self, obj: ObjT, **options: Unpack[WriteKwargs]) -> ObjT:
        return await self._update(obj, UpdateOptions(**options))

    async def patch(self, obj: ObjT, patch: Patch, **options: Unpack[PatchKwargs]) -> ObjT:
        return await self._patch(obj, patch, PatchOptions.build(patch, **options))

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT:
        opts = PatchOptions.build(Apply, dry_run=dry_run, field_manager=field_manager, force=force)
        return await self._patch(obj, Apply, opts)

    @abstractmethod
    async def _update(self, obj: ObjT, opts: UpdateOptions) -> ObjT:
        """Replace the object (its ``resourceVersion`` guards against lost updates)."""

    @abstractmethod
    async def _patch(self, obj: ObjT, patch: Patch, opts: PatchOptions) -> ObjT:
        """Patch the object with ``patch.data(obj)``; :data:`Apply` is server-side apply."""


class WriterBase(ObjectWriterBase):
    """The typed :class:`Writer` verbs written once: :meth:`_create`, :meth:`_delete` and
    :meth:`_delete_all_of` besides the primitives of :class:`ObjectWriterBase`."""

    async def create(self, obj: ObjT, **options: Unpack[WriteKwargs]) -> ObjT:
        return await self._create(obj, CreateOptions(**options))

    async def delete(self, obj: KubeObject | dict[str, Any], **options: Unpack[DeleteKwargs]) -> None:
        await self._delete(obj, DeleteOptions(**options))

    async def delete_all_of(self, kind: Kind, **options: Unpack[DeleteAllOfKwargs]) -> None:
        await self._delete_all_of(kind, DeleteAllOfOptions.build(**options))

    @abstractmethod
    async def _create(self, obj: ObjT, opts: CreateOptions) -> ObjT:
        """Create the object; ``AlreadyExists`` when it does."""

    @abstractmethod
    async def _delete(self, obj: KubeObject | dict[str, Any], opts: DeleteOptions) -> None:
        """Delete the object (finalizers may keep it, marked for deletion)."""

    @abstractmethod
    async def _delete_all_of(self, kind: Kind, opts: DeleteAllOfOptions) -> None:
        """Delete every object of ``kind`` the selection matches."""


class SubResourceClient(Protocol):
    """controller-runtime ``SubResourceClient`` (``scale``, ``status``, ``eviction``…)."""

    async def get(self, obj: KubeObject | dict[str, Any], into: type[T]) -> T: ...

    async def create(
        self, obj: KubeObject | dict[str, Any], body: KubeObject | dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]: ...

    async def update(self, obj: KubeObject | dict[str, Any], body: T, *, dry_run: bool = False) -> T: ...

    async def patch(
        self, obj: KubeObject | dict[str, Any], patch: Patch, into: type[T], *, dry_run: bool = False
    ) -> T: ...


class Client(Reader, Writer, Protocol):
    """controller-runtime ``client.Client``: reader, writer, status and subresource clients."""

    def status(self) -> StatusWriter: ...

    def subresource(self, name: str) -> SubResourceClient: ...
