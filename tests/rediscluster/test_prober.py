"""HealthProber: a fake probe on a manual clock for the rules, real servers for a hung master."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from examples.rediscluster.replication.prober import ClusterKey, HealthProber
from examples.rediscluster.shared import redis_admin
from examples.rediscluster.shared.redis_admin import RedisConnection
from pyctrl.testing import eventually
from tests.rediscluster._servers import RedisServers

KEY: ClusterKey = ("ns", "cache")
OTHER: ClusterKey = ("ns", "other")
FAST = 0.05  # io_timeout of the fake pods: a hung probe is cut off after 2 * FAST + 1 s


def endpoint(host: str) -> RedisConnection:
    return RedisConnection(host, 6379, io_timeout=FAST)


ENDPOINTS: dict[str, RedisConnection | None] = {"rc-0": endpoint("10.0.0.1"), "rc-1": endpoint("10.0.0.2")}


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeRedis:
    """The probe seam: hosts in ``down`` fail, hosts in ``hung`` never answer."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.hung: set[str] = set()
        self.calls: Counter[str] = Counter()

    async def __call__(self, redis: RedisConnection) -> None:
        host, port = redis.host, redis.port
        self.calls[host] += 1
        if host in self.hung:
            await asyncio.Event().wait()
        if host in self.down:
            raise redis_admin.RedisUnavailable(host, port, "PING: ConnectionError: refused")

    async def rounds(self, host: str, n: int = 2) -> None:
        """Wait until ``host`` was probed ``n`` more times (so every earlier state was recorded)."""
        target = self.calls[host] + n
        await eventually(
            lambda: _true(self.calls[host] >= target), within=5, what=f"{n} more probes of {host}"
        )


async def _true(value: bool) -> bool:
    return value


@pytest.fixture
def harness() -> tuple[HealthProber, FakeRedis, ManualClock, asyncio.Queue[ClusterKey]]:
    fake, clock, events = FakeRedis(), ManualClock(), asyncio.Queue[ClusterKey]()
    prober = HealthProber(events.put_nowait, interval=0.002, probe=fake, clock=clock)
    return prober, fake, clock, events


def drain(events: asyncio.Queue[ClusterKey]) -> list[ClusterKey]:
    out = []
    while not events.empty():
        out.append(events.get_nowait())
    return out


async def test_one_bad_probe_is_not_down_a_whole_window_is(
    harness: tuple[HealthProber, FakeRedis, ManualClock, asyncio.Queue[ClusterKey]],
) -> None:
    prober, fake, clock, events = harness
    prober.watch(KEY, ENDPOINTS, master="rc-0", down_after=5.0)
    await prober.start()
    try:
        await fake.rounds("10.0.0.1")
        assert prober.last_valid_reply(KEY, "rc-0") == 0.0
        assert drain(events) == []  # healthy from the start: nothing to report

        fake.down.add("10.0.0.1")
        clock.now = 1.0
        await fake.rounds("10.0.0.1")
        assert drain(events) == [KEY]  # rc-0 stopped answering: reconcile may look, not promote
        assert not prober.master_down(KEY)
        assert prober.master_unhealthy_for(KEY) == 1.0

        clock.now = 4.99
        await fake.rounds("10.0.0.1")
        assert not prober.master_down(KEY)
        assert drain(events) == []

        clock.now = 5.0
        await fake.rounds("10.0.0.1")
        assert prober.master_down(KEY)
        assert prober.master_unhealthy_for(KEY) == 5.0
        assert drain(events) == [KEY]  # the window elapsed: exactly one event

        fake.down.clear()
        clock.now = 6.0
        await fake.rounds("10.0.0.1")
        assert not prober.master_down(KEY)
        assert prober.last_valid_reply(KEY, "rc-0") == 6.0
        assert drain(events) == [KEY]  # recovered
    finally:
        await prober.stop()


async def test_the_master_is_reported_down_when_its_window_ends_not_at_the_next_probe() -> None:
    fake, events = FakeRedis(), asyncio.Queue[ClusterKey]()
    fake.down.add("10.0.0.1")
    prober = HealthProber(events.put_nowait, interval=30.0, probe=fake)  # one probe round only
    prober.watch(KEY, ENDPOINTS, master="rc-0", down_after=0.5)
    await prober.start()
    try:
        assert await asyncio.wait_for(events.get(), 5) == KEY  # rc-0 stopped answering
        assert not prober.master_down(KEY)
        assert await asyncio.wait_for(events.get(), 5) == KEY  # the timer at the window's end
        assert prober.master_down(KEY)
        assert fake.calls["10.0.0.1"] == 1  # no second probe was needed to see it
    finally:
        await prober.stop()


async def test_a_returning_replica_is_reported(
    harness: tuple[HealthProber, FakeRedis, ManualClock, asyncio.Queue[ClusterKey]],
) -> None:
    prober, fake, _, events = harness
    fake.down.add("10.0.0.2")
    prober.watch(KEY, ENDPOINTS, master="rc-0", down_after=5.0)
    await prober.start()
    try:
        await fake.rounds("10.0.0.2")
        assert drain(events) == [KEY]
        fake.down.clear()
        await fake.rounds("10.0.0.2")
        assert drain(events) == [KEY]  # e.g. an old master back: reconcile fences it now
        assert not prober.master_down(KEY)
    finally:
        await prober.stop()


