"""pyctrl.client.objects and scheme: typed models, lossless round trips, the codec."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from pydantic import PrivateAttr

from pyctrl.client import (
    ConfigMap,
    GroupVersionKind,
    KubeObject,
    ObjectMeta,
    Pod,
    StatefulSet,
    UnknownKind,
    default_scheme,
)
from pyctrl.client.scheme import decode, encode, gvk_of, kind_gvk

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7", "futureMetaField": {"x": 1}},
    "spec": {
        "containers": [{"name": "c", "image": "redis", "ports": [{"containerPort": 6379}], "newField": True}],
        "volumes": [{"name": "v", "configMap": {"name": "cm"}}],
    },
    "status": {"podIP": "10.0.0.1", "hostIP": "1.2.3.4"},
}


def test_unknown_fields_survive_a_read_modify_write_round_trip() -> None:
    pod = Pod.model_validate(POD)
    assert pod.spec is not None
    pod.spec.containers[0].image = "redis:7"
    out = orjson.loads(encode(pod))
    assert out["metadata"]["futureMetaField"] == {"x": 1}
    assert out["spec"]["containers"][0] == {
        "name": "c",
        "image": "redis:7",
        "ports": [{"containerPort": 6379}],
        "newField": True,
    }
    assert out["spec"]["volumes"] == [{"name": "v", "configMap": {"name": "cm"}}]


def test_attributes_are_snake_case_and_the_wire_is_camel_case() -> None:
    pod = Pod.model_validate(POD)
    assert pod.metadata.resource_version == "7"
    assert pod.status is not None
    assert pod.status.pod_ip == "10.0.0.1"
    assert orjson.loads(encode(pod))["status"] == {"podIP": "10.0.0.1", "hostIP": "1.2.3.4"}


def test_api_version_and_kind_are_filled_from_the_class() -> None:
    sts = StatefulSet(metadata=ObjectMeta(name="s"))
    assert (sts.api_version, sts.kind) == ("apps/v1", "StatefulSet")
    assert gvk_of(sts) == GroupVersionKind("apps", "v1", "StatefulSet")


def test_unset_optional_fields_are_not_serialised() -> None:
    assert orjson.loads(encode(ConfigMap(metadata=ObjectMeta(name="a")))) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a"},
    }


def test_decode_gives_typed_objects_for_classes_and_dicts_for_gvks() -> None:
    data = encode(Pod.model_validate(POD))
    assert isinstance(decode(Pod, data), Pod)
    assert decode(GroupVersionKind("", "v1", "Pod"), data) == orjson.loads(data)


def test_the_default_scheme_knows_the_built_in_kinds() -> None:
    assert default_scheme.type_for(GroupVersionKind("apps", "v1", "StatefulSet")) is StatefulSet
    assert default_scheme.type_for(GroupVersionKind("x", "v1", "Nope")) is None


def test_a_kind_without_gvk_or_an_object_without_type_meta_is_rejected_clearly() -> None:
    class NoGvk(KubeObject):
        pass

    with pytest.raises(UnknownKind, match="no 'gvk'"):
        kind_gvk(NoGvk)
    with pytest.raises(UnknownKind, match="apiVersion"):
        gvk_of({"metadata": {"name": "x"}})


def test_a_deep_copy_is_equal_independent_and_keeps_the_fields_set() -> None:
    pod = Pod.model_validate({**POD, "metadata": {**POD["metadata"], "labels": {"app": "redis"}}})
    for copied in (pod.model_copy(deep=True), copy.deepcopy(pod)):
        assert copied == pod
        assert copied.model_fields_set == pod.model_fields_set
        assert copied.metadata.model_fields_set == pod.metadata.model_fields_set
        assert copied.model_dump(exclude_unset=True) == pod.model_dump(exclude_unset=True)
        assert copied.spec is not None
        # every mutable level is a copy: fields, extra fields, lists, dicts, nested models
        copied.metadata.labels = {**(copied.metadata.labels or {}), "tier": "cache"}
        assert copied.metadata.model_extra is not None
        copied.metadata.model_extra["futureMetaField"]["x"] = 2
        copied.spec.containers[0].image = "redis:8"
        copied.spec.containers.append(copied.spec.containers[0].model_copy(update={"name": "d"}))
        assert copied.spec.volumes is not None
        copied.spec.volumes[0].model_extra["configMap"]["name"] = "other"  # type: ignore[index]
        assert orjson.loads(encode(pod)) == {
            **POD,
            "metadata": {**POD["metadata"], "labels": {"app": "redis"}},
        }


def test_a_deep_copy_of_a_model_with_private_attributes_copies_them_too() -> None:
    class Tracked(KubeObject):
        gvk = GroupVersionKind("test.pyctrl.dev", "v1", "Tracked")
        _seen: list[str] = PrivateAttr(default_factory=list)

    obj = Tracked.model_validate({"metadata": {"name": "t"}})
    obj._seen.append("a")
    copied = obj.model_copy(deep=True)
    copied._seen.append("b")
    assert (obj._seen, copied._seen) == (["a"], ["a", "b"])
    assert copied.metadata is not obj.metadata
