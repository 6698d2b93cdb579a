"""pyctrl.controller: the result table, workers, timeouts, panics, trigger logging (in memory)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from pyctrl.client.errors import Conflict
from pyctrl.client.objects import ConfigMap, ObjectMeta
from pyctrl.controller import Controller, ControllerError
from pyctrl.event import GenericEvent
from pyctrl.handler import enqueue_request_for_object
from pyctrl.log import from_context
from pyctrl.reconcile import Request, Result, TerminalError
from pyctrl.source import Channel
from pyctrl.testing import eventually
from pyctrl.workqueue import FakeClock

from ._harness import ScriptedReconciler, running_controller
from ._util import let_tasks_run, metric


def counts(name: str, result: str) -> float:
    return metric("controller_runtime_reconcile_total", controller=name, result=result)


def errors(name: str) -> float:
    return metric("controller_runtime_reconcile_errors_total", controller=name)


# -- the result table (REFERENCE "Reconcile results"), one test per row ------------------------


async def test_an_error_is_retried_with_growing_backoff_until_success_then_forgotten() -> None:
    async def fail_three_times(request: Request, call: int) -> Result:
        if call <= 3:
            raise RuntimeError(f"boom {call}")
        return Result()

    rec = ScriptedReconciler({"a": fail_three_times})
    async with running_controller(rec) as h:
        h.send("a")
        await h.step_until(lambda: counts(h.name, "success") == 1, "success after retries", step=0.001)
        assert rec.calls["a"] == 4
        assert h.delays("a") == [0.001, 0.002, 0.004]  # add_rate_limited on each error
        assert h.requeues("a") == 0  # forgotten on success
        assert counts(h.name, "error") == 3
        assert errors(h.name) == 3


async def test_a_terminal_error_is_counted_and_never_retried() -> None:
    async def terminal(request: Request, call: int) -> Result:
        raise TerminalError("invalid spec")

    rec = ScriptedReconciler({"bad": terminal})
    async with running_controller(rec) as h:
        h.send("bad")
        h.send("barrier")  # FIFO with one worker: reconciled after "bad" was handled
        await eventually(lambda: rec.calls["barrier"] == 1, within=10.0, what="barrier", interval=0.01)
        assert rec.calls["bad"] == 1
        assert h.delays("bad") == []  # add_rate_limited was never called for it
        assert h.requeues("bad") == 0
        assert len(h.controller.queue) == 0
        assert metric("controller_runtime_terminal_reconcile_errors_total", controller=h.name) == 1
        assert errors(h.name) == 1
        assert counts(h.name, "error") == 1


async def test_requeue_after_forgets_the_backoff_and_requeues_after_the_delay() -> None:
    async def fail_then_requeue_after(request: Request, call: int) -> Result:
        if call == 1:
            raise RuntimeError("first")
        return Result(requeue_after=30) if call == 2 else Result()

    rec = ScriptedReconciler({"a": fail_then_requeue_after})
    async with running_controller(rec) as h:
        h.send("a")
        await h.step_until(lambda: rec.calls["a"] == 2, "the retry after the error", step=0.001)
        await eventually(
            lambda: h.requeues("a") == 0, within=10.0, what="forget after requeue_after", interval=0.01
        )
        h.clock.step(29.9)
        await let_tasks_run()
        assert rec.calls["a"] == 2  # not before the delay has passed on the controller's clock
        h.clock.step(0.1)
        await eventually(
            lambda: counts(h.name, "success") == 1, within=10.0, what="the timed requeue", interval=0.01
        )
        assert rec.calls["a"] == 3
        assert h.delays("a") == [0.001]  # only the error consulted the rate limiter
        assert counts(h.name, "requeue_after") == 1


async def test_requeue_true_uses_the_rate_limiter_and_counts_as_requeue() -> None:
    async def requeue_twice(request: Request, call: int) -> Result:
        return Result(requeue=call <= 2)

    rec = ScriptedReconciler({"a": requeue_twice})
    async with running_controller(rec) as h:
        h.send("a")
        await h.step_until(lambda: counts(h.name, "success") == 1, "success", step=0.001)
        assert rec.calls["a"] == 3
        assert h.delays("a") == [0.001, 0.002]
        assert counts(h.name, "requeue") == 2
        assert errors(h.name) == 0
        assert h.requeues("a") == 0


async def test_success_forgets_and_is_not_requeued() -> None:
    rec = ScriptedReconciler()
    async with running_controller(rec) as h:
        h.send("a")
        h.send("barrier")
        await eventually(lambda: rec.calls["barrier"] == 1, within=10.0, what="barrier", interval=0.01)
        assert rec.calls["a"] == 1
        assert h.delays("a") == []
        assert counts(h.name, "success") == 2
        assert len(h.controller.queue) == 0


async def test_a_conflict_is_requeued_with_backoff_and_logged_as_info_not_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def conflict_once(request: Request, call: int) -> Result:
        if call == 1:
            raise Conflict({"reason": "Conflict", "code": 409, "message": "the object has been modified"})
        return Result()

    rec = ScriptedReconciler({"a": conflict_once})
    caplog.set_level(logging.INFO, logger="pyctrl.controller")
    async with running_controller(rec) as h:
        h.send("a")
        await h.step_until(lambda: counts(h.name, "success") == 1, "success after conflict", step=0.001)
        assert h.delays("a") == [0.001]
        assert counts(h.name, "requeue") == 1
        assert errors(h.name) == 0
    mine = [r for r in caplog.records if getattr(r, "kv", {}).get("controller") == h.name]
    assert [r.levelname for r in mine if "Conflict" in r.getMessage()] == ["INFO"]
    assert not [r for r in mine if r.levelno >= logging.ERROR]


# -- workers ------------------------------------------------------------------------------------


async def test_a_key_is_never_reconciled_concurrently_and_an_event_meanwhile_causes_one_more_run() -> None:
    release = asyncio.Event()

    async def block_first(request: Request, call: int) -> Result:
        if call == 1:
            await release.wait()
        return Result()

    rec = ScriptedReconciler({"a": block_first})
    async with running_controller(rec, max_concurrent_reconciles=4) as h:
        h.send("a")
        await eventually(
            lambda: rec.running["a"] == 1, within=10.0, what="first run in flight", interval=0.01
        )
        for _ in range(5):
            h.send("a")
        await eventually(h.events.empty, within=10.0, what="events delivered", interval=0.01)
        release.set()
        await eventually(
            lambda: counts(h.name, "success") == 2, within=10.0, what="exactly one more run", interval=0.01
        )
        assert rec.calls["a"] == 2
        assert rec.max_running["a"] == 1


async def test_different_keys_run_in_parallel_up_to_max_concurrent_reconciles() -> None:
    release = asyncio.Event()

    async def block(request: Request, call: int) -> Result:
        await release.wait()
        return Result()

    rec = ScriptedReconciler({n: block for n in "abcde"})
    async with running_controller(rec, max_concurrent_reconciles=4) as h:
        for n in "abcde":
            h.send(n)

        def active() -> float:
            return metric("controller_runtime_active_workers", controller=h.name)

        await eventually(lambda: active() == 4, within=10.0, what="four workers busy", interval=0.01)
        assert sum(rec.running.values()) == 4
        assert metric("controller_runtime_max_concurrent_reconciles", controller=h.name) == 4
        release.set()
        await eventually(
            lambda: counts(h.name, "success") == 5, within=10.0, what="all keys done", interval=0.01
        )
        assert active() == 0


async def test_a_reconcile_past_the_timeout_is_cancelled_counted_and_retried() -> None:
    cancelled = asyncio.Event()

    async def hang_first(request: Request, call: int) -> Result:
        if call == 1:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return Result()

    rec = ScriptedReconciler({"a": hang_first})
    # a timeout far beyond the test's own: only the controller's FakeClock can bring it
    async with running_controller(rec, reconciliation_timeout=600) as h:
        h.send("a")
        await eventually(lambda: h.clock.pending() == 1, within=10.0, what="the reconcile's deadline")
        h.clock.step(599.999)
        await let_tasks_run()
        assert not cancelled.is_set(), "cancelled before the timeout"
        h.clock.step(0.001)
        await eventually(cancelled.is_set, within=10.0, what="the reconcile cancelled at its deadline")
        await h.step_until(lambda: counts(h.name, "success") == 1, "retry after the timeout", step=0.001)
        assert metric("controller_runtime_reconcile_timeouts_total", controller=h.name) == 1
        assert errors(h.name) == 1
        assert h.delays("a") == [0.001]


async def test_programming_errors_and_wrong_return_values_count_as_panics_and_the_worker_survives() -> None:
    async def key_error(request: Request, call: int) -> Result:
        empty: dict[str, Result] = {}
        return empty["missing"]

    async def not_a_result(request: Request, call: int) -> Any:
        return "done"

    async def plain_error(request: Request, call: int) -> Result:
        raise RuntimeError("the world is not ready")

    rec = ScriptedReconciler({"k": key_error, "t": not_a_result, "r": plain_error})
    async with running_controller(rec) as h:
        for n in "ktr":
            h.send(n)
        await h.step_until(lambda: min(rec.calls[n] for n in "ktr") >= 2, "retries of all three", step=0.001)
        h.send("ok")
        await eventually(
            lambda: rec.calls["ok"] == 1, within=10.0, what="the worker still works", interval=0.01
        )
        panics = metric("controller_runtime_reconcile_panics_total", controller=h.name)
        assert panics == rec.calls["k"] + rec.calls["t"]  # RuntimeError is an error, not a panic
        assert errors(h.name) >= 6


async def test_every_log_line_of_a_reconcile_names_the_request_and_its_trigger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def log_and_fail_once(request: Request, call: int) -> Result:
        from_context().info("inside", call=call)
        if call == 1:
            raise RuntimeError("once")
        return Result()

    rec = ScriptedReconciler({"a": log_and_fail_once})
    caplog.set_level(logging.DEBUG)
    async with running_controller(rec) as h:
        h.send("a")
        await h.step_until(lambda: counts(h.name, "success") == 1, "success", step=0.001)
    lines = [getattr(r, "kv", {}) | {"msg": r.getMessage()} for r in caplog.records]
    mine = [kv for kv in lines if kv.get("controller") == h.name and "reconcile_id" in kv]
    assert {kv["msg"] for kv in mine} >= {"Reconciling", "inside", "Reconciler error", "Reconcile done"}
    for kv in mine:
        assert (kv["namespace"], kv["name"]) == ("ns", "a")
    first = [kv for kv in mine if kv.get("call") == 1 or kv["msg"] == "Reconciler error"]
    assert {kv["trigger"] for kv in first} == {"generic channel ns/a"}
    assert {kv["reconcile_id"] for kv in first} == {first[0]["reconcile_id"]}
    retry = [kv for kv in mine if kv.get("call") == 2]
    assert retry[0]["trigger"] == "requeue"
    assert retry[0]["reconcile_id"] != first[0]["reconcile_id"]


async def test_stop_waits_for_the_reconcile_in_flight_and_starts_no_queued_one() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(request: Request, call: int) -> Result:
        started.set()
        await release.wait()
        return Result()

    rec = ScriptedReconciler({"slow": slow})
    ctrl = Controller("stop-test", rec)
    events: asyncio.Queue[GenericEvent] = asyncio.Queue()
    ctrl.watch(Channel(events, enqueue_request_for_object()))
    stop = asyncio.Event()
    task = asyncio.create_task(ctrl.start(stop))
    events.put_nowait(GenericEvent(ConfigMap(metadata=ObjectMeta(name="slow", namespace="ns"))))
    await started.wait()
    events.put_nowait(GenericEvent(ConfigMap(metadata=ObjectMeta(name="queued", namespace="ns"))))
    await eventually(lambda: len(ctrl.queue) == 1, within=10.0, what="queued request", interval=0.01)
    stop.set()
    await let_tasks_run()
    assert not task.done()  # still waiting for the reconcile in flight
    release.set()
    await asyncio.wait_for(task, 10)
    assert metric("controller_runtime_reconcile_total", controller="stop-test", result="success") == 1
    assert rec.calls["queued"] == 0


# -- start-up errors ----------------------------------------------------------------------------


class NeverSyncs:
    async def start(self, sink: Any) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def wait_for_sync(self) -> None:
        await asyncio.Event().wait()

    def __repr__(self) -> str:
        return "NeverSyncs()"


async def test_start_fails_naming_the_sources_that_did_not_sync_within_the_cache_sync_timeout() -> None:
    clock = FakeClock()
    ctrl = Controller("sync-timeout", ScriptedReconciler(), cache_sync_timeout=120, clock=clock)
    ctrl.watch(NeverSyncs())
    start = asyncio.ensure_future(ctrl.start(asyncio.Event()))
    await eventually(lambda: clock.pending() == 1, within=10.0, what="the cache sync deadline")
    clock.step(119.9)
    await let_tasks_run()
    assert not start.done(), "gave up before the cache sync timeout"
    clock.step(0.1)
    with pytest.raises(ControllerError, match=r"timed out after 120s .* NeverSyncs\(\)"):
        await asyncio.wait_for(start, 10)


class NoReconcile:
    pass


class SyncReconcile:
    def reconcile(self, request: Request) -> Result:
        return Result()


class WrongReturn:
    async def reconcile(self, request: Request) -> bool:
        return True


class MyResult(Result):
    pass


class SubclassReturn:
    async def reconcile(self, request: Request) -> MyResult:
        return MyResult()


@pytest.mark.parametrize("bad", [NoReconcile(), SyncReconcile(), WrongReturn()], ids=type)
def test_a_reconciler_of_the_wrong_shape_is_rejected_when_the_controller_is_built(bad: object) -> None:
    with pytest.raises(ControllerError, match="reconcile"):
        Controller("bad", bad)


def test_a_reconciler_returning_a_result_subclass_is_accepted() -> None:
    assert Controller("sub", SubclassReturn()).reconciler is not None


@pytest.mark.parametrize(("name", "workers"), [("", 1), ("x", 0)])
def test_a_controller_needs_a_name_and_at_least_one_worker(name: str, workers: int) -> None:
    with pytest.raises(ControllerError):
        Controller(name, ScriptedReconciler(), max_concurrent_reconciles=workers)


def test_a_request_is_a_hashable_value_of_namespace_and_name() -> None:
    request = Request("ns", "a")
    assert (request.namespace, request.name) == ("ns", "a")
    ns, name = request
    assert (ns, name) == ("ns", "a")
    assert {request: 1}[Request("ns", "a")] == 1
    assert str(request) == "ns/a"
    assert str(Request("", "node-1")) == "node-1"
    assert repr(request) == "Request(namespace='ns', name='a')"
    with pytest.raises(AttributeError):
        request.name = "b"  # type: ignore[misc]
