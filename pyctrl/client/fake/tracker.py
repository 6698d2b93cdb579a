"""The fake client's object tracker: storage, resourceVersions, watch history, field ownership.

Mirrors client-go ``testing.ObjectTracker`` and, for server-side apply, a simplified
``structured-merge-diff``.

Guarantees:

- objects are stored as JSON bytes: nothing a caller holds aliases stored state;
- one global, strictly increasing resourceVersion; every write gets the next one;
- every write is recorded as a watch event; a watch from resourceVersion ``rv`` replays the events
  after ``rv`` still in the history (10,000 events) and raises ``Gone`` for an older ``rv``;
- field ownership (``managers``) is tracked per object at leaf granularity — maps are descended,
  lists are atomic leaves (real SSA merges keyed lists item by item; this is the simplification).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from pyctrl.client.gvk import GroupVersionKind

__all__ = ["Path", "Tracker", "leaf_paths", "merge_applied", "remove_path", "value_at"]

Key = tuple[str, str]
Path = tuple[str, ...]
_HISTORY = 10_000
#: Identity and bookkeeping fields nobody "owns".
_UNOWNED = {
    ("apiVersion",),
    ("kind",),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "resourceVersion"),
    ("metadata", "uid"),
    ("metadata", "generation"),
    ("metadata", "creationTimestamp"),
    ("metadata", "deletionTimestamp"),
    ("metadata", "managedFields"),
}
_MISSING: Any = object()


def leaf_paths(obj: Any, prefix: Path = ()) -> Iterator[Path]:
    """Paths to every leaf value (maps descended, lists and scalars are leaves)."""
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            yield from leaf_paths(value, (*prefix, key))
    elif prefix and prefix not in _UNOWNED:
        yield prefix


def value_at(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def remove_path(obj: dict[str, Any], path: Path) -> None:
    """Delete the leaf at ``path`` and the maps it leaves empty."""
    parents = [obj]
    for part in path[:-1]:
        nxt = parents[-1].get(part)
        if not isinstance(nxt, dict):
            return
        parents.append(nxt)
    parents[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if not parents[depth]:
            parents[depth - 1].pop(path[depth - 1], None)


def merge_applied(current: dict[str, Any], applied: dict[str, Any]) -> dict[str, Any]:
    """Overlay an applied configuration on an object (maps merged, lists and scalars replaced)."""
    out = dict(current)
    for key, value in applied.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_applied(out[key], value)
        else:
            out[key] = value
    return out


@dataclass
class _Subscriber:
    gvk: GroupVersionKind
    namespace: str | None
    queue: asyncio.Queue[tuple[str, bytes, int]] = field(default_factory=asyncio.Queue)


class Tracker:
    """In-memory objects of every kind (see the module docstring)."""

    def __init__(self) -> None:
        self.objects: dict[GroupVersionKind, dict[Key, bytes]] = {}
        #: (gvk, key) -> field manager -> owned leaf paths
        self.managers: dict[tuple[GroupVersionKind, Key], dict[str, set[Path]]] = {}
        self._rv = 0
        self._history: deque[tuple[int, GroupVersionKind, str, bytes]] = deque(maxlen=_HISTORY)
        self._subscribers: list[_Subscriber] = []

    @property
    def resource_version(self) -> int:
        return self._rv

    def next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def get(self, gvk: GroupVersionKind, key: Key) -> dict[str, Any] | None:
        data = self.objects.get(gvk, {}).get(key)
        return orjson.loads(data) if data is not None else None

    def items(self, gvk: GroupVersionKind) -> list[tuple[Key, bytes]]:
        return sorted(self.objects.get(gvk, {}).items())

    def put(self, gvk: GroupVersionKind, key: Key, obj: dict[str, Any], event: str) -> bytes:
        data = memoryview(orjson.dumps(obj)).tobytes()  # exact-size copy: orjson allocates 4 KiB
        self.objects.setdefault(gvk, {})[key] = data
        self._emit(gvk, event, data)
        return data

    def remove(self, gvk: GroupVersionKind, key: Key, obj: dict[str, Any]) -> None:
        self.objects.get(gvk, {}).pop(key, None)
        self.managers.pop((gvk, key), None)
        self._emit(gvk, "DELETED", orjson.dumps(obj))

    def _emit(self, gvk: GroupVersionKind, event: str, data: bytes) -> None:
        self._history.append((self._rv, gvk, event, data))
        for sub in self._subscribers:
            if sub.gvk == gvk:
                sub.queue.put_nowait((event, data, self._rv))

    def subscribe(self, gvk: GroupVersionKind, namespace: str | None, since: int) -> _Subscriber:
        """Register a watcher and queue the history after ``since`` (``Gone`` handled by the caller)."""
        sub = _Subscriber(gvk, namespace)
        for rv, g, event, data in self._history:
            if g == gvk and rv > since:
                sub.queue.put_nowait((event, data, rv))
        self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: _Subscriber) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    def oldest_watchable(self) -> int:
        """The smallest resourceVersion a watch may start from."""
        if len(self._history) < (self._history.maxlen or 0):
            return 0
        return self._history[0][0] - 1
