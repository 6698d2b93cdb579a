"""pyctrl.leaderelection: configuration checks and the client-go algorithm, two electors against
the real apiserver with manual clocks (expiry is judged on the observer's clock), and a leader
whose connection freezes (pyctrl.testing.FaultProxy) stepping down."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pyctrl.client import ApiClient, Lease, load_kubeconfig
from pyctrl.client.objects import LeaseSpec, ObjectMeta
from pyctrl.leaderelection import LeaderElectionConfig, LeaderElectionLost, LeaderElector, default_identity
from pyctrl.testing import FaultProxy, eventually
from pyctrl.workqueue import FakeClock


def test_defaults_are_controller_runtimes() -> None:
    cfg = LeaderElectionConfig(name="l", namespace="ns")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 10.0, 2.0)
    assert not cfg.release_on_cancel


def test_the_default_identity_is_hostname_underscore_uuid() -> None:
    assert re.fullmatch(re.escape(socket.gethostname()) + r"_[0-9a-f-]{36}", default_identity())
    assert default_identity() != default_identity()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease_duration": 10, "renew_deadline": 10}, "lease_duration must be greater than renew_deadline"),
        (
            {"renew_deadline": 2.4, "retry_period": 2},
            r"renew_deadline must be greater than retry_period\*1.2",
        ),
        (
            {"lease_duration": 4, "renew_deadline": 3, "retry_period": 0},
            "retry_period must be greater than zero",
        ),
        ({"name": ""}, "lease name and namespace"),
        ({"namespace": ""}, "lease name and namespace"),
        ({"identity": ""}, "non-empty identity"),
    ],
)
def test_invalid_configurations_are_rejected_as_client_go_does(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(**({"name": "l", "namespace": "ns"} | options))


class FaultyClient:
    """Delegates to an ApiClient; ``cut`` makes every call hang (a partition), ``hold_updates``
    holds updates back until released."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.cut = False
        self.hold_updates: asyncio.Event | None = None
        self.updates_held = 0

    async def _pass(self) -> None:
        if self.cut:
            await asyncio.Event().wait()

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        await self._pass()
        return await self.client.get(*args, **kwargs)

    async def create(self, obj: Any) -> Any:
        await self._pass()
        return await self.client.create(obj)

    async def update(self, obj: Any) -> Any:
        await self._pass()
        if self.hold_updates is not None:
            self.updates_held += 1
            await self.hold_updates.wait()
        return await self.client.update(obj)


