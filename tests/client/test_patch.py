"""pyctrl.client.patch: patch bodies and the fake client's appliers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import field_serializer

from pyctrl.client import ConfigMap, GroupVersionKind, KubeObject, MergeFrom, ObjectMeta, Pod
from pyctrl.client.objects import Container, PodSpec, PodStatus
from pyctrl.client.patch import (
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    create_merge_patch,
)
from pyctrl.client.scheme import to_dict


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


_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7", "labels": {"app": "redis"}},
    "spec": {
        "containers": [{"name": "c", "image": "redis", "ports": [{"containerPort": 6379}], "newField": True}],
        "volumes": [{"name": "v", "configMap": {"name": "cm"}}],
    },
    "status": {"podIP": "10.0.0.1", "phase": "Running"},
}

_values = st.one_of(st.none(), st.text(max_size=3), st.integers(-2, 2), st.booleans())


def _edit(pod: Pod, draw: Any) -> None:
    """One random edit of a typed Pod: fields set, changed, removed; sub-models replaced; lists and
    dicts changed in place; extra (unknown) fields added or changed."""
    assert pod.spec is not None
    match draw(st.integers(0, 11)):
        case 0:
            labels = st.dictionaries(st.text(max_size=2), st.text(max_size=2))
            pod.metadata.labels = draw(st.one_of(st.none(), labels))
        case 1:
            (pod.metadata.labels or {}).update({"app": draw(st.text(max_size=2))})
        case 2:
            pod.metadata.annotations = {"a": draw(st.text(max_size=2))}
        case 3:
            pod.spec.containers[0].image = draw(st.one_of(st.none(), st.sampled_from(["redis", "redis:7"])))
        case 4:
            pod.spec.containers.append(Container(name=draw(st.text(max_size=2)), image="x"))
        case 5:
            pod.status = draw(st.one_of(st.none(), st.just(PodStatus(phase="Pending"))))
        case 6:
            if pod.status is not None:
                pod.status.pod_ip = draw(st.one_of(st.none(), st.text(max_size=3)))
        case 7:
            assert pod.metadata.model_extra is not None
            pod.metadata.model_extra["futureField"] = draw(_values)
        case 8:
            assert pod.spec.containers[0].model_extra is not None
            pod.spec.containers[0].model_extra["newField"] = draw(_values)
        case 9:
            pod.spec = PodSpec(containers=[Container(name="c", image="redis")])
        case 10:
            pod.metadata.generation = draw(st.one_of(st.none(), st.integers(0, 3)))
        case _:
            pod.metadata = pod.metadata.model_copy(update={"name": draw(st.text(max_size=2))})


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_merge_from_of_typed_objects_equals_the_diff_of_their_dumps(data: st.DataObject) -> None:
    original = Pod.model_validate(_POD)
    modified = original.model_copy(deep=True)
    for _ in range(data.draw(st.integers(0, 4))):
        _edit(modified, data.draw)
    expected = create_merge_patch(to_dict(original), to_dict(modified))
    assert orjson.loads(MergeFrom(original).data(modified)) == expected


def test_merge_from_of_a_model_with_a_serializer_diffs_the_dumps() -> None:
    class Stamped(KubeObject):
        gvk = GroupVersionKind("test.pyctrl.dev", "v1", "Stamped")
        count: int = 0

        @field_serializer("count")
        def _twice(self, value: int) -> int:
            return value * 2

    original = Stamped.model_validate({"metadata": {"name": "s"}, "count": 1})
    modified = original.model_copy(update={"count": 3})
    assert orjson.loads(MergeFrom(original).data(modified)) == {"count": 6}
