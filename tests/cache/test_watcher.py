"""pyctrl.cache.watcher: the list/watch state machine, driven by a scripted ListerWatcher."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest

from pyctrl.cache.watcher import (
    Apply,
    Backoff,
    Delete,
    Init,
    InitDone,
    InitPage,
    Watcher,
    WatcherEvent,
    WatchStalled,
    _bounded,
)
from pyctrl.client import Expired, Gone, Invalid, TransportError
from pyctrl.client.watch import RawEvent, RawList
from pyctrl.metrics import registry
from pyctrl.testing import eventually
from pyctrl.workqueue import FakeClock, RealClock
from tests.cache.scripted import ScriptedLW, bookmark, obj


def status(reason: str, code: int) -> dict[str, object]:
    return {"kind": "Status", "reason": reason, "code": code, "message": reason}


def fast_backoff() -> Backoff:
    """For tests the backoff is not about: no delay, on a clock nobody steps (no real-time wait)."""
    return Backoff(initial=0.0, cap=0.0, jitter=0.0, clock=FakeClock())


async def take(events: AsyncGenerator[WatcherEvent, None], n: int) -> list[WatcherEvent]:
    out = []
    async with asyncio.timeout(5):
        for _ in range(n):
            out.append(await anext(events))
    return out


def paged(lw: ScriptedLW, **kwargs: object) -> Watcher:
    return Watcher(lw, watch_list=False, **({"backoff": fast_backoff()} | kwargs))  # type: ignore[arg-type]


async def test_the_first_list_reads_resource_version_0_in_pages_then_watches_from_it() -> None:
    lw = ScriptedLW()
    lw.lists.extend(
        [RawList([obj("a", "5"), obj("b", "6")], "10", "tok"), RawList([obj("c", "7")], "11", None)]
    )
    lw.watches.append([RawEvent("ADDED", obj("d", "12"))])
    events = paged(lw, page_size=2).events()
    got = await take(events, 5)
    assert got[0] == Init()
    assert [len(e.items) for e in got[1:3] if isinstance(e, InitPage)] == [2, 1]
    assert got[3] == InitDone("11")
    assert got[4] == Apply(obj("d", "12"))
    assert lw.calls == [("list", "0", 2, None), ("list", "0", 2, "tok"), ("watch", "11", False)]
    await events.aclose()


async def test_a_410_during_the_watch_relists_with_an_empty_resource_version() -> None:
    lw = ScriptedLW()
    lw.lists.extend([RawList([obj("a", "5")], "10", None), RawList([obj("b", "20")], "21", None)])
    lw.watches.append([Gone(status("Expired", 410))])
    events = paged(lw).events()
    got = await take(events, 6)
    assert got[3:] == [Init(), InitPage([obj("b", "20")]), InitDone("21")]
    assert [c for c in lw.calls if c[0] == "list"] == [("list", "0", 500, None), ("list", "", 500, None)]
    await events.aclose()


async def test_a_watch_that_ends_is_reopened_from_the_last_resource_version_seen() -> None:
    lw = ScriptedLW()
    lw.lists.append(RawList([], "10", None))
    lw.watches.extend(
        [[RawEvent("MODIFIED", obj("a", "12")), bookmark("15")], [RawEvent("DELETED", obj("a", "16"))]]
    )
    events = paged(lw).events()
    got = await take(events, 5)
    assert got[3:] == [Apply(obj("a", "12")), Delete(obj("a", "16"))]
    assert [c for c in lw.calls if c[0] == "watch"] == [("watch", "10", False), ("watch", "15", False)]
    await events.aclose()


async def test_bookmarks_only_advance_the_resource_version() -> None:
    lw = ScriptedLW()
    lw.lists.append(RawList([], "10", None))
    lw.watches.extend([[bookmark("11"), bookmark("12"), RawEvent("ADDED", obj("a", "13"))]])
    watcher = paged(lw)
    events = watcher.events()
    got = await take(events, 4)
    assert got[3] == Apply(obj("a", "13"))
    assert watcher.resource_version == "13"
    await events.aclose()


async def test_a_broken_watch_backs_off_and_resumes_from_the_last_resource_version_without_relisting() -> (
    None
):
    lw = ScriptedLW()
    lw.lists.append(RawList([], "10", None))
    lw.watches.extend(
        [[RawEvent("ADDED", obj("a", "12")), TransportError("reset")], [RawEvent("ADDED", obj("b", "13"))]]
    )
    events = paged(lw).events()
    got = await take(events, 5)
    assert got[3:] == [Apply(obj("a", "12")), Apply(obj("b", "13"))]
    assert [c[0] for c in lw.calls] == ["list", "watch", "watch"]
    assert lw.calls[2] == ("watch", "12", False)
    await events.aclose()


async def test_after_a_failure_the_watcher_waits_out_its_backoff_on_its_clock_before_watching_again() -> None:
    lw = ScriptedLW()
    lw.lists.append(RawList([], "10", None))
    lw.watches.extend([[TransportError("reset")], [RawEvent("ADDED", obj("a", "12"))]])
    clock = FakeClock()
    events = paged(lw, backoff=Backoff(initial=2.0, jitter=0.0, clock=clock)).events()
    await take(events, 3)  # the list
    reopened = asyncio.ensure_future(anext(events))
    await eventually(lambda: clock.pending() == 1, within=5, what="the backoff's timer")
    clock.step(1.999)
    assert clock.pending() == 1, "the backoff ended early"
    assert [c[0] for c in lw.calls] == ["list", "watch"]
    clock.step(0.001)
    assert await asyncio.wait_for(reopened, 5) == Apply(obj("a", "12"))
    assert lw.calls[2] == ("watch", "10", False)
    await events.aclose()


async def test_an_expired_continue_token_restarts_the_list_as_a_consistent_read() -> None:
    lw = ScriptedLW()
    lw.lists.extend(
        [
            RawList([obj("a", "5")], "10", "tok"),
            Expired(status("Expired", 410)),
            RawList([obj("a", "5")], "12", None),
        ]
    )
    events = paged(lw).events()
    got = await take(events, 5)
    assert got == [Init(), InitPage([obj("a", "5")]), Init(), InitPage([obj("a", "5")]), InitDone("12")]
    assert [c[1] for c in lw.calls if c[0] == "list"] == ["0", "0", ""]
    await events.aclose()


async def test_the_streaming_list_ends_at_the_initial_events_end_bookmark_and_a_watch_goes_on_from_it() -> (
    None
):
    lw = ScriptedLW()
    lw.watches.append(
        [RawEvent("ADDED", obj("a", "5")), RawEvent("ADDED", obj("b", "6")), bookmark("20", end=True)]
    )
    lw.watches.append([RawEvent("MODIFIED", obj("a", "21"))])
    watcher = Watcher(lw, backoff=fast_backoff())
    events = watcher.events()
    got = await take(events, 4)
    assert got == [Init(), InitPage([obj("a", "5"), obj("b", "6")]), InitDone("20"), Apply(obj("a", "21"))]
    assert lw.calls == [("watch", "", True), ("watch", "20", False)]
    # the streaming list may take minutes (client-go's 5-10); the watch after it asks for the short timeout
    assert 300 <= lw.timeouts[0] <= 600
    assert lw.timeouts[1] <= 25
    await events.aclose()


async def test_a_rejected_streaming_list_falls_back_to_paged_lists_for_good() -> None:
    lw = ScriptedLW()
    lw.watches.append([Invalid(status("Invalid", 422))])
    lw.lists.extend([RawList([obj("a", "5")], "10", None)])
    watcher = Watcher(lw, backoff=fast_backoff())
    events = watcher.events()
    got = await take(events, 4)
    assert got[1:] == [Init(), InitPage([obj("a", "5")]), InitDone("10")]
    assert watcher.watch_list is False
    assert lw.calls[:2] == [("watch", "", True), ("list", "0", 500, None)]
    await events.aclose()


async def test_iterating_again_after_a_stop_resumes_the_watch_from_the_last_resource_version() -> None:
    lw = ScriptedLW()
    lw.lists.append(RawList([], "10", None))
    lw.watches.extend([[RawEvent("ADDED", obj("a", "12"))], [RawEvent("ADDED", obj("b", "14"))]])
    watcher = paged(lw)
    first = watcher.events()
    await take(first, 4)
    await first.aclose()
    second = watcher.events()
    assert await take(second, 1) == [Apply(obj("b", "14"))]
    assert lw.calls[-1] == ("watch", "12", False)
    await second.aclose()


def test_backoff_starts_at_0_8_s_doubles_to_a_30_s_cap() -> None:
    clock = FakeClock()
    backoff = Backoff(clock=clock, rand=lambda: 0.0)
    delays = []
    for _ in range(8):
        delays.append(backoff.next_delay())
        clock.step(1)
    assert delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


def test_backoff_jitter_adds_up_to_the_delay_again() -> None:
    backoff = Backoff(clock=FakeClock(), rand=lambda: 0.5)
    assert backoff.next_delay() == pytest.approx(0.8 * 1.5)


def test_backoff_resets_after_two_healthy_minutes() -> None:
    clock = FakeClock()
    backoff = Backoff(clock=clock, rand=lambda: 0.0)
    backoff.next_delay()
    backoff.next_delay()
    clock.step(121)
    assert backoff.next_delay() == 0.8


def restarts(kind: str, cause: str) -> float:
    return registry.get_sample_value("pyctrl_watch_restarts_total", {"kind": kind, "cause": cause}) or 0.0


async def test_a_watch_that_does_not_end_in_time_is_abandoned_and_resumed_from_the_last_version() -> None:
    clock = FakeClock()
    lw = ScriptedLW()
    lw.lists.append(RawList([], "10", None))
    # the first watch delivers a bookmark and then nothing, never closing (a frozen connection);
    # the second ends as the apiserver ends a watch at its timeoutSeconds
    lw.watches.extend([[bookmark("14")], [RawEvent("ADDED", obj("a", "15"))]])
    original = lw.watch

    async def freezing(**kwargs: object) -> AsyncGenerator[RawEvent, None]:
        async for event in original(**kwargs):  # type: ignore[arg-type]
            yield event
        if kwargs["resource_version"] == "10":
            await asyncio.Event().wait()  # silent, open

    lw.watch = freezing  # type: ignore[method-assign]
    backoff = Backoff(initial=0.0, cap=0.0, jitter=0.0, clock=clock)
    watcher = Watcher(lw, watch_list=False, backoff=backoff, name="FrozenKind")
    assert (watcher.stall_timeout, watcher.grace) == (30.0, 5.0)
    events = watcher.events()
    assert await take(events, 3) == [Init(), InitPage([]), InitDone("10")]
    following = asyncio.ensure_future(anext(events))
    await eventually(lambda: clock.pending() == 1, within=5, what="the first watch, waiting")
    assert 20 <= lw.timeouts[0] <= 25  # (30 - 5) * [0.8, 1]: a healthy apiserver ends it by then
    clock.step(lw.timeouts[0] + watcher.grace - 0.01)
    assert clock.pending() == 1, "the deadline timer ran before timeoutSeconds + grace"
    clock.step(0.01)  # timeoutSeconds + grace after it was opened: frozen
    assert await asyncio.wait_for(following, 5) == Apply(obj("a", "15"))
    assert [c for c in lw.calls if c[0] == "watch"] == [("watch", "10", False), ("watch", "14", False)]
    assert [c for c in lw.calls if c[0] == "list"] == [("list", "0", 500, None)]  # resumed, not relisted
    assert restarts("FrozenKind", "stall") == 1
    third = asyncio.ensure_future(anext(events))  # the second watch ended on time: re-opened at once
    await eventually(lambda: len(lw.calls) == 4, within=5, what="the third watch")
    assert lw.calls[-1] == ("watch", "15", False)
    assert restarts("FrozenKind", "timeout") == 1
    assert restarts("FrozenKind", "error") == 0
    third.cancel()
    with pytest.raises(asyncio.CancelledError):
        await third
    await events.aclose()


async def test_a_deadline_reached_while_the_consumer_works_ends_the_watch_at_its_next_wait() -> None:
    clock = FakeClock()
    stream = _bounded(_spaced(2, 0), clock, deadline=10.0, idle=None)
    assert (await anext(stream)).object["metadata"]["resourceVersion"] == "0"
    clock.step(10)  # while the consumer holds the event
    with pytest.raises(WatchStalled, match="did not end in time"):
        await anext(stream)


async def test_a_stalled_streaming_list_starts_over() -> None:
    clock = FakeClock()
    lw = ScriptedLW()
    lw.watches.append([RawEvent("ADDED", obj("a", "5"))])  # ... then silence, no end bookmark
    lw.watches.append([RawEvent("ADDED", obj("a", "5")), bookmark("9", end=True)])
    original = lw.watch
    first = True

    async def stalling(**kwargs: object) -> AsyncGenerator[RawEvent, None]:
        nonlocal first
        stall, first = first, False
        async for event in original(**kwargs):  # type: ignore[arg-type]
            yield event
        if stall:
            await asyncio.Event().wait()

    lw.watch = stalling  # type: ignore[method-assign]
    backoff = Backoff(initial=0.0, cap=0.0, jitter=0.0, clock=clock)
    events = Watcher(lw, backoff=backoff, stall_timeout=6).events()
    assert await take(events, 1) == [Init()]
    rest = asyncio.ensure_future(take(events, 3))
    await eventually(lambda: clock.pending() == 1, within=5, what="the streaming list, waiting")
    clock.step(6)  # no event for stall_timeout: stalled
    assert await rest == [Init(), InitPage([obj("a", "5")]), InitDone("9")]
    await events.aclose()


@pytest.mark.parametrize("seconds", [0, 2.9, float("nan")])
def test_the_stall_timeout_must_be_at_least_3_seconds(seconds: float) -> None:
    with pytest.raises(ValueError, match="stall_timeout must be at least 3 s"):
        Watcher(ScriptedLW(), stall_timeout=seconds)


async def _spaced(count: int, gap: float) -> AsyncGenerator[RawEvent, None]:
    for i in range(count):
        await asyncio.sleep(gap)  # the stream's pace: what the idle bound is tested against
        yield RawEvent("MODIFIED", obj("a", str(i)))
    await asyncio.Event().wait()  # then silent, open


async def test_the_idle_bound_times_each_wait_not_the_whole_stream() -> None:
    # 40 events 0.05 s apart: 2 s in all, each wait far under the 1 s bound
    stream = _bounded(_spaced(40, 0.05), RealClock(), deadline=None, idle=1.0)
    got = [await anext(stream) for _ in range(40)]
    assert [e.object["metadata"]["resourceVersion"] for e in got] == [str(i) for i in range(40)]
    with pytest.raises(WatchStalled, match="no event or bookmark for 1 s"):
        await anext(stream)  # the silence after the last event (the generator is finished by it)


async def test_a_cancelled_wait_stays_a_cancellation_not_a_stall() -> None:
    started = asyncio.Event()

    async def silent() -> AsyncGenerator[RawEvent, None]:
        started.set()
        await asyncio.Event().wait()
        yield RawEvent("MODIFIED", obj("a", "0"))  # never reached

    stream = _bounded(silent(), RealClock(), deadline=None, idle=30.0)
    waiting = asyncio.ensure_future(anext(stream))
    await started.wait()  # the bounded wait is under way, not merely scheduled
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
