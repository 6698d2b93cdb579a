"""Helpers of the cache tests: informers over a backend, and a recording event handler."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from pyctrl.cache import Backoff, DeletedFinalStateUnknown, Informer, ListWatchSource
from pyctrl.client import ConfigMap, ListOptions
from pyctrl.client.scheme import Kind
from tests.client.support import Backend


async def informer_for(backend: Backend, kind: Kind = ConfigMap, **options: Any) -> Informer:
    source = cast(ListWatchSource, backend.client)
    lw = await source.list_watcher(kind, ListOptions.build(namespace=backend.namespace))
    return Informer(lw, kind, backoff=Backoff(initial=0.05, cap=0.5), **options)


class Recorder:
    """Records handler calls as tuples; ``v`` is ``data["v"]`` of a ConfigMap."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.changed = asyncio.Event()

    def on_add(self, obj: ConfigMap, is_in_initial_list: bool) -> None:
        self.events.append(("add", obj.name, (obj.data or {}).get("v"), is_in_initial_list))

    def on_update(self, old: ConfigMap, new: ConfigMap) -> None:
        self.events.append(("update", new.name, (old.data or {}).get("v"), (new.data or {}).get("v")))

    def on_delete(self, obj: ConfigMap | DeletedFinalStateUnknown[ConfigMap]) -> None:
        tombstone = isinstance(obj, DeletedFinalStateUnknown)
        final = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.events.append(("delete", final.name, (final.data or {}).get("v"), tombstone))

    def of(self, name: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[1] == name]
