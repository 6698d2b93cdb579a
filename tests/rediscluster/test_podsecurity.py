"""Every pod the operator makes is "restricted" by construction (``shared.security.podsecurity``),
in both modes and with every option that adds a container or a volume: pod-level non-root user,
fsGroup and RuntimeDefault seccomp, no service-account token, and in every container and init
container no privilege escalation, every capability dropped and a read-only root filesystem.
The real apiserver's PodSecurity admission judges the same pods in
tests/operator/test_podsecurity.py; this covers the combinations that test does not start.
Also: the NetworkPolicy flags refuse what does not parse, naming the flag."""

from __future__ import annotations

from typing import Any

import pytest

from examples.rediscluster.__main__ import parse_args
from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.backup import RedisBackup
from examples.rediscluster.backup.job import RedisLogin, backup_job, delete_job, restore_init_container
from examples.rediscluster.backup.restore import RestoreState
from examples.rediscluster.backup.shards import (
    ShardSource,
    cluster_backup_job,
    cluster_restore_init_container,
)
from examples.rediscluster.cluster.resources import cluster_children
from examples.rediscluster.shared.networkpolicy import parse_label_selector
from examples.rediscluster.shared.resources import desired_children

SPECS: list[dict[str, Any]] = [
    {},
    {"auth": {"enabled": False}, "monitoring": {"exporter": False}},
    {"tls": {"secretName": "t"}, "users": [], "enablePersistence": True},
    {"mode": "cluster"},
    {"mode": "cluster", "tls": {"secretName": "t"}, "users": [], "enablePersistence": True},
]


def cluster(**spec: Any) -> RedisCluster:
    return RedisCluster.model_validate(
        {"metadata": {"name": "rc", "namespace": "ns", "uid": "u"}, "spec": spec}
    )


def backup(**status: Any) -> RedisBackup:
    return RedisBackup.model_validate(
        {
            "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"clusterName": "rc", "destination": {"pvc": {"claimName": "backups"}}},
            "status": status,
        }
    )


def assert_restricted(pod: dict[str, Any], uid: int) -> None:
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["automountServiceAccountToken"] is False
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    assert containers
    for container in containers:
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, container["name"]
        assert sc["capabilities"] == {"drop": ["ALL"]}, container["name"]
        assert sc["readOnlyRootFilesystem"] is True, container["name"]
        assert sc.get("runAsUser", uid) != 0, container["name"]
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], container["name"]
    assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]


def pod_of(children: list[dict[str, Any]]) -> dict[str, Any]:
    (sts,) = [c for c in children if c["kind"] == "StatefulSet"]
    return dict(sts["spec"]["template"]["spec"])


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: ",".join(s) or "defaults")
def test_redis_pods_are_restricted_in_both_modes_with_every_option(spec: dict[str, Any]) -> None:
    c = cluster(**spec)
    children = cluster_children(c) if spec.get("mode") == "cluster" else desired_children(c, 3)
    pod = pod_of(children)
    assert_restricted(pod, 999)
    names = [x["name"] for x in pod["containers"]]
    assert names == (["redis"] if spec.get("monitoring") else ["redis", "redis-exporter"])
    if "redis-exporter" in names:  # its own image's user, kept over the pod's
        assert pod["containers"][1]["securityContext"]["runAsUser"] == 59000


@pytest.mark.parametrize("mode", ["replication", "cluster"])
def test_a_restored_pod_and_every_backup_job_are_restricted(mode: str) -> None:
    done = backup(phase="Succeeded", sha256="0" * 64, sizeBytes=10)
    c = cluster(mode=mode)
    children = cluster_children(c) if mode == "cluster" else desired_children(c, 1)
    init = (
        cluster_restore_init_container(done, "op", 1)
        if mode == "cluster"
        else restore_init_container(done, "op")
    )
    RestoreState(init_container=init, volumes=[{"name": "backup", "emptyDir": {}}]).apply(children)
    pod = pod_of(children)
    assert [x["name"] for x in pod["initContainers"]] == ["restore"]
    assert_restricted(pod, 999)  # the restore writes dump.rdb as Redis' own user
    sources = [ShardSource(i, f"rc-{i}", f"127.0.0.{i}", f"127.0.0.{i}", ("0-1",)) for i in range(3)]
    jobs = [
        backup_job(backup(), "rc-0", "127.0.0.1", "op", RedisLogin(("rc-auth", "password"))),
        cluster_backup_job(backup(), sources, "op", RedisLogin(("rc-auth", "password"), tls_secret="t")),
        delete_job(done, "op"),
    ]
    for job in jobs:
        assert_restricted(job["spec"]["template"]["spec"], 65532)


def test_the_network_policy_flags_refuse_what_does_not_parse(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_label_selector("a=b, c=d", "x") == {"a": "b", "c": "d"}
    assert parse_label_selector("", "x") == {}
    for bad in ("a", "=b", "a=b=c"):
        with pytest.raises(ValueError, match=r"--flag: .* is not key=value"):
            parse_label_selector(bad, "--flag")
    with pytest.raises(SystemExit):
        parse_args(["--network-policy-operator-labels=app"])
    assert "--network-policy-operator-labels: 'app' is not key=value" in capsys.readouterr().err
    options = parse_args(
        ["--network-policy-operator-namespace=ops", "--network-policy-monitoring-namespaces="]
    )
    peers = options.policy_peers()
    assert (peers.operator_namespace, dict(peers.monitoring_namespace_labels)) == ("ops", {})
