"""The manager on the real control plane: metrics and probe servers, readiness after cache sync,
graceful shutdown, and clear start-up errors for bad input."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pyctrl.builder import BuilderError, ControllerBuilder
from pyctrl.client import HTTPRequest, HTTPTransport
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import ConfigMap, ObjectMeta
from pyctrl.controller import ControllerError
from pyctrl.event import GenericEvent
from pyctrl.handler import enqueue_request_for_object
from pyctrl.manager import Manager, ManagerError
from pyctrl.predicate import generation_changed
from pyctrl.reconcile import Request, Result
from pyctrl.source import Channel
from pyctrl.testing import eventually

from ._manager import WidgetReconciler, is_ready, new_manager, running
from ._util import Widget, let_tasks_run, widget

pytestmark = [pytest.mark.controlplane, pytest.mark.usefixtures("widget_crd")]

EVENT = GroupVersionKind("", "v1", "Event")

METRIC_NAMES = [
    "controller_runtime_reconcile_total",
    "controller_runtime_reconcile_errors_total",
    "controller_runtime_terminal_reconcile_errors_total",
    "controller_runtime_reconcile_panics_total",
    "controller_runtime_reconcile_time_seconds",
    "controller_runtime_max_concurrent_reconciles",
    "controller_runtime_active_workers",
    "controller_runtime_reconcile_timeouts_total",
    "workqueue_depth",
    "workqueue_adds_total",
    "workqueue_queue_duration_seconds",
    "workqueue_work_duration_seconds",
    "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds",
    "workqueue_retries_total",
    "leader_election_master_status",
    "rest_client_requests_total",
]


async def http_get(port: int | None, path: str) -> tuple[int, str]:
    assert port is not None
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


async def test_metrics_endpoint_exposes_the_controller_runtime_and_workqueue_names(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(
        kubeconfig, namespace, leader_election=True, leader_election_id="metrics-test",
        leader_election_namespace=namespace,
    )  # fmt: skip
    name = f"metrics-{namespace}"
    rec = WidgetReconciler(mgr.client)
    ControllerBuilder(mgr).for_(Widget, predicates=[generation_changed]).named(name).complete(rec)
    async with running(mgr):
        await mgr.api_client.create(widget(namespace, "a"))
        await eventually(
            lambda: is_ready(mgr.api_reader, namespace, "a"), within=30, what="a converged", interval=0.01
        )
        status, text = await http_get(mgr.metrics_port, "/metrics")
    assert status == 200
    for metric_name in METRIC_NAMES:
        pattern = rf"^{metric_name}(_bucket)?{{[^}}]*\b(controller|name|host)=\"[^\"]*\""
        assert re.search(pattern, text, re.MULTILINE), f"{metric_name} missing from /metrics"
    assert f'controller_runtime_reconcile_total{{controller="{name}",result="success"}} 1.0' in text
    assert f'workqueue_depth{{controller="{name}",name="{name}"}} 0.0' in text
    assert 'leader_election_master_status{name="metrics-test"} 1.0' in text


class Gate:
    """A transport wrapper holding back list/watch requests for some resources until opened."""

    def __init__(self, inner: HTTPTransport, *resources: str) -> None:
        self.inner = inner
        self.open: dict[str, asyncio.Event] = {r: asyncio.Event() for r in resources}
        self.seen: set[str] = set()

    async def send(self, request: HTTPRequest) -> bytes:
        await self._wait(request.path)
        return await self.inner.send(request)

    async def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        await self._wait(request.path)
        async with contextlib.aclosing(self.inner.stream(request)) as lines:
            async for line in lines:
                yield line

    async def _wait(self, path: str) -> None:
        for resource, event in self.open.items():
            if path.rstrip("/").endswith("/" + resource):
                self.seen.add(resource)
                await event.wait()


async def test_readyz_fails_until_every_informer_has_synced_and_healthz_passes_throughout(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    gate = Gate(mgr.api_client.transport, "widgets", "configmaps")
    mgr.api_client.transport = gate  # before any informer exists: each one's list and watch pass it
    await mgr.cache.get_informer(Widget)  # synced by the manager before it starts controllers
    ControllerBuilder(mgr).for_(ConfigMap).named(f"cm-{namespace}").complete(Noop())  # informer made later
    async with running(mgr):
        await eventually(
            lambda: "widgets" in gate.seen, within=30, what="widget list attempted", interval=0.01
        )
        assert (await http_get(mgr.probe_port, "/readyz"))[0] == 500
        status, text = await http_get(mgr.probe_port, "/readyz?verbose")
        assert status == 500
        assert "[-]cache-sync failed: caches not synced yet" in text
        assert await http_get(mgr.probe_port, "/healthz") == (200, "ok")
        gate.open["widgets"].set()
        await eventually(
            lambda: "configmaps" in gate.seen, within=30, what="controller's informer created", interval=0.01
        )
        assert (await http_get(mgr.probe_port, "/readyz"))[0] == 500
        gate.open["configmaps"].set()
        await eventually(lambda: _status_is(mgr, "/readyz", 200), within=30, what="ready", interval=0.01)
        assert await http_get(mgr.probe_port, "/readyz/ping") == (200, "ok")
        assert (await http_get(mgr.probe_port, "/readyz/nope"))[0] == 404


async def _status_is(mgr: Manager, path: str, want: int) -> bool:
    return (await http_get(mgr.probe_port, path))[0] == want


class Noop:
    async def reconcile(self, request: Request) -> Result:
        return Result()


class Blocking:
    def __init__(self) -> None:
        self.started, self.release = asyncio.Event(), asyncio.Event()
        self.finished = self.cancelled = False

    async def reconcile(self, request: Request) -> Result:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True
        return Result()


async def start_blocking(mgr: Manager) -> tuple[Blocking, asyncio.Event, asyncio.Task[None]]:
    rec, events = Blocking(), asyncio.Queue[GenericEvent]()
    ControllerBuilder(mgr).named(f"block-{id(rec)}").watches(
        Channel(events, enqueue_request_for_object())
    ).complete(rec)
    stop = asyncio.Event()
    task = asyncio.create_task(mgr.start(stop))
    events.put_nowait(GenericEvent(ConfigMap(metadata=ObjectMeta(name="x", namespace="ns"))))
    await asyncio.wait_for(rec.started.wait(), 30)
    return rec, stop, task


async def test_graceful_shutdown_waits_for_the_reconcile_in_flight(kubeconfig: Path, namespace: str) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    rec, stop, task = await start_blocking(mgr)
    stop.set()
    await let_tasks_run()
    assert not task.done()
    rec.release.set()
    await asyncio.wait_for(task, 30)
    assert rec.finished
    assert not rec.cancelled


async def test_graceful_shutdown_is_bounded_by_its_timeout(kubeconfig: Path, namespace: str) -> None:
    mgr = await new_manager(kubeconfig, namespace, graceful_shutdown_timeout=0.2)
    rec, stop, task = await start_blocking(mgr)
    stop.set()
    await asyncio.wait_for(task, 30)  # returns although the reconcile never finishes by itself
    assert rec.cancelled
    assert not rec.finished


class ReturnsNone:
    async def reconcile(self, request: Request) -> None:
        return None


async def test_bad_input_is_reported_when_controllers_are_built(kubeconfig: Path, namespace: str) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    with pytest.raises(
        ControllerError, match=r"ReturnsNone.reconcile is annotated to return .*pyctrl.Result"
    ):
        ControllerBuilder(mgr).for_(Widget).complete(ReturnsNone())
    ControllerBuilder(mgr).for_(Widget).complete(Noop())
    with pytest.raises(BuilderError, match="a controller named 'widget' already exists"):
        ControllerBuilder(mgr).for_(Widget).complete(Noop())
    ControllerBuilder(mgr).for_(ConfigMap).complete(Noop())  # another kind: another default name
    with pytest.raises(BuilderError, match="owns\\(\\) needs for_"):
        ControllerBuilder(mgr).named("orphan").owns(ConfigMap).complete(Noop())
    with pytest.raises(BuilderError, match="only be called once"):
        ControllerBuilder(mgr).for_(Widget).for_(ConfigMap).named("twice").complete(Noop())
    with pytest.raises(BuilderError, match="needs an event handler"):
        ControllerBuilder(mgr).for_(Widget).watches(ConfigMap).named("nohandler").complete(Noop())
    with pytest.raises(BuilderError, match="for_\\(kind\\) or named"):
        ControllerBuilder(mgr).complete(Noop())
    with pytest.raises(ManagerError, match="not a runnable"):
        mgr.add(object())


async def test_a_kind_the_apiserver_does_not_serve_fails_the_start_naming_it(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    gadget = GroupVersionKind("test.pyctrl.dev", "v1", "Gadget")
    ControllerBuilder(mgr).for_(gadget).complete(Noop())
    with pytest.raises(ManagerError, match="Gadget"):
        await asyncio.wait_for(mgr.start(asyncio.Event()), 60)


async def test_with_event_filter_applies_to_kinds_and_leaves_ready_made_sources_alone(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    events = asyncio.Queue[GenericEvent]()
    rec = WidgetReconciler(mgr.client)
    (
        ControllerBuilder(mgr)
        .for_(Widget)
        .watches(Channel(events, enqueue_request_for_object()))
        .with_event_filter(lambda e: "skip" not in (getattr(e, "object", None) or e.object_new).metadata.name)  # type: ignore[union-attr]
        .named(f"filter-{namespace}")
        .complete(rec)
    )
    async with running(mgr):
        await mgr.api_client.create(widget(namespace, "skip-me"))
        await mgr.api_client.create(widget(namespace, "keep"))
        await eventually(
            lambda: is_ready(mgr.api_reader, namespace, "keep"),
            within=30,
            what="keep converged",
            interval=0.01,
        )
        assert rec.calls["skip-me"] == 0
        events.put_nowait(GenericEvent(widget(namespace, "skip-me")))  # the channel is not filtered
        await eventually(
            lambda: is_ready(mgr.api_reader, namespace, "skip-me"),
            within=30,
            what="channel event",
            interval=0.01,
        )


async def test_the_managers_event_recorder_aggregates_repeats_on_the_apiserver(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    recorder = mgr.get_event_recorder_for("widget-controller")
    async with running(mgr):
        w = await mgr.api_client.create(widget(namespace, "a"))
        for _ in range(3):
            recorder.event(w, "Warning", "TooBig", "size exceeds the quota")
        recorder.eventf(w, "Normal", "Scaled", "scaled to %d", 2)

        async def events() -> list[dict[str, Any]]:
            listed = await mgr.api_client.list(EVENT, namespace=namespace)
            return sorted(listed, key=lambda e: str(e["reason"]))

        async def written() -> bool:
            return [(e["reason"], e.get("count")) for e in await events()] == [("Scaled", 1), ("TooBig", 3)]

        await eventually(written, within=30, what="two events, the repeated one with count 3", interval=0.01)
        scaled, too_big = await events()
    assert scaled["message"] == "scaled to 2"
    assert too_big["involvedObject"]["uid"] == w.metadata.uid
    assert too_big["source"]["component"] == "widget-controller"
    assert too_big["lastTimestamp"] >= too_big["firstTimestamp"]