async def test_a_hung_endpoint_delays_only_its_own_probes(
    harness: tuple[HealthProber, FakeRedis, ManualClock, asyncio.Queue[ClusterKey]],
) -> None:
    prober, fake, clock, _ = harness
    fake.hung.add("10.0.0.1")
    prober.watch(KEY, ENDPOINTS, master="rc-0", down_after=1.0)
    await prober.start()
    try:
        await fake.rounds("10.0.0.2", 20)
        assert fake.calls["10.0.0.1"] == 1  # one probe in flight at a time
        clock.now = 1.0
        # the hung probe is cut off (2 * io_timeout + 1 s) and counts as no valid reply
        await eventually(
            lambda: _true(fake.calls["10.0.0.1"] >= 2), within=3, what="the hung probe to time out"
        )
        await fake.rounds("10.0.0.2")
        assert prober.master_down(KEY)
        assert prober.last_valid_reply(KEY, "rc-0") is None
        assert prober.last_valid_reply(KEY, "rc-1") == 1.0
    finally:
        await prober.stop()


async def test_stop_leaves_no_task_behind_even_with_probes_in_flight(
    harness: tuple[HealthProber, FakeRedis, ManualClock, asyncio.Queue[ClusterKey]],
) -> None:
    prober, fake, _, _ = harness
    fake.hung.update({"10.0.0.1", "10.0.0.2"})
    before = asyncio.all_tasks()
    prober.watch(KEY, ENDPOINTS, master="rc-0", down_after=1.0)
    await prober.start()
    await eventually(lambda: _true(len(fake.calls) == 2), within=10.0, what="both probes in flight")
    assert len(asyncio.all_tasks() - before) == 3
    await prober.stop()
    assert asyncio.all_tasks() == before
    await prober.start()  # restartable
    await prober.stop()
    assert asyncio.all_tasks() == before


async def test_history_is_per_pod_and_forget_stops_probing(
    harness: tuple[HealthProber, FakeRedis, ManualClock, asyncio.Queue[ClusterKey]],
) -> None:
    prober, fake, clock, events = harness
    prober.watch(KEY, ENDPOINTS, master="rc-0", down_after=5.0)
    prober.watch(OTHER, {"x-0": endpoint("10.1.0.1")}, master="x-0", down_after=5.0)
    await prober.start()
    try:
        await fake.rounds("10.0.0.1")
        fake.down.add("10.0.0.1")
        clock.now = 3.0
        await fake.rounds("10.0.0.1")
        # the master pod restarts: no IP for a while, then a new one; its history carries on
        prober.watch(KEY, {**ENDPOINTS, "rc-0": None}, master="rc-0", down_after=5.0)
        clock.now = 5.0
        await fake.rounds("10.0.0.2")
        await fake.rounds("10.0.0.2")
        assert prober.master_down(KEY)
        prober.watch(KEY, {**ENDPOINTS, "rc-0": endpoint("10.0.0.9")}, master="rc-0", down_after=5.0)
        await fake.rounds("10.0.0.9")
        assert not prober.master_down(KEY)
        assert prober.last_valid_reply(KEY, "rc-0") == 5.0

        drain(events)
        prober.forget(KEY)
        await fake.rounds("10.1.0.1")  # let in-flight probes of KEY finish
        seen = fake.calls["10.0.0.2"]
        await fake.rounds("10.1.0.1", 10)
        assert fake.calls["10.0.0.2"] == seen
        assert drain(events) == []
        assert prober.master_unhealthy_for(KEY) == 0.0
    finally:
        await prober.stop()


async def test_a_failing_notify_does_not_stop_probing(
    harness: tuple[HealthProber, FakeRedis, ManualClock, asyncio.Queue[ClusterKey]],
) -> None:
    _, fake, clock, _ = harness
    calls: list[ClusterKey] = []

    def broken(key: ClusterKey) -> None:
        calls.append(key)
        raise RuntimeError("sink closed")

    prober = HealthProber(broken, interval=0.002, probe=fake, clock=clock)
    fake.down.add("10.0.0.1")
    prober.watch(KEY, ENDPOINTS, master="rc-0", down_after=1.0)
    await prober.start()
    try:
        await fake.rounds("10.0.0.1")
        clock.now = 2.0
        await fake.rounds("10.0.0.1")
        assert calls == [KEY, KEY]  # failing, then down
        assert prober.master_down(KEY)
    finally:
        await prober.stop()


async def test_a_sigstopped_master_is_declared_down_after_the_window(redis_servers: RedisServers) -> None:
    m, r = redis_servers.start(2)
    events = asyncio.Queue[ClusterKey]()
    io_timeout = 0.5
    prober = HealthProber(events.put_nowait, interval=0.05)
    down_after = 1.5
    prober.watch(
        KEY,
        {"rc-0": m.admin(io_timeout), "rc-1": r.admin(io_timeout)},
        master="rc-0",
        down_after=down_after,
    )
    await prober.start()
    try:
        await eventually(
            lambda: _true(prober.last_valid_reply(KEY, "rc-0") is not None),
            within=10.0,
            what="first valid replies",
        )
        m.sigstop()  # hung, not dead: TCP still connects; the redis_servers teardown resumes it
        stopped = time.monotonic()
        start = time.monotonic()
        await eventually(
            lambda: _true(prober.master_down(KEY)), within=10.0, what="the master to be declared down"
        )
        detected = time.monotonic() - start
        assert prober.master_unhealthy_for(KEY) >= down_after
        last_ok = prober.last_valid_reply(KEY, "rc-0")
        assert last_ok is not None
        assert time.monotonic() - last_ok >= down_after  # a whole window without a valid reply
        # and not much later: one cut-off probe (2 * io_timeout + 0.5), plus slack for a loaded machine
        assert detected < down_after + 2 * io_timeout + 0.5 + 1.5
        assert prober.last_valid_reply(KEY, "rc-1") is not None
        assert prober.unhealthy_for(KEY, "rc-1") < down_after  # the replica is not taken down with it
        assert KEY in drain(events)
        print(f"SIGSTOP -> master_down after {time.monotonic() - stopped:.2f}s (down_after {down_after}s)")
    finally:
        await prober.stop()
