"""A scripted in-memory ListerWatcher for the watcher/informer unit tests."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from pyctrl.client.watch import INITIAL_EVENTS_END, RawEvent, RawList


def obj(name: str, rv: str, ns: str = "ns", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}, **extra}


def bookmark(rv: str, *, end: bool = False) -> RawEvent:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return RawEvent("BOOKMARK", {"metadata": meta})


class ScriptedLW:
    """Answers ``list`` from ``lists`` and each ``watch`` with the next script of ``watches``.

    A script is a list of events and exceptions (raised in place); when the scripts run out a
    watch blocks until cancelled. ``calls`` records every request, ``timeouts`` every watch's
    ``timeout_seconds``.
    """

    def __init__(self) -> None:
        self.lists: deque[RawList | Exception] = deque()
        self.watches: deque[list[RawEvent | Exception]] = deque()
        self.calls: list[tuple[Any, ...]] = []
        #: The ``timeout_seconds`` of every watch, in order.
        self.timeouts: list[int] = []

    async def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> RawList:
        self.calls.append(("list", resource_version, limit, continue_))
        item = self.lists.popleft()
        if isinstance(item, Exception):
            raise item
        return item

    async def watch(
        self, *, resource_version: str, timeout_seconds: int, send_initial_events: bool = False
    ) -> AsyncIterator[RawEvent]:
        self.calls.append(("watch", resource_version, send_initial_events))
        self.timeouts.append(timeout_seconds)
        if not self.watches:
            await asyncio.Event().wait()
        for item in self.watches.popleft():
            if isinstance(item, Exception):
                raise item
            yield item
