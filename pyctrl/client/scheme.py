"""The scheme (GVK ↔ Python type) and the object codec.

Mirrors apimachinery ``runtime.Scheme`` and the ``unstructured`` helpers. A *kind* is named in
pyctrl either by a typed class (``ConfigMap``, a user's ``KubeObject`` subclass) or, for an
unstructured object, by a :class:`~pyctrl.client.gvk.GroupVersionKind`; an *object* is a
:class:`~pyctrl.client.objects.KubeObject` or a plain ``dict`` with ``apiVersion`` and ``kind``.

Guarantees:

- ``decode(kind, encode(obj))`` gives back an equal object (typed models are lossless);
- :func:`encode` produces compact JSON (no ``None`` fields for typed objects);
- a dict lacking ``apiVersion``/``kind``, or a class without ``gvk``, raises
  :class:`~pyctrl.client.errors.UnknownKind` naming what is missing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias, TypeVar

import orjson

from pyctrl.client.errors import UnknownKind
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import KubeObject

__all__ = [
    "Kind",
    "Object",
    "Scheme",
    "decode",
    "default_scheme",
    "encode",
    "gvk_of",
    "kind_gvk",
    "kind_of",
    "meta_of",
    "to_dict",
]

T = TypeVar("T", bound=KubeObject)

_first_lock = threading.Lock()

#: A typed object or an unstructured dict (``apiVersion``, ``kind``, ``metadata``…).
Object: TypeAlias = KubeObject | dict[str, Any]
#: How a kind is named: a typed class, or a GVK for unstructured access.
Kind: TypeAlias = type[KubeObject] | GroupVersionKind


class Scheme:
    """A registry of typed kinds: GVK → class and class → GVK."""

    def __init__(self, types: Iterable[type[KubeObject]] = ()) -> None:
        self._registered: dict[GroupVersionKind, type[KubeObject]] = {}
        #: kinds registered before any other, imported when the scheme is first read (the
        #: default scheme's built-in kinds: a program that never reads it never imports them)
        self._first: Callable[[], Iterable[type[KubeObject]]] | None = None
        self.add(*types)

    @property
    def _by_gvk(self) -> dict[GroupVersionKind, type[KubeObject]]:
        if self._first is not None:
            with _first_lock:  # another thread reads the whole registry too, not a part of it
                if self._first is not None:
                    # as if added before every kind added since: a later kind of the same GVK wins
                    first = {kind_gvk(cls): cls for cls in self._first()}
                    self._registered = first | self._registered
                    self._first = None
        return self._registered

    def add(self, *types: type[KubeObject]) -> None:
        """Register typed kinds (each must define ``gvk``)."""
        for cls in types:
            self._registered[kind_gvk(cls)] = cls

    def type_for(self, gvk: GroupVersionKind) -> type[KubeObject] | None:
        """The registered class for ``gvk``, or ``None`` (use unstructured dicts then)."""
        return self._by_gvk.get(gvk)

    def recognizes(self, gvk: GroupVersionKind) -> bool:
        return gvk in self._by_gvk

    def known_kinds(self) -> list[GroupVersionKind]:
        return sorted(self._by_gvk)

    def copy(self) -> Scheme:
        return Scheme(self._by_gvk.values())


def kind_gvk(kind: Kind) -> GroupVersionKind:
    """The GVK a kind designator stands for."""
    if isinstance(kind, GroupVersionKind):
        return kind
    if isinstance(kind, type) and issubclass(kind, KubeObject):
        gvk = getattr(kind, "gvk", None)
        if isinstance(gvk, GroupVersionKind):
            return gvk
        if kind.__qualname__ == "PartialObjectMetadata":
            raise UnknownKind("PartialObjectMetadata names no kind: use PartialObjectMetadata.of(kind)")
        raise UnknownKind(f"{kind.__qualname__} has no 'gvk' class attribute")
    raise UnknownKind(f"not a kind: {kind!r} (pass a KubeObject subclass or a GroupVersionKind)")


def _builtin_kinds() -> tuple[type[KubeObject], ...]:
    from pyctrl.client.objects import BUILTIN_KINDS, Scale

    return (*BUILTIN_KINDS, Scale)


#: The scheme with the built-in kinds (client-go's ``scheme.Scheme``); add your CRD types to it.
default_scheme = Scheme()
default_scheme._first = _builtin_kinds


def kind_of(obj: Object) -> Kind:
    """The kind an object is decoded as: its class, or the GVK of a dict."""
    return type(obj) if isinstance(obj, KubeObject) else gvk_of(obj)


def gvk_of(obj: Object) -> GroupVersionKind:
    """The GVK of an object (from its class, or from a dict's ``apiVersion``/``kind``)."""
    if isinstance(obj, KubeObject):
        if obj.api_version and obj.kind:
            return GroupVersionKind.from_api_version(obj.api_version, obj.kind)
        return kind_gvk(type(obj))
    if isinstance(obj, dict):
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not api_version or not kind:
            raise UnknownKind("unstructured object needs 'apiVersion' and 'kind'")
        try:
            return GroupVersionKind.from_api_version(str(api_version), str(kind))
        except ValueError as exc:
            raise UnknownKind(str(exc)) from exc
    raise UnknownKind(f"not a Kubernetes object: {type(obj).__name__}")


def meta_of(obj: Object) -> dict[str, Any]:
    """``metadata`` as a read-only dict view (a copy for typed objects)."""
    if isinstance(obj, KubeObject):
        return obj.metadata.model_dump(exclude_none=True)
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def to_dict(obj: Object) -> dict[str, Any]:
    """The wire form of an object as a dict (typed objects are dumped; dicts returned as is)."""
    if isinstance(obj, KubeObject):
        return obj.model_dump(mode="json", exclude_none=True)
    return obj


def encode(obj: Object | Any) -> bytes:
    """Compact JSON bytes of an object (or any JSON-able value, e.g. a patch)."""
    if isinstance(obj, KubeObject):
        return obj.__pydantic_serializer__.to_json(obj, by_alias=True, exclude_none=True)
    return orjson.dumps(obj)


def decode(kind: Kind, data: bytes | dict[str, Any]) -> Any:
    """Decode JSON bytes (or an already parsed dict) into ``kind``: typed instance or fresh dict."""
    if isinstance(kind, type):
        if isinstance(data, dict):
            return kind.model_validate(data)
        return kind.model_validate_json(data)
    if isinstance(data, dict):
        return data
    return orjson.loads(data)
