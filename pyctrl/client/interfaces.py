"""The client interfaces: ``Reader``, ``Writer``, ``StatusWriter``, ``SubResourceClient``, ``Client``.

Mirrors controller-runtime ``pkg/client/interfaces.go``. Every implementation — the apiserver
client, the cache-backed split client, the fake client — satisfies these Protocols, so
reconcilers depend on the Protocol and tests swap the implementation. ``ReaderBase`` carries the
typed ``get``/``list`` signatures once for pyctrl's own readers (each implements ``_get``/``_list``).

Call shape (controller-runtime's obj-in, typed-out)::

    cm = await client.get(ConfigMap, "name", namespace="ns")        # -> ConfigMap
    pods = await client.list(Pod, namespace="ns", labels={"app": "redis"})  # -> ObjectList[Pod]
    cm = await client.update(cm)                                     # -> the stored ConfigMap
    await client.status().update(cluster)

A kind is a typed class or a ``GroupVersionKind`` (then objects are plain dicts). Writes return
the object as stored by the apiserver and leave their argument unmodified.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, overload

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import KubeObject
from pyctrl.client.patch import Patch
from pyctrl.client.selectors import FieldSelector, Selector

__all__ = [
    "Client",
    "ListOptions",
    "ObjectList",
    "Preconditions",
    "PropagationPolicy",
    "Reader",
    "ReaderBase",
    "StatusWriter",
    "SubResourceClient",
    "Writer",
]

T = TypeVar("T", bound=KubeObject)
ObjT = TypeVar("ObjT", bound=KubeObject | dict[str, Any])
ItemT = TypeVar("ItemT")

PropagationPolicy = Literal["Foreground", "Background", "Orphan"]


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


@dataclass(frozen=True, slots=True)
class Preconditions:
    """Delete only if the object still has this uid / resourceVersion (else ``Conflict``)."""

    uid: str | None = None
    resource_version: str | None = None


@dataclass(frozen=True)
class ListOptions:
    """Normalised list/watch filters (built from the keyword arguments of ``list``)."""

    namespace: str | None = None
    label_selector: Selector = field(default_factory=Selector)
    field_selector: FieldSelector = field(default_factory=FieldSelector)
    limit: int | None = None
    continue_: str | None = None

    @classmethod
    def build(
        cls,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        label_selector: str | Selector | None = None,
        fields: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ListOptions:
        """Combine ``labels`` (equality) with ``label_selector``, ``fields`` with ``field_selector``."""
        sel = Selector.parse(label_selector) if isinstance(label_selector, str) else label_selector
        reqs = (*(sel.requirements if sel else ()), *Selector.from_labels(labels or {}).requirements)
        fsel = FieldSelector.parse(field_selector) if isinstance(field_selector, str) else field_selector
        clauses = (*(fsel.clauses if fsel else ()), *FieldSelector.from_fields(fields or {}).clauses)
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        return cls(
            namespace or None, Selector(reqs), FieldSelector(clauses), limit or None, continue_ or None
        )

    def as_kwargs(self) -> dict[str, Any]:
        """These options as keyword arguments of ``Reader.list`` (to hand them to another reader)."""
        return {
            "namespace": self.namespace,
            "label_selector": self.label_selector,
            "field_selector": self.field_selector,
            "limit": self.limit,
            "continue_": self.continue_,
        }

    def query(self) -> dict[str, Any]:
        """The query parameters for the apiserver."""
        return {
            "labelSelector": str(self.label_selector) or None,
            "fieldSelector": str(self.field_selector) or None,
            "limit": self.limit,
            "continue": self.continue_,
        }


class Reader(Protocol):
    """controller-runtime ``client.Reader``: get and list."""

    @overload
    async def get(self, kind: type[T], name: str, *, namespace: str | None = None) -> T: ...
    @overload
    async def get(
        self, kind: GroupVersionKind, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]: ...

    @overload
    async def list(
        self,
        kind: type[T],
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        label_selector: str | Selector | None = None,
        fields: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ObjectList[T]: ...
    @overload
    async def list(
        self,
        kind: GroupVersionKind,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        label_selector: str | Selector | None = None,
        fields: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ObjectList[dict[str, Any]]: ...


class ReaderBase(ABC):
    """The typed ``get``/``list`` of :class:`Reader`, written once for every implementation.

    A subclass implements :meth:`_get` and :meth:`_list`; the overloads give callers a typed
    object for a class and a dict for a ``GroupVersionKind``, and ``list`` options are parsed
    and checked (:meth:`ListOptions.build`) before :meth:`_list` sees them.
    """

    @overload
    async def get(self, kind: type[T], name: str, *, namespace: str | None = None) -> T: ...
    @overload
    async def get(
        self, kind: GroupVersionKind, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]: ...
    async def get(
        self, kind: type[KubeObject] | GroupVersionKind, name: str, *, namespace: str | None = None
    ) -> Any:
        return await self._get(kind, name, namespace)

    @overload
    async def list(
        self,
        kind: type[T],
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        label_selector: str | Selector | None = None,
        fields: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ObjectList[T]: ...
    @overload
    async def list(
        self,
        kind: GroupVersionKind,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        label_selector: str | Selector | None = None,
        fields: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ObjectList[dict[str, Any]]: ...
    async def list(self, kind: type[KubeObject] | GroupVersionKind, **options: Any) -> ObjectList[Any]:
        return await self._list(kind, ListOptions.build(**options))

    @abstractmethod
    async def _get(self, kind: type[KubeObject] | GroupVersionKind, name: str, namespace: str | None) -> Any:
        """The object ``name`` (typed for a class, a dict for a GVK); ``NotFound`` when absent."""

    @abstractmethod
    async def _list(self, kind: type[KubeObject] | GroupVersionKind, opts: ListOptions) -> ObjectList[Any]:
        """The objects matching ``opts`` (typed for a class, dicts for a GVK)."""


class Writer(Protocol):
    """controller-runtime ``client.Writer``: create, update, patch, apply, delete, delete_all_of."""

    async def create(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT: ...

    async def update(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT: ...

    async def patch(
        self,
        obj: ObjT,
        patch: Patch,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> ObjT: ...

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT: ...

    async def delete(
        self,
        obj: KubeObject | dict[str, Any],
        *,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None: ...

    async def delete_all_of(
        self,
        kind: type[KubeObject] | GroupVersionKind,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        label_selector: str | Selector | None = None,
        fields: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        propagation_policy: PropagationPolicy | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None: ...


class StatusWriter(Protocol):
    """controller-runtime ``client.SubResourceWriter`` for ``status``: writes only ``.status``."""

    async def update(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT: ...

    async def patch(
        self,
        obj: ObjT,
        patch: Patch,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> ObjT: ...

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT: ...


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
