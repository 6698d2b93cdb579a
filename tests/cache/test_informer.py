"""pyctrl.cache.informer against the fake client and the real apiserver."""

from __future__ import annotations

import asyncio

from pyctrl.cache import HandlerFuncs, Informer
from pyctrl.client import ConfigMap, Gone, ObjectMeta
from pyctrl.client.watch import RawList
from tests.cache.scripted import ScriptedLW, obj
from tests.cache.support import Recorder, informer_for
from tests.client.support import Backend, eventually


def cm(ns: str, name: str, v: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=ns), data={"v": v})


async def test_handlers_see_create_update_delete_in_order(backend: Backend) -> None:
    rec = Recorder()
    async with await informer_for(backend) as informer:
        informer.add_event_handler(rec)
        assert await informer.wait_for_sync(20)
        created = await backend.client.create(cm(backend.namespace, "o", "1"))
        created.data = {"v": "2"}
        updated = await backend.client.update(created)
        await backend.client.delete(updated)

        async def done() -> None:
            assert rec.of("o") == [
                ("add", "o", "1", False),
                ("update", "o", "1", "2"),
                ("delete", "o", "2", False),
            ]

        await eventually(done)


async def test_an_object_deleted_while_the_watch_is_down_is_reported_deleted_after_reconnect(
    backend: Backend,
) -> None:
    rec = Recorder()
    victim = await backend.client.create(cm(backend.namespace, "victim", "1"))
    informer = await informer_for(backend)
    informer.add_event_handler(rec)
    try:
        informer.start()
        assert await informer.wait_for_sync(20)
        await informer.stop()
        await backend.client.delete(victim)
        await backend.client.create(cm(backend.namespace, "newcomer", "1"))
        informer.start()

        async def reported() -> None:
            assert rec.of("victim")[-1][0] == "delete"
            assert rec.of("newcomer") == [("add", "newcomer", "1", False)]

        await eventually(reported)
        assert informer.store.get(backend.namespace, "victim") is None
    finally:
        await informer.stop()


async def test_a_handler_added_after_sync_gets_the_content_as_initial_adds_then_reports_synced(
    backend: Backend,
) -> None:
    await backend.client.create(cm(backend.namespace, "early", "1"))
    async with await informer_for(backend) as informer:
        assert await informer.wait_for_sync(20)
        rec = Recorder()
        registration = informer.add_event_handler(rec)

        async def synced() -> None:
            assert registration.has_synced()

        await eventually(synced)
        assert ("add", "early", "1", True) in rec.events


async def test_a_failing_handler_keeps_receiving_events_and_does_not_disturb_others(backend: Backend) -> None:
    seen: list[str] = []

    def explode(obj: ConfigMap, initial: bool) -> None:
        seen.append(obj.name)
        raise RuntimeError("handler bug")

    rec = Recorder()
    async with await informer_for(backend) as informer:
        informer.add_event_handler(HandlerFuncs(add=explode))
        informer.add_event_handler(rec)
        assert await informer.wait_for_sync(20)
        await backend.client.create(cm(backend.namespace, "x1", "1"))
        await backend.client.create(cm(backend.namespace, "x2", "1"))

        async def both() -> None:
            assert {"x1", "x2"} <= set(seen)
            assert {e[1] for e in rec.events} >= {"x1", "x2"}

        await eventually(both)


async def test_a_blocked_async_handler_does_not_delay_other_handlers(backend: Backend) -> None:
    gate = asyncio.Event()

    async def blocked(obj: ConfigMap, initial: bool) -> None:
        await gate.wait()

    rec = Recorder()
    async with await informer_for(backend) as informer:
        informer.add_event_handler(HandlerFuncs(add=blocked))
        informer.add_event_handler(rec)
        assert await informer.wait_for_sync(20)
        await backend.client.create(cm(backend.namespace, "b1", "1"))

        async def delivered() -> None:
            assert rec.of("b1")

        await eventually(delivered)
        gate.set()


async def test_resync_redelivers_every_object_as_an_update_with_old_equal_new(backend: Backend) -> None:
    await backend.client.create(cm(backend.namespace, "r", "1"))
    rec = Recorder()
    async with await informer_for(backend, resync_period=0.05) as informer:
        informer.add_event_handler(rec)

        async def resynced() -> None:
            assert ("update", "r", "1", "1") in rec.events

        await eventually(resynced)


async def test_a_relist_delivers_missed_deletes_as_tombstones_with_the_last_known_state() -> None:
    lw = ScriptedLW()
    lw.lists.append(
        RawList([obj("gone", "5", data={"v": "old"}), obj("kept", "6", data={"v": "1"})], "10", None)
    )
    lw.watches.append([Gone({"reason": "Gone", "code": 410, "message": "too old"})])
    lw.lists.append(RawList([obj("kept", "6", data={"v": "1"})], "20", None))
    rec = Recorder()
    informer = Informer(lw, ConfigMap, watch_list=False)
    informer.add_event_handler(rec)
    async with informer:

        async def tombstoned() -> None:
            assert ("delete", "gone", "old", True) in rec.events

        await eventually(tombstoned)
    assert ("update", "kept", "1", "1") in rec.events
