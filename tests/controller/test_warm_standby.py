"""Warm standby on the real apiserver: a standby fills its cache but never reconciles or writes;
once elected it reconciles without listing (and without warm standby it lists first)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

from pyctrl import ControllerBuilder, Request, Result
from pyctrl.client import ConfigMap, HTTPRequest, ObjectMeta
from pyctrl.manager import Manager
from pyctrl.testing import eventually, recording_writes

from ._manager import new_manager

pytestmark = pytest.mark.controlplane


class Requests:
    """Every request a manager's apiserver transport sends (watch streams included), noting whether
    the manager led at the time: a wrapper of the client's transport, installed before start."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr, self.inner = mgr, mgr.api_client.transport
        self.sent: list[tuple[bool, str, str, dict[str, Any]]] = []  # (leading, method, path, params)
        mgr.api_client.transport = self

    def _note(self, request: HTTPRequest) -> None:
        params = dict(request.params or {})
        self.sent.append((self.mgr.elected.is_set(), request.method, request.path, params))

    async def send(self, request: HTTPRequest) -> bytes:
        self._note(request)
        return await self.inner.send(request)

    def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        self._note(request)
        return self.inner.stream(request)

    def lists(self, *, leading: bool) -> list[str]:
        """Requests that list ConfigMaps: a GET of the collection, or a streaming list."""
        return [
            path
            for lead, method, path, params in self.sent
            if lead is leading
            and method == "GET"
            and path.endswith("/configmaps")
            and (not params.get("watch") or params.get("sendInitialEvents"))
        ]


class CountingReconciler:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request.name)
        return Result()


async def _pair(
    kubeconfig: Path, namespace: str, *, warm: bool
) -> tuple[Manager, Manager, CountingReconciler]:
    election = {
        "leader_election": True,
        "leader_election_id": "warm-standby",
        "leader_election_namespace": namespace,
        "lease_duration": 4.0,
        "renew_deadline": 3.0,
        "retry_period": 0.5,
        "leader_election_release_on_cancel": True,
    }
    leader = await new_manager(kubeconfig, namespace, **election)
    ControllerBuilder(leader).for_(ConfigMap).named("warm-leader").complete(CountingReconciler())
    standby = await new_manager(kubeconfig, namespace, warm_standby=warm, **election)
    reconciler = CountingReconciler()
    ControllerBuilder(standby).for_(ConfigMap).named(f"warm-standby-{warm}").complete(reconciler)
    return leader, standby, reconciler


async def _has_informer_synced(mgr: Manager) -> bool:
    informer = await mgr.cache.get_informer(ConfigMap)
    return informer.has_synced()


class Started:
    """A manager running in a task; :meth:`stop` stops it gracefully (releasing its lease)."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self._stop = asyncio.Event()
        self.task = asyncio.create_task(mgr.start(self._stop))

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.wait_for(self.task, 60)


async def test_a_warm_standby_fills_its_cache_never_writes_and_reconciles_without_a_list_once_elected(
    kubeconfig: Path, namespace: str
) -> None:
    leader, standby, reconciler = await _pair(kubeconfig, namespace, warm=True)
    requests = Requests(standby)
    first = Started(leader)
    second: Started | None = None
    try:
        await eventually(leader.elected.is_set, within=30, what="the first manager to lead")
        with recording_writes(standby) as writes:
            second = Started(standby)
            await eventually(lambda: requests.lists(leading=False), within=30, what="the standby listing")
            await eventually(lambda: _has_informer_synced(standby), within=30, what="its synced cache")
        await leader.api_client.create(
            ConfigMap(metadata=ObjectMeta(name="made-while-standby", namespace=namespace))
        )
        await eventually(
            lambda: standby.client.get(ConfigMap, "made-while-standby", namespace=namespace),
            within=30,
            what="the standby's cache to have the new object",
        )
        assert writes == [], "a standby wrote"
        assert reconciler.calls == [], "a standby reconciled"
        assert not standby.elected.is_set()
        await first.stop()
        await eventually(lambda: "made-while-standby" in reconciler.calls, within=60, what="its reconcile")
    finally:
        await first.stop()
        if second is not None:
            await second.stop()
    assert standby.elected.is_set()
    assert requests.lists(leading=True) == [], "the new leader listed before reconciling"


async def test_without_warm_standby_the_new_leader_lists_first(kubeconfig: Path, namespace: str) -> None:
    leader, standby, reconciler = await _pair(kubeconfig, namespace, warm=False)
    requests = Requests(standby)
    first = Started(leader)
    second: Started | None = None
    try:
        await eventually(leader.elected.is_set, within=30, what="the first manager to lead")
        second = Started(standby)  # started second, so it is the standby
        await leader.api_client.create(ConfigMap(metadata=ObjectMeta(name="cold", namespace=namespace)))
        await first.stop()
        await eventually(lambda: "cold" in reconciler.calls, within=60, what="the new leader's reconcile")
    finally:
        await first.stop()
        if second is not None:
            await second.stop()
    assert requests.lists(leading=True), "a cold standby's first reconcile needs a list"
    assert requests.lists(leading=False) == []  # and it started no source before
