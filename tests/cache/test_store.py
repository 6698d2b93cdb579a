"""pyctrl.cache.store: bytes storage, namespace partition, label interning, indexes."""

from __future__ import annotations

from typing import Any

import orjson

from pyctrl.cache.store import Store
from pyctrl.client.selectors import Selector


def put(store: Store, ns: str, name: str, labels: dict[str, str] | None = None, **spec: Any) -> None:
    data = orjson.dumps({"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec})
    store.upsert((ns, name), store.make_entry(data, labels))


def names(blobs: list[bytes]) -> list[str]:
    return [orjson.loads(b)["metadata"]["name"] for b in blobs]


def test_reads_hand_out_immutable_bytes_so_callers_cannot_corrupt_the_store() -> None:
    store = Store(orjson.loads)
    put(store, "ns", "a", color="red")
    data = store.get("ns", "a")
    assert isinstance(data, bytes)
    decoded = orjson.loads(data)
    decoded["spec"]["color"] = "blue"
    assert orjson.loads(store.get("ns", "a") or b"")["spec"]["color"] == "red"


def test_list_filters_by_namespace_and_label_selector_in_key_order() -> None:
    store = Store(orjson.loads)
    put(store, "b", "z", {"app": "x"})
    put(store, "a", "y", {"app": "x"})
    put(store, "a", "x", {"app": "y"})
    assert names(store.list()) == ["x", "y", "z"]
    assert names(store.list(namespace="a")) == ["x", "y"]
    assert names(store.list(selector=Selector.parse("app=x"))) == ["y", "z"]
    assert store.list(namespace="missing") == []


def test_equal_label_sets_share_one_dict_and_the_table_shrinks_when_unused() -> None:
    store = Store(orjson.loads)
    put(store, "ns", "a", {"app": "redis", "role": "master"})
    put(store, "ns", "b", {"app": "redis", "role": "master"})
    a, b = store.entry(("ns", "a")), store.entry(("ns", "b"))
    assert a is not None
    assert b is not None
    assert a.labels is b.labels
    store.delete(("ns", "a"))
    store.delete(("ns", "b"))
    assert store._labels._table == {}


def test_index_values_follow_updates_and_deletes() -> None:
    store = Store(orjson.loads)
    store.add_index("spec.node", lambda o: [o["spec"]["node"]])
    put(store, "ns", "p", node="n1")
    assert store.lookup("spec.node", "n1") == {("ns", "p")}
    put(store, "ns", "p", node="n2")
    assert store.lookup("spec.node", "n1") == set()
    assert store.lookup("spec.node", "n2") == {("ns", "p")}
    store.delete(("ns", "p"))
    assert store.lookup("spec.node", "n2") == set()


def test_an_index_added_later_covers_the_objects_already_stored() -> None:
    store = Store(orjson.loads)
    put(store, "ns", "p", node="n1")
    store.add_index("spec.node", lambda o: [o["spec"]["node"]])
    assert store.lookup("spec.node", "n1") == {("ns", "p")}


def test_replace_swaps_the_content_and_returns_the_previous_one() -> None:
    store = Store(orjson.loads)
    put(store, "ns", "old")
    new = {"ns": {"new": store.make_entry(orjson.dumps({"metadata": {"name": "new"}}), None)}}
    previous = store.replace(new)
    assert {ns: set(objs) for ns, objs in previous.items()} == {"ns": {"old"}}
    assert list(store.all_keys()) == [("ns", "new")]
    assert len(store) == 1
