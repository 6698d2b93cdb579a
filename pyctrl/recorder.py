"""Kubernetes Events (client-go ``tools/record``: ``EventBroadcaster``, ``EventRecorder`` and the
``EventCorrelator`` that keeps a hot loop from flooding the apiserver).

``recorder.event(obj, "Normal"|"Warning", reason, message)`` never blocks and never raises for
apiserver trouble: events go to the broadcaster's bounded buffer (1,000; further events are
dropped with a log line, as client-go drops on a full channel) and a background task writes them.

Correlation (client-go defaults):
- a repeat of an event already written (same involved object, type, reason, message and source)
  within 10 minutes does not create a new Event: the existing one is patched with ``count + 1``
  and a new ``lastTimestamp``;
- *similar* events (same object, type, reason and source, different messages): from the 10th
  distinct message within 10 minutes on, they go to one Event whose message is
  ``(combined from similar events): <latest message>`` and whose count grows (client-go's
  ``EventAggregator``), so a message carrying an attempt number or a timestamp cannot defeat
  the repeat correlation above;
- a per-object token bucket (burst 25, one token per 5 minutes) drops events beyond it, so a
  reconcile loop stuck emitting events costs the apiserver at most 25 writes, then one per 5 min.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pyctrl import _access
from pyctrl.client.errors import KubernetesError, NotFound
from pyctrl.client.interfaces import Client
from pyctrl.client.patch import PatchType, RawPatch
from pyctrl.client.scheme import gvk_of
from pyctrl.log import get_logger
from pyctrl.workqueue import Clock, RealClock

__all__ = ["EventBroadcaster", "EventRecorder"]

NORMAL, WARNING = "Normal", "Warning"
_DEDUP_WINDOW = 600.0
_BURST, _REFILL_SECONDS = 25, 300.0
_SIMILAR_MAX = 10
_COMBINED_PREFIX = "(combined from similar events): "
_MAX_KEYS = 4096


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    written_at: float


@dataclass
class _Similar:
    messages: set[str]
    at: float


@dataclass
class _Bucket:
    tokens: float
    at: float


class EventBroadcaster:
    """Writes recorded events in the background; a manager runnable (no leader election needed)."""

    needs_leader_election = False

    def __init__(self, client: Client, *, clock: Clock | None = None) -> None:
        self.client = client
        self.clock: Clock = clock if clock is not None else RealClock()
        self.log = get_logger("pyctrl.recorder")
        self._pending: asyncio.Queue[tuple[str, dict[str, Any], str, str, str]] = asyncio.Queue(maxsize=1000)
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()

    def new_recorder(self, component: str) -> EventRecorder:
        return EventRecorder(self, component)

    def submit(self, component: str, involved: dict[str, Any], type_: str, reason: str, message: str) -> None:
        try:
            self._pending.put_nowait((component, involved, type_, reason, message))
        except asyncio.QueueFull:
            self.log.info("Dropping event: buffer full", reason=reason, object=involved.get("name"))

    async def start(self, stop: asyncio.Event) -> None:
        stopping = asyncio.create_task(stop.wait())
        try:
            while True:
                getter = asyncio.create_task(self._pending.get())
                done, _ = await asyncio.wait({getter, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    break
                await self._write(*getter.result())
            while not self._pending.empty():  # flush what was recorded before the stop
                await self._write(*self._pending.get_nowait())
        finally:
            stopping.cancel()

    def _aggregate(self, similar_key: tuple[str, ...], message: str) -> tuple[tuple[str, ...], str]:
        """The correlation key and message to write: the event's own until ``_SIMILAR_MAX``
        distinct messages were seen for ``similar_key`` within the window, then the combined one."""
        now = self.clock.now()
        similar = self._similar.pop(similar_key, None)
        if similar is None or now - similar.at > _DEDUP_WINDOW:
            similar = _Similar(set(), now)
        similar.messages.add(message)
        similar.at = now
        self._similar[similar_key] = similar
        while len(self._similar) > _MAX_KEYS:
            self._similar.popitem(last=False)
        if len(similar.messages) < _SIMILAR_MAX:
            return (*similar_key, message), message
        return similar_key, _COMBINED_PREFIX + message

    def _allow(self, key: tuple[str, ...]) -> bool:
        now = self.clock.now()
        bucket = self._buckets.pop(key, None) or _Bucket(_BURST, now)
        bucket.tokens = min(_BURST, bucket.tokens + (now - bucket.at) / _REFILL_SECONDS)
        bucket.at = now
        self._buckets[key] = bucket
        while len(self._buckets) > _MAX_KEYS:
            self._buckets.popitem(last=False)
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    async def _write(
        self, component: str, involved: dict[str, Any], type_: str, reason: str, message: str
    ) -> None:
        obj_key = (component, involved.get("uid", ""), involved.get("kind", ""), involved.get("name", ""))
        if not self._allow(obj_key):
            return
        key, message = self._aggregate((*obj_key, type_, reason), message)
        seen = self._seen.get(key)
        try:
            if (
                seen is not None
                and self.clock.now() - seen.written_at < _DEDUP_WINDOW
                and await self._bump(seen, message)
            ):
                return
            self._seen[key] = await self._create(component, involved, type_, reason, message)
            self._seen.move_to_end(key)
            while len(self._seen) > _MAX_KEYS:
                self._seen.popitem(last=False)
        except KubernetesError as exc:
            self.log.info("Could not write event", reason=reason, object=involved.get("name"), error=str(exc))

    async def _bump(self, seen: _Seen, message: str) -> bool:
        ref = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": seen.name, "namespace": seen.namespace},
        }
        # the message too: a combined event shows the latest of its similar messages
        patch = RawPatch(
            PatchType.MERGE, {"count": seen.count + 1, "lastTimestamp": _now(), "message": message[:1024]}
        )
        try:
            await self.client.patch(ref, patch)
        except NotFound:
            return False
        seen.count += 1
        seen.written_at = self.clock.now()
        return True

    async def _create(
        self, component: str, involved: dict[str, Any], type_: str, reason: str, message: str
    ) -> _Seen:
        namespace = involved.get("namespace") or "default"
        now = _now()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved.get('name', 'object')}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "involvedObject": involved,
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self.client.create(event)
        return _Seen(event["metadata"]["name"], namespace, 1, self.clock.now())  # type: ignore[index]


class EventRecorder:
    """client-go ``record.EventRecorder`` for one component (the ``source.component`` of events)."""

    def __init__(self, broadcaster: EventBroadcaster, component: str) -> None:
        self.broadcaster = broadcaster
        self.component = component

    def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        """Record an event about ``obj``; ``type_`` is "Normal" or "Warning"."""
        if type_ not in (NORMAL, WARNING):
            raise ValueError(f"event type must be 'Normal' or 'Warning', got {type_!r}")
        if not reason:
            raise ValueError("an event needs a reason")
        gvk = gvk_of(obj)
        involved = {
            "apiVersion": gvk.api_version,
            "kind": gvk.kind,
            "name": _access.name(obj),
            "namespace": _access.namespace(obj),
            "uid": _access.uid(obj),
            "resourceVersion": _access.resource_version(obj),
        }
        self.broadcaster.submit(
            self.component, {k: v for k, v in involved.items() if v}, type_, reason, message
        )

    def eventf(self, obj: Any, type_: str, reason: str, fmt: str, *args: Any) -> None:
        self.event(obj, type_, reason, fmt % args if args else fmt)
