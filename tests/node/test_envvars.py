"""Container environment: $(VAR) expansion, downward API, ConfigMap/Secret references."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from pyctrl.envtest.node.envvars import (
    ContainerConfigError,
    PodFacts,
    build_env,
    decode_data,
    expand,
    field_value,
    parse_quantity,
    resource_value,
    static_env,
)

POD: dict[str, Any] = {
    "metadata": {
        "name": "web-0",
        "namespace": "shop",
        "uid": "u-1",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "hi"},
    },
    "spec": {"nodeName": "local-node", "serviceAccountName": "default"},
}
FACTS = PodFacts(POD, pod_ip="127.0.1.7", host_ip="127.0.0.1", node_capacity={"cpu": "4", "memory": "8Gi"})

OBJECTS = {
    ("ConfigMap", "shop", "cfg"): {"mode": b"fast", "level": b"3"},
    ("Secret", "shop", "creds"): {"password": b"s3cret"},
}


async def lookup(kind: str, namespace: str, name: str) -> dict[str, bytes] | None:
    return OBJECTS.get((kind, namespace, name))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "a"),
        ("x-$(A)-$(B)-y", "x-a-b-y"),
        ("$(MISSING)", "$(MISSING)"),
        ("$$(A)", "$(A)"),
        ("$$", "$"),
        ("$A", "$A"),
        ("cost: 5$", "cost: 5$"),
        ("$(A", "$(A"),
        ("$()", "$()"),
    ],
)
def test_expand_follows_kubernetes_rules(text: str, expected: str) -> None:
    assert expand(text, {"A": "a", "B": "b"}) == expected


def test_downward_api_field_paths() -> None:
    assert field_value("metadata.name", FACTS) == "web-0"
    assert field_value("metadata.namespace", FACTS) == "shop"
    assert field_value("metadata.uid", FACTS) == "u-1"
    assert field_value("status.podIP", FACTS) == "127.0.1.7"
    assert field_value("status.podIPs", FACTS) == "127.0.1.7"
    assert field_value("status.hostIP", FACTS) == "127.0.0.1"
    assert field_value("spec.nodeName", FACTS) == "local-node"
    assert field_value("spec.serviceAccountName", FACTS) == "default"
    assert field_value("metadata.labels['tier']", FACTS) == "front"
    assert field_value("metadata.annotations['note']", FACTS) == "hi"
    assert field_value("metadata.labels", FACTS) == 'app="web"\ntier="front"'
    with pytest.raises(ContainerConfigError, match="unsupported fieldRef"):
        field_value("spec.containers", FACTS)


def test_resource_field_refs_use_limits_then_requests_then_node_capacity_rounded_up() -> None:
    container = {"resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "250m"}}}
    assert resource_value(container, {"resource": "limits.memory", "divisor": "1Mi"}, FACTS) == "64"
    assert resource_value(container, {"resource": "requests.cpu", "divisor": "1m"}, FACTS) == "250"
    assert resource_value(container, {"resource": "requests.cpu"}, FACTS) == "1"
    assert resource_value(container, {"resource": "limits.cpu"}, FACTS) == "4"
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1.5k") == 1500


async def test_env_entries_resolve_in_order_and_may_refer_to_earlier_ones() -> None:
    container = {
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "ADDR", "value": "$(POD_IP):6379"},
            {"name": "LATER_REF", "value": "$(DEFINED_LATER)"},
            {"name": "DEFINED_LATER", "value": "x"},
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        ]
    }
    env = await build_env(container, FACTS, lookup, base={"PATH": "/bin", "ADDR": "overridden"})
    assert env == {
        "PATH": "/bin",
        "POD_IP": "127.0.1.7",
        "ADDR": "127.0.1.7:6379",
        "LATER_REF": "$(DEFINED_LATER)",
        "DEFINED_LATER": "x",
        "MODE": "fast",
        "PASSWORD": "s3cret",
    }


async def test_env_from_adds_every_key_with_its_prefix_and_env_wins() -> None:
    container = {
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}, {"secretRef": {"name": "creds"}}],
        "env": [{"name": "CFG_level", "value": "9"}],
    }
    env = await build_env(container, FACTS, lookup)
    assert env == {"CFG_mode": "fast", "CFG_level": "9", "password": "s3cret"}


async def test_a_missing_required_reference_is_a_config_error_and_an_optional_one_is_skipped() -> None:
    missing_map = {"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]}
    with pytest.raises(ContainerConfigError, match='configmap "nope" not found'):
        await build_env(missing_map, FACTS, lookup)
    missing_key = {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}}]}
    with pytest.raises(ContainerConfigError, match="couldn't find key nope"):
        await build_env(missing_key, FACTS, lookup)
    optional = {
        "env": [
            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": True}}}
        ],
        "envFrom": [{"secretRef": {"name": "nope", "optional": True}}],
    }
    assert await build_env(optional, FACTS, lookup) == {}


def test_static_env_holds_only_literal_values_for_exec_probe_expansion() -> None:
    container = {
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "PORT", "value": "6379"},
            {"name": "URL", "value": "redis://$(POD_IP):$(PORT)"},
        ]
    }
    assert static_env(container) == {"PORT": "6379", "URL": "redis://$(POD_IP):6379"}


def test_decode_data_reads_config_map_text_and_binary_and_secret_base64() -> None:
    config_map = {"data": {"a": "text"}, "binaryData": {"b": base64.b64encode(b"\x00\x01").decode()}}
    assert decode_data(config_map, "ConfigMap") == {"a": b"text", "b": b"\x00\x01"}
    secret = {"data": {"p": base64.b64encode(b"pw").decode()}}
    assert decode_data(secret, "Secret") == {"p": b"pw"}
