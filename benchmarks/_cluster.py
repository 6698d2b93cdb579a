"""What the orchestrator does on the apiserver: namespaces, Items, and watching them converge.

The orchestrator talks through pyctrl's :class:`~pyctrl.client.rest.Transport` (orjson, one aiohttp
session, no rate limit) with raw paths, so its own cost stays small next to the program measured.
:class:`Convergence` lists and then watches a namespace's Items and records when each one's
``status.observed`` first equals the expected mark followed by its ``spec.value`` (the programs'
``--mark``): the end of a run is the arrival time of the watch event that converged the last Item,
not the next tick of a poll. ``expect(mark)`` starts over for a program run with another mark, on
the same Items.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from typing import Any

import orjson

from pyctrl.client import NotFound, ServerTimeout, TransportError
from pyctrl.client.rest import Transport

__all__ = ["Convergence", "create_items", "create_namespace", "delete_namespace", "item_names"]

_ITEMS = "/apis/bench.pyctrl.dev/v1/namespaces/{ns}/items"


def item_names(n: int) -> list[str]:
    return [f"item-{i:05d}" for i in range(n)]


def _item(name: str, value: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "bench.pyctrl.dev/v1",
            "kind": "Item",
            "metadata": {"name": name},
            "spec": {"value": value},
        }
    )


async def create_namespace(t: Transport, ns: str) -> None:
    body = orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await t.request("POST", "/api/v1/namespaces", body=body, content_type="application/json")


async def delete_namespace(t: Transport, ns: str, timeout: float = 600.0) -> None:  # noqa: ASYNC109
    """Delete ``ns`` and wait until it is gone (so the next run starts on a quiet apiserver).

    Its Items go first, in one collection delete: the namespace controller would delete 100,000
    of them one by one. The apiserver answers a collection delete that outlives its own request
    timeout (60 s) with 504, or drops the connection (seen at 100,000 Items): it is sent again (each
    round deletes more) until it completes or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await t.request("DELETE", _ITEMS.format(ns=ns), request_timeout=timeout)
            break
        except NotFound:
            break
        except (ServerTimeout, TransportError) as exc:  # 504, or the apiserver dropped the connection
            if time.monotonic() >= deadline:
                raise
            print(f"bench: deleting the Items of {ns}: {exc.__class__.__name__}, sent again", flush=True)
            await asyncio.sleep(1.0)  # a retry's back-off: an apiserver that is gone is not hammered
    with contextlib.suppress(NotFound):
        await t.request("DELETE", f"/api/v1/namespaces/{ns}")
    while time.monotonic() < deadline:
        try:
            await t.request("GET", f"/api/v1/namespaces/{ns}")
        except NotFound:
            return
        await asyncio.sleep(0.5)
    raise TimeoutError(f"namespace {ns} still exists after {timeout:.0f} s")


async def create_items(t: Transport, ns: str, names: Iterable[str], *, parallel: int = 32) -> None:
    """Create an Item per name (``spec.value`` = ``v-<name>``), ``parallel`` requests at a time."""
    path = _ITEMS.format(ns=ns)
    pending = iter(names)

    async def creator() -> None:
        for name in pending:
            await t.request("POST", path, body=_item(name, f"v-{name}"), content_type="application/json")

    await asyncio.gather(*(creator() for _ in range(parallel)))


class Convergence:
    """Watches the Items of one namespace; ``wait(names)`` returns when all of them converged."""

    def __init__(self, t: Transport, ns: str, mark: str = "") -> None:
        self._t, self._path = t, _ITEMS.format(ns=ns)
        self._mark = mark
        #: name -> (spec.value, status.observed) of the newest copy seen
        self._latest: dict[str, tuple[str, str | None]] = {}
        self.converged_at: dict[str, float] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Convergence:
        doc = orjson.loads(await self._t.request("GET", self._path))
        for obj in doc["items"]:
            self._see(obj)
        rv = doc["metadata"]["resourceVersion"]
        self._task = asyncio.create_task(self._watch(rv))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def expect(self, mark: str) -> None:
        """From now on an Item is converged when ``status.observed`` is ``mark`` + ``spec.value``;
        ``converged_at`` starts over (Items that already are count as converged now)."""
        self._mark = mark
        self.converged_at = {}
        for name, (value, observed) in self._latest.items():
            self._check(name, value, observed)

    def _see(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        value, observed = obj["spec"]["value"], (obj.get("status") or {}).get("observed")
        self._latest[name] = (value, observed)
        self._check(name, value, observed)

    def _check(self, name: str, value: str, observed: str | None) -> None:
        if name not in self.converged_at and observed is not None and observed == self._mark + value:
            self.converged_at[name] = time.perf_counter()
            self._changed.set()

    async def _watch(self, rv: str) -> None:
        """Follow the namespace from ``rv``; a stream the server ends is resumed where it stopped."""
        while True:
            params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
            async for line in self._t.stream_lines(self._path, params=params):
                event = orjson.loads(line)
                if event["type"] == "ERROR":
                    raise RuntimeError(f"watch of {self._path} failed: {event['object']}")
                rv = event["object"]["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    self._see(event["object"])

    async def wait(
        self,
        names: Iterable[str],
        timeout: float,  # noqa: ASYNC109
        alive: Any = None,
        *,
        at_least: int | None = None,
    ) -> float:
        """Wait until every name (or ``at_least`` of them) converged; return the time the last
        one seen did (``perf_counter``).

        ``alive()`` is checked while waiting: when it returns False the wait fails at once.
        """
        wanted = set(names)
        need = len(wanted) if at_least is None else at_least
        deadline = time.monotonic() + timeout
        while len(wanted & self.converged_at.keys()) < need:
            if self._task is not None and self._task.done():
                self._task.result()
                raise RuntimeError("the convergence watch ended")
            if alive is not None and not alive():
                raise RuntimeError("the program under test exited")
            left = deadline - time.monotonic()
            if left <= 0:
                missing = len(wanted - self.converged_at.keys())
                raise TimeoutError(f"{missing} of {len(wanted)} Items not converged after {timeout:.0f} s")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 1.0))
        return max(self.converged_at[n] for n in wanted & self.converged_at.keys())
