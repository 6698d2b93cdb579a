"""pyctrl.client.patch: patch bodies and the fake client's appliers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from pyctrl.client import ConfigMap, MergeFrom, ObjectMeta
from pyctrl.client.patch import (
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    create_merge_patch,
)


def test_merge_from_sends_changed_fields_and_nulls_for_removed_ones() -> None:
    original = ConfigMap(metadata=ObjectMeta(name="a", resource_version="5"), data={"a": "1", "b": "2"})
    modified = original.model_copy(deep=True)
    modified.data = {"a": "1", "c": "3"}
    body = orjson.loads(MergeFrom(original).data(modified))
    assert body == {"data": {"b": None, "c": "3"}}


def test_merge_from_with_optimistic_lock_adds_the_original_resource_version() -> None:
    original = ConfigMap(metadata=ObjectMeta(name="a", resource_version="5"), data={"a": "1"})
    modified = original.model_copy(update={"data": {"a": "2"}})
    body = orjson.loads(MergeFrom(original, optimistic_lock=True).data(modified))
    assert body == {"data": {"a": "2"}, "metadata": {"resourceVersion": "5"}}
    with pytest.raises(ValueError, match="resourceVersion"):
        MergeFrom(ConfigMap(metadata=ObjectMeta(name="a")), optimistic_lock=True).data(modified)


def test_merge_patch_round_trips_with_its_diff() -> None:
    a: dict[str, Any] = {"x": {"y": 1, "z": [1, 2]}, "k": "v"}
    b: dict[str, Any] = {"x": {"y": 2, "z": [3]}, "n": None}
    assert apply_merge_patch(a, create_merge_patch(a, b)) == {"x": {"y": 2, "z": [3]}}


def test_json_patch_supports_every_operation() -> None:
    doc = {"a": {"b": 1}, "l": [1, 2]}
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": "/l/-", "value": 3},
        {"op": "replace", "path": "/a/b", "value": 2},
        {"op": "copy", "from": "/a/b", "path": "/c"},
        {"op": "move", "from": "/c", "path": "/d"},
        {"op": "remove", "path": "/l/0"},
        {"op": "test", "path": "/d", "value": 2},
        {"op": "add", "path": "/e~1f", "value": "slash"},
    ]
    assert apply_json_patch(doc, ops) == {"a": {"b": 2}, "l": [2, 3], "d": 2, "e/f": "slash"}
    assert doc == {"a": {"b": 1}, "l": [1, 2]}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "add", "path": "/l/9", "value": 1}],
        [{"op": "jump", "path": "/a"}],
    ],
)
def test_a_failing_json_patch_raises_and_leaves_the_target_untouched(ops: list[dict[str, Any]]) -> None:
    doc = {"a": 1, "l": []}
    with pytest.raises(ValueError, match=r"path|test|index|op"):
        apply_json_patch(doc, ops)
    assert doc == {"a": 1, "l": []}


def test_strategic_merge_merges_lists_by_their_merge_key() -> None:
    pod = {
        "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]},
        "metadata": {"finalizers": ["x"]},
    }
    patch = {
        "spec": {
            "containers": [
                {"name": "b", "image": "2"},
                {"name": "c", "image": "1"},
                {"name": "a", "$patch": "delete"},
            ]
        },
        "metadata": {"finalizers": ["y"]},
    }
    out = apply_strategic_merge_patch(pod, patch)
    assert out["spec"]["containers"] == [{"name": "b", "image": "2"}, {"name": "c", "image": "1"}]
    assert out["metadata"]["finalizers"] == ["x", "y"]


def test_strategic_merge_replaces_lists_without_a_merge_key() -> None:
    out = apply_strategic_merge_patch({"spec": {"args": ["a"]}}, {"spec": {"args": ["b"]}})
    assert out == {"spec": {"args": ["b"]}}
