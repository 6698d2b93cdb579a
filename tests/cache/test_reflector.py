"""pyctrl.cache.reflector: watcher events → store writes and reported changes."""

from __future__ import annotations

from typing import Any

import orjson

from pyctrl.cache.reflector import Change, Reflector
from pyctrl.cache.store import Store
from pyctrl.cache.watcher import Apply, Delete, Init, InitDone, InitPage, Watcher
from tests.cache.scripted import ScriptedLW, obj


def make() -> tuple[Reflector, list[Change]]:
    changes: list[Change] = []
    return Reflector(Store(orjson.loads), Watcher(ScriptedLW()), notify=changes.append), changes


def relist(reflector: Reflector, rv: str, *items: dict[str, Any]) -> None:
    reflector.apply(Init())
    reflector.apply(InitPage(list(items)))
    reflector.apply(InitDone(rv))


def test_the_first_listing_reports_adds_flagged_as_initial_and_marks_synced() -> None:
    reflector, changes = make()
    assert not reflector.synced
    relist(reflector, "10", obj("a", "5"), obj("b", "6"))
    assert reflector.synced
    assert [(c.type, c.key, c.in_initial_list) for c in changes] == [
        ("add", ("ns", "a"), True),
        ("add", ("ns", "b"), True),
    ]


def test_a_relist_reports_vanished_objects_as_tombstones_present_ones_as_updates_new_ones_as_adds() -> None:
    reflector, changes = make()
    relist(reflector, "10", obj("gone", "5"), obj("kept", "6"))
    changes.clear()
    relist(reflector, "20", obj("kept", "15"), obj("new", "16"))
    summary = {(c.type, c.key[1], c.tombstone, c.in_initial_list) for c in changes}
    assert summary == {
        ("update", "kept", False, False),
        ("add", "new", False, False),
        ("delete", "gone", True, False),
    }
    tomb = next(c for c in changes if c.tombstone)
    assert tomb.old is not None
    assert orjson.loads(tomb.old)["metadata"]["resourceVersion"] == "5"
    assert sorted(reflector.store.all_keys()) == [("ns", "kept"), ("ns", "new")]


def test_the_previous_content_stays_readable_until_the_relist_completes() -> None:
    reflector, _ = make()
    relist(reflector, "10", obj("a", "5"))
    reflector.apply(Init())
    reflector.apply(InitPage([obj("b", "11")]))
    assert list(reflector.store.all_keys()) == [("ns", "a")]
    reflector.apply(InitDone("12"))
    assert list(reflector.store.all_keys()) == [("ns", "b")]


def test_watch_events_become_adds_updates_and_deletes_with_the_old_state() -> None:
    reflector, changes = make()
    relist(reflector, "10")
    reflector.apply(Apply(obj("a", "11", data={"v": "1"})))
    reflector.apply(Apply(obj("a", "12", data={"v": "2"})))
    reflector.apply(Delete(obj("a", "13", data={"v": "2"})))
    assert [c.type for c in changes] == ["add", "update", "delete"]
    update = changes[1]
    assert update.old is not None
    assert update.new is not None
    assert orjson.loads(update.old)["data"] == {"v": "1"}
    assert orjson.loads(update.new)["data"] == {"v": "2"}
    assert len(reflector.store) == 0
    assert reflector.last_sync_resource_version == "13"


def test_objects_are_stored_transformed_and_without_type_meta() -> None:
    reflector, _ = make()
    item = {"apiVersion": "v1", "kind": "ConfigMap", **obj("a", "5")}
    item["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    relist(reflector, "10", item)
    stored = orjson.loads(reflector.store.get("ns", "a") or b"")
    assert stored == {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5"}}
