"""The generated RedisCluster CRD on a real apiserver: structural, defaulting, validating, subresources.

The session's envtest installs every CRD under ``crds/`` at start, so these tests exercise the
committed file; ``test_crds_directory_is_up_to_date`` proves that file is what the model generates.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from examples.rediscluster.api import RedisCluster, RedisClusterSpec
from examples.rediscluster.api.backup import RedisBackupSpec
from pyctrl.envtest import Environment, poll_until
from pyctrl.envtest._http import ApiError
from tests.crdgen._kube import kubectl, kubectl_run
from tests.rediscluster.test_redisconf import HOSTILE_KEYS, HOSTILE_VALUES

pytestmark = pytest.mark.controlplane

CRD_NAME = "redisclusters.redis.pyctrl.dev"


def base(namespace: str) -> str:
    return f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{namespace}/redisclusters"


def manifest(name: str, spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "redis.pyctrl.dev/v1alpha1", "kind": "RedisCluster"}
    body["metadata"] = {"name": name}
    if spec is not None:
        body["spec"] = spec
    return body


def create(envtest: Environment, namespace: str, name: str, spec: Any) -> dict[str, Any]:
    created: dict[str, Any] = envtest.http.request("POST", base(namespace), manifest(name, spec))
    return created


def test_generated_crd_is_established_with_a_structural_schema(envtest: Environment) -> None:
    crd = envtest.http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert "NonStructuralSchema" not in conditions
    assert crd["status"]["acceptedNames"]["shortNames"] == ["rdc"]


@pytest.mark.parametrize("spec", [{}, None], ids=["empty-spec", "no-spec"])
def test_apiserver_defaults_match_the_model_defaults(
    envtest: Environment, namespace: str, spec: dict[str, Any] | None
) -> None:
    created = create(envtest, namespace, "defaults", spec)
    assert created["spec"]["replicas"] == 3
    assert created["spec"]["downAfterMilliseconds"] == 5000
    assert created["spec"] == RedisClusterSpec().model_dump(mode="json", exclude_none=True)
    assert RedisCluster.model_validate(created).spec == RedisClusterSpec()


BAD_SPECS = [
    ({"replicas": 0}, "spec.replicas", "replicas"),
    ({"replicas": 11}, "spec.replicas", "replicas"),
    ({"replicas": "three"}, "spec.replicas", "replicas"),
    ({"replicas": "3"}, "spec.replicas", "replicas"),
    ({"downAfterMilliseconds": 500}, "spec.downAfterMilliseconds", "downAfterMilliseconds"),
    ({"enableAutoFailover": "yes"}, "spec.enableAutoFailover", "enableAutoFailover"),
    ({"memoryLimit": "lots"}, "spec.memoryLimit", "memoryLimit"),
    ({"memoryLimit": True}, "spec.memoryLimit", "memoryLimit"),
    ({"storageSize": "1 Gi"}, "spec.storageSize", "storageSize"),
    ({"image": ""}, "spec.image", "image"),
    ({"auth": {"enabled": "no"}}, "spec.auth.enabled", "enabled"),
    (
        {"users": [{"name": f"u{i}", "passwordSecret": {"name": "s"}} for i in range(65)]},
        "spec.users",
        "users",
    ),
    ({"auth": {"enabled": False, "passwordSecret": {"name": "pw"}}}, "spec.auth", "auth"),
    ({"auth": {"passwordSecret": {"name": ""}}}, "spec.auth.passwordSecret.name", "name"),
    ({"redisConfig": {"maxmemory-policy": 1}}, "spec.redisConfig.maxmemory-policy", "maxmemory-policy"),
    ({"resources": {"limits": {"memory": "1 GB"}}}, "spec.resources.limits.memory", "memory"),
    ({"mode": "sharded"}, "spec.mode", "mode"),
    ({"mode": "cluster", "shards": 2}, "spec.shards", "shards"),
    ({"mode": "cluster", "shards": 101}, "spec.shards", "shards"),
    ({"mode": "cluster", "replicasPerShard": 6}, "spec.replicasPerShard", "replicasPerShard"),
    ({"mode": "cluster", "replicasPerShard": -1}, "spec.replicasPerShard", "replicasPerShard"),
]


@pytest.mark.parametrize(("spec", "field", "loc"), BAD_SPECS, ids=[json.dumps(s[0]) for s in BAD_SPECS])
def test_invalid_spec_is_rejected_by_the_apiserver_and_the_model(
    envtest: Environment, namespace: str, spec: dict[str, Any], field: str, loc: str
) -> None:
    with pytest.raises(ApiError) as err:
        create(envtest, namespace, "bad", spec)
    assert err.value.code == 422
    assert field in str(err.value)
    with pytest.raises(ValidationError) as invalid:
        RedisClusterSpec.model_validate(spec)
    assert any(e["loc"][-1] == loc or loc in e["loc"] for e in invalid.value.errors())


GOOD_SPECS = [
    {"replicas": 1, "downAfterMilliseconds": 1000},
    {"replicas": 10, "memoryLimit": "512Mi", "enablePersistence": True, "storageSize": 2147483648},
    {"memoryLimit": 1073741824, "redisConfig": {"maxmemory-policy": "allkeys-lru"}},
    {"auth": {"passwordSecret": {"name": "redis-auth", "key": "pw"}}, "image": "redis:7.4"},
    {"auth": {}},
    {"auth": {"enabled": False}},
    {"resources": {"limits": {"cpu": 1, "memory": "1Gi"}, "requests": {"cpu": "100m"}}},
]


@pytest.mark.parametrize("spec", GOOD_SPECS, ids=[json.dumps(s) for s in GOOD_SPECS])
def test_valid_spec_is_accepted_by_both_and_reads_back_as_the_model(
    envtest: Environment, namespace: str, spec: dict[str, Any]
) -> None:
    created = create(envtest, namespace, "good", spec)
    model = RedisClusterSpec.model_validate(spec)
    assert RedisCluster.model_validate(created).spec == RedisClusterSpec.model_validate(created["spec"])
    assert RedisClusterSpec.model_validate(created["spec"]) == model


def test_printer_columns_show_in_kubectl_get_wide(
    envtest: Environment, kubeconfig: Path, namespace: str
) -> None:
    create(envtest, namespace, "cols", {"replicas": 4})
    status = {"readyReplicas": 2, "currentMaster": "cols-0", "phase": "Running", "masterEpoch": 7}
    path = f"{base(namespace)}/cols/status"
    envtest.http.request("PATCH", path, {"status": status}, content_type="application/merge-patch+json")
    out = kubectl(envtest, kubeconfig, "-n", namespace, "get", "rdc", "-o", "wide")
    header, row = out.splitlines()[:2]
    assert header.split() == [
        "NAME", "REPLICAS", "READY", "MASTER", "PHASE", "STATE", "MODE", "SHARDS", "EPOCH", "IMAGE", "AGE"
    ]  # fmt: skip
    # an empty column (no clusterState in replication mode) prints as blanks
    assert row.split()[:9] == ["cols", "4", "2", "cols-0", "Running", "replication", "3", "7", "redis:7.2"]
    narrow = kubectl(envtest, kubeconfig, "-n", namespace, "get", "redisclusters").splitlines()[0]
    assert narrow.split() == ["NAME", "REPLICAS", "READY", "MASTER", "PHASE", "STATE", "AGE"]
    create(envtest, namespace, "sharded", {"mode": "cluster", "shards": 5})
    path = f"{base(namespace)}/sharded/status"
    status = {"readyReplicas": 10, "phase": "Running", "clusterState": "ok"}
    envtest.http.request("PATCH", path, {"status": status}, content_type="application/merge-patch+json")
    out = kubectl(envtest, kubeconfig, "-n", namespace, "get", "rdc", "sharded", "-o", "wide")
    assert out.splitlines()[1].split()[:7] == ["sharded", "3", "10", "Running", "ok", "cluster", "5"]


def test_mode_and_replicas_per_shard_are_immutable_and_cluster_mode_refuses_kubectl_scale(
    envtest: Environment, kubeconfig: Path, namespace: str
) -> None:
    create(envtest, namespace, "cm", {"mode": "cluster", "shards": 3})
    path = f"{base(namespace)}/cm"
    for patch, field, message in [
        ({"mode": "replication"}, "spec.mode", "spec.mode is immutable"),
        ({"replicasPerShard": 2}, "spec.replicasPerShard", "spec.replicasPerShard cannot be changed"),
        ({"replicas": 5}, "spec.replicas", "spec.replicas is not used in cluster mode"),
    ]:
        with pytest.raises(ApiError) as err:
            envtest.http.request("PATCH", path, {"spec": patch}, content_type="application/merge-patch+json")
        assert err.value.code == 422
        assert field in str(err.value)
        assert message in str(err.value)
    refused = kubectl_run(envtest, kubeconfig, "-n", namespace, "scale", "rdc/cm", "--replicas=5")
    assert refused.returncode != 0
    assert "spec.replicas is not used in cluster mode" in refused.stderr
    envtest.http.request("PATCH", path, {"spec": {"shards": 4}}, content_type="application/merge-patch+json")
    assert envtest.http.get(path)["spec"] == {**envtest.http.get(path)["spec"], "shards": 4, "replicas": 3}
    create(envtest, namespace, "rm", {})
    with pytest.raises(ApiError) as err:
        envtest.http.request(
            "PATCH",
            f"{base(namespace)}/rm",
            {"spec": {"mode": "cluster"}},
            content_type="application/merge-patch+json",
        )
    assert "spec.mode is immutable" in str(err.value)


def test_scale_subresource_reads_and_writes_replicas(
    envtest: Environment, kubeconfig: Path, namespace: str
) -> None:
    create(envtest, namespace, "sc", {})
    envtest.http.request(
        "PATCH",
        f"{base(namespace)}/sc/status",
        {"status": {"readyReplicas": 2, "selector": "app=redis,cluster=sc"}},
        content_type="application/merge-patch+json",
    )
    scale = envtest.http.get(f"{base(namespace)}/sc/scale")
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 2, "selector": "app=redis,cluster=sc"}
    kubectl(envtest, kubeconfig, "-n", namespace, "scale", "rdc/sc", "--replicas=5")
    assert envtest.http.get(f"{base(namespace)}/sc")["spec"]["replicas"] == 5
    refused = kubectl_run(envtest, kubeconfig, "-n", namespace, "scale", "rdc/sc", "--replicas=11")
    assert refused.returncode != 0
    assert "spec.replicas" in refused.stderr
    assert envtest.http.get(f"{base(namespace)}/sc/scale")["spec"]["replicas"] == 5


def test_status_subresource_separates_spec_and_status_writes(envtest: Environment, namespace: str) -> None:
    created = create(envtest, namespace, "st", {})
    generation = created["metadata"]["generation"]

    changed = {**created, "spec": {**created["spec"], "replicas": 4}, "status": {"phase": "Running"}}
    updated = envtest.http.request("PUT", f"{base(namespace)}/st", changed)
    assert updated["spec"]["replicas"] == 4
    assert "status" not in updated  # the main resource ignores status
    assert updated["metadata"]["generation"] == generation + 1

    changed = {**updated, "spec": {**updated["spec"], "replicas": 9}, "status": {"phase": "Degraded"}}
    written = envtest.http.request("PUT", f"{base(namespace)}/st/status", changed)
    assert written["status"]["phase"] == "Degraded"
    assert written["spec"]["replicas"] == 4  # /status ignores spec
    assert written["metadata"]["generation"] == generation + 1

    bad = {**written, "status": {**written["status"], "phase": "Exploded"}}
    with pytest.raises(ApiError) as err:
        envtest.http.request("PUT", f"{base(namespace)}/st/status", bad)
    assert err.value.code == 422
    assert "status.phase" in str(err.value)


def test_conditions_are_a_map_keyed_by_type(envtest: Environment, namespace: str) -> None:
    create(envtest, namespace, "cond", {})
    path = f"{base(namespace)}/cond/status"
    condition = {"type": "Ready", "status": "True", "reason": "Synced", "message": "ok"}
    twice = {"status": {"conditions": [condition, {**condition, "status": "False"}]}}
    with pytest.raises(ApiError) as err:
        envtest.http.request("PATCH", path, twice, content_type="application/merge-patch+json")
    assert err.value.code == 422
    assert "status.conditions" in str(err.value)
    once = {"status": {"conditions": [condition]}}
    written = envtest.http.request("PATCH", path, once, content_type="application/merge-patch+json")
    status = RedisCluster.model_validate(written).status
    assert status is not None
    assert [(c.type, c.status) for c in status.conditions] == [("Ready", "True")]


def test_short_name_and_category_resolve_in_kubectl(
    envtest: Environment, kubeconfig: Path, namespace: str
) -> None:
    create(envtest, namespace, "named", {})

    def listed(resource: str) -> bool:
        out = kubectl(envtest, kubeconfig, "-n", namespace, "get", resource, "-o", "name")
        return "rediscluster.redis.pyctrl.dev/named" in out.split()

    assert listed("rdc")
    poll_until("the 'redis' category in discovery", lambda: listed("redis"), 30)


def test_kubectl_apply_refuses_every_hostile_redis_config_naming_the_key(
    envtest: Environment, kubeconfig: Path, namespace: str
) -> None:
    """Issue 24, test 3: the RedisCluster CRD's CEL rules (``redisconf.cel_validations``) refuse
    every hostile ``redisConfig`` of the security review at ``kubectl apply``, each refusal naming
    its key; none of the objects is stored (so no operator ever renders it into redis.conf)."""
    keys = sorted(HOSTILE_KEYS)
    values = [v for v in HOSTILE_VALUES if "\x00" not in v]  # NUL: not JSON text, refused earlier
    items = [manifest(f"k{i}", {"redisConfig": {"hz": "10", key: "1"}}) for i, key in enumerate(keys)]
    items += [manifest(f"v{i}", {"redisConfig": {"maxmemory": value}}) for i, value in enumerate(values)]
    applied = apply_list(envtest, kubeconfig, namespace, items)
    assert applied.returncode != 0
    refused = (
        re.search(r'RedisCluster\.redis\.pyctrl\.dev "([^"]+)" is invalid', line)
        for line in applied.stderr.splitlines()
    )
    refusals = {m.group(1): m.string for m in refused if m is not None}
    assert sorted(refusals) == sorted(item["metadata"]["name"] for item in items), applied.stderr
    for i, key in enumerate(keys):
        assert f"redisConfig may not set {key}" in refusals[f"k{i}"], refusals[f"k{i}"]
    for i in range(len(values)):
        assert "without backslashes or newlines: maxmemory" in refusals[f"v{i}"], refusals[f"v{i}"]
    assert envtest.http.get(base(namespace))["items"] == []


@pytest.mark.parametrize(
    ("path", "admitted"),
    [("../etc/x", False), ("a/../../x", False), ("a/..", False), ("/abs", False), ("a/..b/c..", True)],
)
def test_a_pvc_path_stays_inside_the_volume(
    envtest: Environment, namespace: str, path: str, admitted: bool
) -> None:
    """Issue 24: a RedisBackup's PVC path with a ``..`` segment or absolute is refused by the
    apiserver and by the model alike; ``..`` inside a name is just a name."""
    spec = {"clusterName": "rc", "destination": {"pvc": {"claimName": "backups", "path": path}}}
    body = {"apiVersion": "redis.pyctrl.dev/v1alpha1", "kind": "RedisBackup", "metadata": {"name": "b"}}
    url = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{namespace}/redisbackups?dryRun=All"
    if admitted:
        envtest.http.request("POST", url, {**body, "spec": spec})
        RedisBackupSpec.model_validate(spec)
        return
    with pytest.raises(ApiError) as err:
        envtest.http.request("POST", url, {**body, "spec": spec})
    assert err.value.code == 422
    assert "spec.destination.pvc.path" in str(err.value)
    with pytest.raises(ValidationError):
        RedisBackupSpec.model_validate(spec)


def test_kubectl_apply_refuses_names_no_child_could_carry_and_per_second_schedules(
    envtest: Environment, kubeconfig: Path, namespace: str
) -> None:
    """Issue 24: the CRD's CEL rules refuse a name over 52 characters or with a dot (the
    StatefulSet's revision label and the Services could not carry it) and a per-second backup
    schedule, each naming the field; a 52-character name is admitted."""
    pvc = {"pvc": {"claimName": "backups"}}
    items = [
        manifest("a" * 53, {}),
        manifest("my.cache", {}),
        manifest("persecond", {"backup": {"schedule": "* * * * * *", "destination": pvc}}),
        manifest("a" * 52, {"backup": {"schedule": "* * * * * */15", "destination": pvc}}),
    ]
    applied = apply_list(envtest, kubeconfig, namespace, items)
    assert applied.returncode != 0
    refusals = {
        m.group(1): line
        for line in applied.stderr.splitlines()
        if (m := re.search(r'RedisCluster\.redis\.pyctrl\.dev "([^"]+)" is invalid', line)) is not None
    }
    assert sorted(refusals) == sorted(["a" * 53, "my.cache", "persecond"]), applied.stderr
    assert "metadata.name must be at most 52 characters" in refusals["a" * 53]
    assert "metadata.name must be a DNS-1035 label" in refusals["my.cache"]
    assert "spec.backup.schedule" in refusals["persecond"]
    assert "a per-second schedule is refused" in refusals["persecond"]
    assert [i["metadata"]["name"] for i in envtest.http.get(base(namespace))["items"]] == ["a" * 52]


def apply_list(
    envtest: Environment, kubeconfig: Path, namespace: str, items: list[dict[str, Any]]
) -> subprocess.CompletedProcess[str]:
    """``kubectl apply`` of ``items`` as one List in ``namespace`` (the refusals land in stderr)."""
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    return kubectl_run(envtest, kubeconfig, "-n", namespace, "apply", "-f", "-", stdin=body)
