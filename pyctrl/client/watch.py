"""Watch streams and the list/watch source informers consume.

Mirrors apimachinery ``pkg/watch`` (event types, the JSON-lines stream decoder) and client-go
``tools/cache.ListerWatcher``.

Guarantees:

- :func:`parse_event` turns one line of a watch stream into a :class:`RawEvent`; a line that is
  not a JSON watch event raises :class:`~pyctrl.client.errors.TransportError` (the stream is
  unusable), an ``ERROR`` event raises the :class:`~pyctrl.client.errors.ApiError` its ``Status``
  maps to (``Gone``/``Expired`` for a too-old resourceVersion);
- ``BOOKMARK`` events are passed through (they carry only a resourceVersion and, for a streaming
  list, the ``k8s.io/initial-events-end`` annotation);
- :class:`RESTListerWatcher` lists and watches one kind with fixed namespace and selectors, raw
  (parsed dicts, no typed decoding): the reflector keeps bytes, so typing would be wasted work;
- ``metadata_only=True`` asks for the ``PartialObjectMetadata(List)`` representation
  (:data:`ACCEPT_METADATA_LIST` / :data:`ACCEPT_METADATA`, client-go ``metadata`` client's JSON
  media types, without a fallback to the full form) and checks what came back: a 406, or an answer
  in another representation, raises :class:`~pyctrl.client.errors.NotAcceptable` naming the path.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, Unpack, overload

import orjson

from pyctrl.client.errors import NotAcceptable, TransportError, api_error_from_status, failure_status
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import KubeObject, PartialObjectMetadata
from pyctrl.client.options import ListKwargs, ListOptions
from pyctrl.client.rest import HTTPRequest, HTTPTransport, parse_json
from pyctrl.client.scheme import Kind, decode, kind_gvk

__all__ = [
    "ACCEPT_METADATA",
    "ACCEPT_METADATA_LIST",
    "INITIAL_EVENTS_END",
    "EventType",
    "ListerWatcher",
    "RESTListerWatcher",
    "RawEvent",
    "RawList",
    "WatchBase",
    "WatchEvent",
    "metadata_not_served",
    "parse_event",
    "require_metadata",
]

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
#: Annotation on the bookmark that ends a streaming list (``sendInitialEvents=true``).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_TYPES = frozenset(("ADDED", "MODIFIED", "DELETED", "BOOKMARK"))

ItemT = TypeVar("ItemT")


@dataclass(frozen=True, slots=True)
class RawEvent:
    type: EventType
    object: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WatchEvent(Generic[ItemT]):
    """A decoded watch event (``client.watch`` yields these)."""

    type: EventType
    object: ItemT


@dataclass(frozen=True, slots=True)
class RawList:
    items: list[dict[str, Any]]
    resource_version: str
    continue_: str | None


def parse_event(line: bytes) -> RawEvent:
    """Decode one JSON line of a watch stream (see the module docstring for errors)."""
    try:
        doc = orjson.loads(line)
        kind, obj = doc["type"], doc["object"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise TransportError(f"malformed watch event: {line[:200]!r}") from exc
    if kind == "ERROR":
        raise api_error_from_status(obj, obj.get("code") if isinstance(obj, dict) else None)
    if kind not in _TYPES or not isinstance(obj, dict):
        raise TransportError(f"unknown watch event type {kind!r}")
    return RawEvent(kind, obj)


class ListerWatcher(Protocol):
    """client-go ``ListerWatcher`` for one kind, namespace and selector, on raw dicts."""

    async def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> RawList: ...

    def watch(
        self, *, resource_version: str, timeout_seconds: int, send_initial_events: bool = False
    ) -> AsyncIterator[RawEvent]: ...


#: ``Accept`` of the metadata-only representations (client-go ``metadata`` client's JSON ones).
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def require_metadata(doc: dict[str, Any], kind: str, what: str) -> None:
    """Raise :class:`NotAcceptable` unless ``doc`` is a ``kind`` (``PartialObjectMetadata(List)``)."""
    if doc.get("kind") != kind or doc.get("apiVersion") != PartialObjectMetadata.API_VERSION:
        got = f"{doc.get('apiVersion')}/{doc.get('kind')}"
        raise NotAcceptable(
            failure_status(
                "NotAcceptable", 406, f"{what}: the server answered {got}, not the {kind} asked for"
            )
        )


def metadata_not_served(exc: NotAcceptable, kind: str, what: str) -> NotAcceptable:
    """The apiserver's 406 for a metadata-only request, saying what was asked."""
    return NotAcceptable(
        failure_status("NotAcceptable", 406, f"{what}: the server does not serve {kind}: {exc.message}")
    )


