"""The RedisCluster API types on the Python side: names, defaults, strictness, CRD declaration."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from examples.rediscluster.api import (
    DEFAULT_IMAGE,
    RedisCluster,
    RedisClusterPhase,
    RedisClusterSpec,
    RedisClusterStatus,
)
from pyctrl.crdgen import generate_crd


def test_spec_defaults_match_the_issue() -> None:
    spec = RedisClusterSpec()
    assert (spec.replicas, spec.image, spec.enable_auto_failover) == (3, DEFAULT_IMAGE, True)
    assert (spec.down_after_milliseconds, spec.enable_persistence, spec.storage_size) == (5000, False, "1Gi")
    assert (spec.memory_limit, spec.redis_config, spec.resources) == (None, {}, None)
    # secure by default (issue 24): a generated password, a NetworkPolicy
    assert (spec.auth.enabled, spec.auth.password_secret, spec.network_policy.enabled) == (True, None, True)
    assert DEFAULT_IMAGE.startswith("redis:7")


def test_python_names_are_snake_case_and_the_wire_is_camel_case() -> None:
    spec = RedisClusterSpec(down_after_milliseconds=2000, memory_limit="1Gi")
    wire = spec.model_dump(mode="json", exclude_none=True)
    assert wire["downAfterMilliseconds"] == 2000
    assert wire["memoryLimit"] == "1Gi"
    assert RedisClusterSpec.model_validate(wire) == spec
    status = RedisClusterStatus(ready_replicas=2, current_master="rc-0", master_epoch=4)
    assert {
        "readyReplicas": 2,
        "currentMaster": "rc-0",
        "masterEpoch": 4,
    }.items() <= status.model_dump().items()


def test_quantities_accept_integers_and_are_always_strings() -> None:
    spec = RedisClusterSpec.model_validate(
        {"memoryLimit": 1073741824, "storageSize": 5, "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}
    )
    assert (spec.memory_limit, spec.storage_size) == ("1073741824", "5")
    assert spec.resources is not None
    assert spec.resources.limits == {"cpu": "2", "memory": "1Gi"}


@pytest.mark.parametrize(
    "spec",
    [{"replicas": "3"}, {"enableAutoFailover": "true"}, {"downAfterMilliseconds": 5000.5}, {"image": 7}],
    ids=["replicas-string", "bool-string", "float", "image-int"],
)
def test_spec_is_strict_about_json_types_as_the_apiserver_is(spec: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        RedisClusterSpec.model_validate(spec)


def test_object_fills_type_meta_and_reads_status_phase_as_enum() -> None:
    rc = RedisCluster.model_validate({"metadata": {"name": "rc"}, "status": {"phase": "Failover"}})
    assert (rc.api_version, rc.kind) == ("redis.pyctrl.dev/v1alpha1", "RedisCluster")
    assert rc.spec == RedisClusterSpec()
    assert rc.status is not None
    assert rc.status.phase is RedisClusterPhase.FAILOVER
    assert [p.value for p in RedisClusterPhase] == [
        "Initializing",
        "Running",
        "Degraded",
        "Failover",
        "Hibernated",
    ]


def test_crd_declares_names_subresources_and_columns_of_the_issue() -> None:
    crd = generate_crd(RedisCluster)
    assert crd["metadata"]["name"] == "redisclusters.redis.pyctrl.dev"
    assert crd["spec"]["names"]["shortNames"] == ["rdc"]
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1"
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.readyReplicas",
        "labelSelectorPath": ".status.selector",
    }
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert {k: columns[k] for k in ("Replicas", "Ready", "Master", "Phase", "Age")} == {
        "Replicas": ".spec.replicas",
        "Ready": ".status.readyReplicas",
        "Master": ".status.currentMaster",
        "Phase": ".status.phase",
        "Age": ".metadata.creationTimestamp",
    }
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status["phase"]["enum"] == ["Initializing", "Running", "Degraded", "Failover", "Hibernated"]
    assert set(status["conditions"]["items"]["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
