"""examples.rediscluster.shared.resources / scheduling: the pod template's placement and shutdown, as data."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from examples.rediscluster.api import RedisCluster, RedisClusterSpec
from examples.rediscluster.api.redisconf import ALLOWED
from examples.rediscluster.cluster.resources import cluster_redis_conf
from examples.rediscluster.shared.resources import (
    LIVE_KEYS,
    PRESTOP_WAIT_SECONDS,
    InvalidSpec,
    live_settings,
    redis_conf,
    statefulset,
)
from tests.rediscluster.test_redisconf import HOSTILE_KEYS, HOSTILE_VALUES


def pod_spec(**spec: Any) -> dict[str, Any]:
    cluster = RedisCluster.model_validate({"metadata": {"name": "rc", "namespace": "ns"}, "spec": spec})
    result: dict[str, Any] = statefulset(cluster, cluster.spec.replicas)["spec"]["template"]["spec"]
    return result


SELECTOR = {"matchLabels": {"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "rc"}}


def test_pods_prefer_other_nodes_and_zones_by_default() -> None:
    spec = pod_spec()
    assert spec["affinity"] == {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {"labelSelector": SELECTOR, "topologyKey": "kubernetes.io/hostname"},
                }
            ]
        }
    }
    assert spec["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": SELECTOR,
        }
    ]
    assert "tolerations" not in spec
    assert "nodeSelector" not in spec


def test_the_spec_overrides_placement() -> None:
    required = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": SELECTOR, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    toleration = {"key": "dedicated", "operator": "Equal", "value": "redis", "effect": "NoSchedule"}
    spec = pod_spec(
        affinity=required,
        tolerations=[toleration],
        topologySpreadConstraints=[],
        nodeSelector={"disk": "ssd"},
    )
    assert spec["affinity"] == required
    assert spec["tolerations"] == [toleration]
    assert "topologySpreadConstraints" not in spec  # [] turns the default spread off
    assert spec["nodeSelector"] == {"disk": "ssd"}


@pytest.mark.parametrize(
    "bad",
    [
        {"tolerations": [{"operator": "Sometimes"}]},
        {
            "topologySpreadConstraints": [
                {"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway"}
            ]
        },
        {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}},
        {"nodeLoss": {"afterSeconds": -1}},
    ],
)
def test_bad_placement_is_refused_by_the_spec_model(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RedisClusterSpec.model_validate(bad)


def test_a_terminating_master_waits_in_prestop_for_the_handover_within_a_bound() -> None:
    container = pod_spec()["containers"][0]
    script = container["lifecycle"]["preStop"]["exec"]["command"][2]
    assert f"+ {PRESTOP_WAIT_SECONDS}))" in script
    assert "role:master" in script
    assert "connected_slaves:0" in script
    assert pod_spec()["terminationGracePeriodSeconds"] > PRESTOP_WAIT_SECONDS
    with_auth = pod_spec(auth={"passwordSecret": {"name": "s"}})["containers"][0]
    assert 'REDISCLI_AUTH="$REDIS_PASSWORD"' in with_auth["lifecycle"]["preStop"]["exec"]["command"][2]


def _config_hash(**spec: Any) -> str:
    cluster = RedisCluster.model_validate({"metadata": {"name": "rc", "namespace": "ns"}, "spec": spec})
    template = statefulset(cluster, 3)["spec"]["template"]
    return str(template["metadata"]["annotations"]["redis.pyctrl.dev/config-hash"])


def test_only_settings_redis_cannot_change_at_run_time_change_the_pod_template() -> None:
    base = _config_hash(redisConfig={"maxmemory-policy": "noeviction"})
    assert "maxmemory-policy" in LIVE_KEYS
    assert _config_hash(redisConfig={"maxmemory-policy": "allkeys-lru"}) == base
    assert _config_hash(redisConfig={"maxmemory-policy": "noeviction", "databases": "32"}) != base
    spec = RedisClusterSpec.model_validate(
        {"redisConfig": {"Maxmemory-Policy": "allkeys-lru", "databases": "32"}}
    )
    assert live_settings(spec) == {"maxmemory-policy": ("allkeys-lru",)}
    assert "maxmemory-policy allkeys-lru" in redis_conf(spec)  # kept in redis.conf for the next start
    assert LIVE_KEYS <= ALLOWED  # nothing a tenant may not set is ever sent with CONFIG SET


@pytest.mark.parametrize("mode", ["replication", "cluster"])
def test_no_hostile_redis_config_reaches_redis_conf(mode: str) -> None:
    """What CEL refuses at admission is refused again here (a spec that skipped admission, e.g.
    stored before the CRD had the rules): InvalidSpec naming the key, no redis.conf rendered."""
    render = cluster_redis_conf if mode == "cluster" else redis_conf
    extra = {"mode": "cluster", "shards": 3} if mode == "cluster" else {}
    for key in HOSTILE_KEYS:
        spec = RedisClusterSpec.model_validate({**extra, "redisConfig": {"hz": "10", key: "/tmp"}})
        with pytest.raises(InvalidSpec) as refused:
            render(spec)
        assert str(refused.value).startswith(f"spec.redisConfig key {key!r}"), refused.value
    for value in HOSTILE_VALUES:
        spec = RedisClusterSpec.model_validate({**extra, "redisConfig": {"maxmemory": value}})
        with pytest.raises(InvalidSpec, match=r"spec\.redisConfig key 'maxmemory'"):
            render(spec)
    # words of a value stay the arguments of their own directive (LiveConfig sends them as ONE
    # CONFIG SET value, which Redis refuses for maxmemory-policy): never a second directive
    spec = RedisClusterSpec.model_validate(
        {**extra, "redisConfig": {"maxmemory-policy": "noeviction dir /x"}}
    )
    assert live_settings(spec) == {"maxmemory-policy": ("noeviction", "dir", "/x")}


def test_the_statefulset_leaves_the_rollout_order_to_the_operator() -> None:
    cluster = RedisCluster.model_validate({"metadata": {"name": "rc", "namespace": "ns"}})
    assert statefulset(cluster, 3)["spec"]["updateStrategy"] == {"type": "OnDelete"}
