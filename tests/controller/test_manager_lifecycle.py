"""Manager start order, leader-only runnables and runnable failures on the real control plane."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

from pyctrl.client import HTTPRequest, HTTPTransport, Lease
from pyctrl.client.objects import LeaseSpec, ObjectMeta
from pyctrl.manager import Manager, ManagerError
from pyctrl.testing import eventually

from ._manager import new_manager, running
from ._util import Widget

pytestmark = [pytest.mark.controlplane, pytest.mark.usefixtures("widget_crd")]


class Recorder:
    """A runnable noting, when it starts, what the manager had done by then."""

    def __init__(self, mgr: Manager, order: list[str], label: str, *, leader: bool) -> None:
        self.mgr, self.order, self.label = mgr, order, label
        self.needs_leader_election = leader
        self.seen: dict[str, Any] = {}

    async def start(self, stop: asyncio.Event) -> None:
        informer = await self.mgr.cache.get_informer(Widget)
        self.seen = {
            "servers": self.mgr.metrics_port is not None and self.mgr.probe_port is not None,
            "synced": informer.has_synced(),
            "elected": self.mgr.elected.is_set(),
        }
        self.order.append(self.label)
        await stop.wait()
        self.order.append(f"{self.label} stopped")


async def test_servers_then_synced_caches_then_other_runnables_then_election_then_leader_runnables(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(
        kubeconfig, namespace, leader_election=True, leader_election_id="order",
        leader_election_namespace=namespace, lease_duration=4, renew_deadline=3, retry_period=1,
    )  # fmt: skip
    await mgr.cache.get_informer(Widget)
    order: list[str] = []
    other = Recorder(mgr, order, "other", leader=False)
    leader = Recorder(mgr, order, "leader", leader=True)
    mgr.add(leader)
    mgr.add(other)
    async with running(mgr):
        await eventually(lambda: len(order) == 2, within=30, what="both runnables started", interval=0.01)
    assert order == ["other", "leader", "leader stopped", "other stopped"]  # stopped in reverse
    assert other.seen == {"servers": True, "synced": True, "elected": False}
    assert leader.seen == {"servers": True, "synced": True, "elected": True}


class LeaseReads:
    """A transport counting the reads of the Lease ``held``, handing every request on."""

    def __init__(self, inner: HTTPTransport) -> None:
        self.inner, self.count = inner, 0

    async def send(self, request: HTTPRequest) -> bytes:
        self.count += request.method == "GET" and request.path.endswith("/leases/held")
        return await self.inner.send(request)

    def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        return self.inner.stream(request)


async def test_leader_only_runnables_wait_while_another_holds_the_lease(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(
        kubeconfig, namespace, leader_election=True, leader_election_id="held",
        leader_election_namespace=namespace, lease_duration=4, renew_deadline=3, retry_period=1,
    )  # fmt: skip
    spec = LeaseSpec(holder_identity="someone-else", lease_duration_seconds=3600)
    await mgr.api_client.create(Lease(metadata=ObjectMeta(name="held", namespace=namespace), spec=spec))
    reads = LeaseReads(mgr.api_client.transport)
    mgr.api_client.transport = reads  # the seam: a wrapper of the client's own transport
    order: list[str] = []
    mgr.add(Recorder(mgr, order, "leader", leader=True))
    async with running(mgr):
        await eventually(lambda: reads.count >= 2, within=30, what="two attempts to acquire", interval=0.01)
        assert order == []
        assert not mgr.elected.is_set()
        await mgr.api_client.delete(await mgr.api_client.get(Lease, "held", namespace=namespace))
        await eventually(
            lambda: order == ["leader"], within=30, what="leadership after the lease was freed", interval=0.01
        )
        assert mgr.elected.is_set()
        assert mgr.elector is not None
        assert mgr.elector.is_leader()


class Failing:
    needs_leader_election = False

    async def start(self, stop: asyncio.Event) -> None:
        raise RuntimeError("cannot open the database")


async def test_a_failing_runnable_stops_the_manager_with_an_error_naming_it(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    order: list[str] = []
    mgr.add(Recorder(mgr, order, "leader", leader=True))
    mgr.add(Failing())
    with pytest.raises(ManagerError, match="Failing failed: cannot open the database"):
        await asyncio.wait_for(mgr.start(asyncio.Event()), 60)
    assert order in ([], ["leader", "leader stopped"])  # whatever started was stopped


async def test_a_manager_starts_once(kubeconfig: Path, namespace: str) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    async with running(mgr):
        await asyncio.wait_for(mgr.elected.wait(), 30)
        with pytest.raises(ManagerError, match="already started"):
            await mgr.start(asyncio.Event())