class RESTListerWatcher:
    """Lists and watches a collection path on the apiserver (``metadata_only``: the
    ``PartialObjectMetadata`` representation, checked; :class:`NotAcceptable` if not served)."""

    def __init__(
        self, transport: HTTPTransport, path: str, options: ListOptions, *, metadata_only: bool = False
    ) -> None:
        self._transport, self._path = transport, path
        self._metadata_only = metadata_only
        self._selectors = {
            "labelSelector": str(options.label_selector) or None,
            "fieldSelector": str(options.field_selector) or None,
        }

    async def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> RawList:
        params = {
            **self._selectors,
            "resourceVersion": None if continue_ else resource_version,
            "limit": limit,
            "continue": continue_,
        }
        what = f"list {self._path}"
        if not self._metadata_only:
            doc = parse_json(await self._transport.send(HTTPRequest("GET", self._path, params)), what)
        else:
            try:
                body = await self._transport.send(
                    HTTPRequest("GET", self._path, params, accept=ACCEPT_METADATA_LIST)
                )
            except NotAcceptable as exc:
                raise metadata_not_served(exc, "PartialObjectMetadataList", what) from exc
            doc = parse_json(body, what)
            require_metadata(doc, "PartialObjectMetadataList", what)
        meta = doc.get("metadata") or {}
        return RawList(
            doc.get("items") or [], str(meta.get("resourceVersion", "")), meta.get("continue") or None
        )

    async def watch(
        self, *, resource_version: str, timeout_seconds: int, send_initial_events: bool = False
    ) -> AsyncIterator[RawEvent]:
        params: dict[str, Any] = {
            **self._selectors,
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
        }
        if send_initial_events:
            params["sendInitialEvents"] = True
            params["resourceVersionMatch"] = "NotOlderThan"
        accept = ACCEPT_METADATA if self._metadata_only else None
        request = HTTPRequest("GET", self._path, params, timeout=timeout_seconds + 30, accept=accept)
        what = f"watch {self._path}"
        lines = self._transport.stream(request)
        async with contextlib.aclosing(lines):  # an error event must close the HTTP stream at once
            while True:
                try:
                    event = parse_event(await anext(lines))
                except StopAsyncIteration:
                    return
                except NotAcceptable as exc:
                    if accept:
                        raise metadata_not_served(exc, "PartialObjectMetadata", what) from exc
                    raise
                if accept and event.type != "BOOKMARK":
                    require_metadata(event.object, "PartialObjectMetadata", what)
                yield event


def with_type_meta(item: dict[str, Any], gvk: GroupVersionKind) -> dict[str, Any]:
    """``item`` with its ``apiVersion``/``kind`` (the apiserver leaves them out of list items)."""
    item.setdefault("apiVersion", gvk.api_version)
    item.setdefault("kind", gvk.kind)
    return item


_T = TypeVar("_T", bound=KubeObject)


class WatchBase(ABC):
    """``watch`` written once over :meth:`list_watcher` (the informers' raw source)."""

    @abstractmethod
    async def list_watcher(self, kind: Kind, options: ListOptions) -> ListerWatcher:
        """The raw list/watch source of ``kind`` for an informer."""

    @overload
    def watch(
        self,
        kind: type[_T],
        *,
        resource_version: str = "",
        timeout_seconds: int = 300,
        **options: Unpack[ListKwargs],
    ) -> AsyncGenerator[WatchEvent[_T], None]: ...
    @overload
    def watch(
        self,
        kind: GroupVersionKind,
        *,
        resource_version: str = "",
        timeout_seconds: int = 300,
        **options: Unpack[ListKwargs],
    ) -> AsyncGenerator[WatchEvent[dict[str, Any]], None]: ...
    async def watch(
        self,
        kind: Kind,
        *,
        resource_version: str = "",
        timeout_seconds: int = 300,
        **options: Unpack[ListKwargs],
    ) -> AsyncGenerator[WatchEvent[Any], None]:
        """Watch ``kind`` from ``resource_version`` (now when empty; ``list`` keyword filters
        apply); bookmarks included. The stream ends when the server closes it
        (``timeout_seconds``); errors are raised. Close it (``contextlib.aclosing``) to end the
        HTTP stream before then."""
        lw = await self.list_watcher(kind, ListOptions.build(**options))
        events = lw.watch(resource_version=resource_version, timeout_seconds=timeout_seconds)
        try:
            async for event in events:
                yield WatchEvent(event.type, decode(kind, with_type_meta(event.object, kind_gvk(kind))))
        finally:
            if isinstance(events, AsyncGenerator):  # closed with this one: the stream ends at once
                await events.aclose()