@pytest.fixture
async def api(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    async with ApiClient(await load_kubeconfig(kubeconfig)) as client:
        yield client


def elector(client: Any, namespace: str, identity: str, clock: Any = None, **options: Any) -> LeaderElector:
    timings: dict[str, Any] = {"lease_duration": 4, "renew_deadline": 3, "retry_period": 1}
    cfg = LeaderElectionConfig(name="lease", namespace=namespace, identity=identity, **(timings | options))
    return LeaderElector(client, cfg) if clock is None else LeaderElector(client, cfg, clock=clock)


async def hold_lease(api: ApiClient, namespace: str, holder: str, renew_time: str) -> Lease:
    spec = LeaseSpec(
        holder_identity=holder, lease_duration_seconds=4, renew_time=renew_time, lease_transitions=3
    )
    return await api.create(Lease(metadata=ObjectMeta(name="lease", namespace=namespace), spec=spec))


async def lease_spec(api: ApiClient, namespace: str) -> LeaseSpec:
    lease = await api.get(Lease, "lease", namespace=namespace)
    assert lease.spec is not None
    return lease.spec


@pytest.mark.controlplane
async def test_a_held_lease_is_taken_only_after_lease_duration_on_the_observers_clock(
    api: ApiClient, namespace: str
) -> None:
    # renewTime far in the past must not matter: only the observer's clock counts (clock skew)
    await hold_lease(api, namespace, "ghost", "2000-01-01T00:00:00.000000Z")
    clock = FakeClock(100.0)
    b = elector(api, namespace, "b", clock)
    assert not await b.try_acquire_or_renew()
    clock.step(3.9)
    assert not await b.try_acquire_or_renew()
    clock.step(0.2)
    assert await b.try_acquire_or_renew()
    spec = await lease_spec(api, namespace)
    assert (spec.holder_identity, spec.lease_transitions, spec.lease_duration_seconds) == ("b", 4, 4)


@pytest.mark.controlplane
async def test_a_renewal_seen_by_the_observer_restarts_its_expiry(api: ApiClient, namespace: str) -> None:
    held = await hold_lease(api, namespace, "ghost", "2000-01-01T00:00:00.000000Z")
    clock = FakeClock(100.0)
    b = elector(api, namespace, "b", clock)
    assert not await b.try_acquire_or_renew()
    clock.step(3)
    assert held.spec is not None
    held.spec.renew_time = "2000-01-01T00:00:03.000000Z"
    await api.update(held)
    assert not await b.try_acquire_or_renew()  # observes the change at t+3
    clock.step(3.9)
    assert not await b.try_acquire_or_renew()
    clock.step(0.2)
    assert await b.try_acquire_or_renew()


@pytest.mark.controlplane
async def test_of_two_candidates_writing_the_same_observed_lease_only_one_wins(
    api: ApiClient, namespace: str
) -> None:
    await hold_lease(api, namespace, "ghost", "2000-01-01T00:00:00.000000Z")
    clock = FakeClock(100.0)
    slow_client = FaultyClient(api)
    a, b = elector(api, namespace, "a", clock), elector(slow_client, namespace, "b", clock)
    assert not await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.step(5)  # expired for both
    slow_client.hold_updates = asyncio.Event()
    b_attempt = asyncio.create_task(b.try_acquire_or_renew())  # reads the lease, then is held back
    await eventually(
        lambda: slow_client.updates_held == 1,
        within=10.0,
        what="b read the lease and tries to write",
        interval=0.01,
    )
    assert await a.try_acquire_or_renew()
    slow_client.hold_updates.set()
    assert not await b_attempt  # its update carried a stale resourceVersion: Conflict
    assert (await lease_spec(api, namespace)).holder_identity == "a"


@pytest.mark.controlplane
async def test_release_on_cancel_empties_the_holder_so_a_standby_takes_over_at_once(
    api: ApiClient, namespace: str
) -> None:
    a = elector(api, namespace, "a", release_on_cancel=True)
    stop = asyncio.Event()
    run = asyncio.create_task(a.run(stop))
    await asyncio.wait_for(a.elected.wait(), 30)
    clock = FakeClock(100.0)
    b = elector(api, namespace, "b", clock)
    assert not await b.try_acquire_or_renew()
    stop.set()
    await asyncio.wait_for(run, 30)
    assert not a.is_leader()
    spec = await lease_spec(api, namespace)
    assert (spec.holder_identity or "", spec.lease_duration_seconds) == ("", 1)
    assert await b.try_acquire_or_renew()  # no time passed on b's clock


@pytest.mark.controlplane
async def test_a_cut_off_leader_gives_up_at_its_renew_deadline_on_its_clock_before_a_standby_can_take_over(
    api: ApiClient, namespace: str
) -> None:
    # Timings far beyond the test's own timeouts: only the manual clock can bring the deadline.
    timings: dict[str, Any] = {"lease_duration": 3010, "renew_deadline": 3000, "retry_period": 1}
    clock, client = FakeClock(100.0), FaultyClient(api)
    a, b = elector(client, namespace, "a", clock, **timings), elector(api, namespace, "b", clock, **timings)
    run = asyncio.create_task(a.run(asyncio.Event()))
    await asyncio.wait_for(a.elected.wait(), 30)  # acquired at 100: renew deadline 3100
    await eventually(lambda: clock.pending() == 1, within=10, what="a waiting its retry period")
    assert not await b.try_acquire_or_renew()  # b observes a's lease at 100: expiry 3110 for b
    client.cut = True
    clock.step(1)
    await eventually(lambda: clock.pending() == 1, within=10, what="a's renewal attempt, bounded")
    clock.step(2998.9)
    assert clock.pending() == 1, "the attempt was cut off before the renew deadline"
    assert not run.done()
    clock.step(0.1)
    with pytest.raises(LeaderElectionLost, match="no renewal for 3000"):
        await asyncio.wait_for(run, 30)
    assert not a.is_leader()
    assert not await b.try_acquire_or_renew()  # the lease is still valid on b's clock at 3100...
    clock.step(10)
    assert await b.try_acquire_or_renew()  # ...and b takes it once it expired there


@pytest.mark.controlplane
async def test_a_leader_whose_renewal_hangs_on_a_frozen_connection_steps_down_before_a_standby_takes_over(
    kubeconfig: Path, api: ApiClient, namespace: str
) -> None:
    config = await load_kubeconfig(kubeconfig)
    server = urlsplit(config.host)
    assert server.hostname
    assert server.port
    async with (
        FaultProxy(server.hostname, server.port) as proxy,
        ApiClient(config.with_options(host=proxy.url("https"))) as proxied,
    ):
        a, b = elector(proxied, namespace, "a"), elector(api, namespace, "b")  # 4 s / 3 s / 1 s
        stop = asyncio.Event()
        a_run = asyncio.create_task(a.run(stop))
        await asyncio.wait_for(a.elected.wait(), 30)
        b_run = asyncio.create_task(b.run(stop))
        try:
            # a renews through a kept-alive connection of its pool: freeze it right after a renewal
            renewed = (await lease_spec(api, namespace)).renew_time
            await eventually(
                _renewed_since(api, namespace, renewed), within=30, what="a's next renewal", interval=0.05
            )
            assert proxy.freeze() >= 1
            with pytest.raises(LeaderElectionLost, match="no renewal for 3"):
                await asyncio.wait_for(a_run, 30)  # its renewal hangs; the renew deadline cuts it off
            assert not a.is_leader()
            assert not b.is_leader(), "the standby took the lease before the leader stepped down"
            await asyncio.wait_for(b.elected.wait(), 30)
            assert (await lease_spec(api, namespace)).holder_identity == "b"
        finally:
            proxy.thaw()
            stop.set()
            for task in (a_run, b_run):
                task.cancel()
            await asyncio.gather(a_run, b_run, return_exceptions=True)


def _renewed_since(api: ApiClient, namespace: str, renew_time: object) -> Any:
    async def check() -> bool:
        spec = await lease_spec(api, namespace)
        return spec.holder_identity == "a" and spec.renew_time != renew_time

    return check
