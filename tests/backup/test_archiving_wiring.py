"""The operator's wiring of point-in-time recovery (``backup.archiving``): the API's rules (model
and CRD), the sidecar and the restore init container as the children carry them, the refusals,
and ``status.archive`` / ``ContinuousArchiving`` read from a real archiver process's ``/status``."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from examples.rediscluster.api import RedisCluster, RedisClusterStatus, RestoreSource
from examples.rediscluster.backup import archiving
from examples.rediscluster.backup.restore import RestoreState
from examples.rediscluster.shared.resources import desired_children
from examples.rediscluster.shared.security.podsecurity import REDIS_UID
from pyctrl.client import Pod
from pyctrl.crdgen import openapi_schema
from pyctrl.envtest import poll_until
from pyctrl.envtest._process import ManagedProcess, start_process
from tests.rediscluster._servers import free_port

S3 = {"endpoint": "http://127.0.0.1:7070", "bucket": "backups", "credentialsSecret": {"name": "s3-creds"}}
IMAGE = "pyctrl/rediscluster-operator:0.1.0"


def cluster(**spec: Any) -> RedisCluster:
    body = {"metadata": {"name": "orders", "namespace": "shop", "uid": "u1"}, "spec": spec}
    return RedisCluster.model_validate(body)


def archived(**spec: Any) -> RedisCluster:
    backup = {"destination": {"s3": S3}, "archive": {"archiveTimeoutSeconds": 30, "retentionDays": 7}}
    return cluster(enablePersistence=True, backup=backup, **spec)


def by_kind(children: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(c for c in children if c["kind"] == kind)


def test_the_sidecar_is_restricted_takes_keys_by_reference_and_reads_its_role_from_the_labels() -> None:
    c = archived()
    children = desired_children(c, 3)
    archiving.apply_archiving(c, children, IMAGE)
    conf = by_kind(children, "ConfigMap")["data"]["redis.conf"]
    assert "appendonly yes" in conf
    assert "aof-timestamp-enabled yes" in conf
    pod = by_kind(children, "StatefulSet")["spec"]["template"]["spec"]
    sidecar = next(x for x in pod["containers"] if x["name"] == archiving.ARCHIVER_CONTAINER)
    assert sidecar["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    # the sidecar (65532) reaches Redis' files through the pod's fsGroup: Redis' own gid
    assert pod["securityContext"]["fsGroup"] == REDIS_UID
    env = {e["name"]: e for e in sidecar["env"]}
    for var, key in (
        ("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
        ("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
    ):
        assert env[var] == {
            "name": var,
            "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": key, "optional": True}},
        }
    args = sidecar["args"]
    assert args[args.index("--archive-timeout-seconds") + 1] == "30"
    assert args[args.index("--retention-days") + 1] == "7"
    assert args[args.index("--role-file") + 1] == "/etc/podinfo/labels"
    assert args[args.index("--cluster") + 1] == "orders"
    podinfo = next(v for v in pod["volumes"] if v["name"] == "podinfo")
    assert podinfo["downwardAPI"]["items"] == [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
    ]
    assert (
        by_kind(children, "StatefulSet")["spec"]["template"]["metadata"]["annotations"][
            "redis.pyctrl.dev/archive"
        ]
        == "on"
    )


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"mode": "cluster"}, "not supported in cluster mode"),
        ({"enablePersistence": False}, "needs spec.enablePersistence: true"),
        ({"backup": {"destination": {"pvc": {"claimName": "b"}}, "archive": {}}}, "needs an S3"),
    ],
)
def test_an_archive_that_cannot_run_adds_nothing_and_says_why(spec: dict[str, Any], why: str) -> None:
    c = archived().model_copy(deep=True)
    body = c.model_dump(by_alias=True, exclude_none=True)
    body["spec"] |= spec
    c = RedisCluster.model_validate(body)
    children = desired_children(c, 3) if c.spec.mode == "replication" else []
    before = json.dumps(children, sort_keys=True)
    archiving.apply_archiving(c, children, IMAGE)
    assert json.dumps(children, sort_keys=True) == before
    cond = archiving.archive_condition(c, RedisClusterStatus(), "2026-01-01T00:00:00Z")
    assert cond is not None
    assert (cond.status, cond.reason) == ("False", "ArchiveUnsupported")
    assert why in (cond.message or "")


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ({}, "exactly one of backupName and pointInTime"),
        ({"backupName": "b", "pointInTime": "2026-12-03T15:20:00Z"}, "exactly one of backupName"),
        ({"pointInTime": "2026-12-03T15:20:00Z"}, "pointInTime needs archive"),
        ({"backupName": "b", "archive": {"clusterName": "x", "s3": S3}}, "pointInTime needs archive"),
        ({"pointInTime": "yesterday", "archive": {"clusterName": "x", "s3": S3}}, "is not an RFC 3339 time"),
        (
            {"pointInTime": "2026-12-03T15:20:00", "archive": {"clusterName": "x", "s3": S3}},
            "needs a time zone",
        ),
    ],
)
def test_a_restore_source_names_one_source(source: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        RestoreSource.model_validate(source)


def test_the_crd_carries_the_restore_rules_for_the_apiserver() -> None:
    schema = openapi_schema(RedisCluster)["properties"]["spec"]["properties"]["restoreFrom"]
    rules = {r["message"] for r in schema["x-kubernetes-validations"]}
    assert "exactly one of backupName and pointInTime must be set" in rules
    assert schema["properties"]["pointInTime"]["format"] == "date-time"


def test_a_point_in_time_restore_is_a_non_root_init_container_with_the_pods_fs_group() -> None:
    source = {"pointInTime": "2026-12-03T15:20:00Z", "archive": {"clusterName": "old", "s3": S3}}
    c = cluster(enablePersistence=True, restoreFrom=source)
    init, volumes = archiving.pitr_init_container(c, IMAGE)
    assert init["args"][:3] == ["restore", "--target-time", "2026-12-03T15:20:00Z"]
    assert "--keep-existing" in init["args"]
    assert init["args"][init["args"].index("--cluster") + 1] == "old"
    assert init["securityContext"]["runAsNonRoot"] is True
    children = desired_children(c, 2)
    RestoreState(init_container=init, volumes=volumes, fs_group=archiving.ARCHIVER_UID).apply(children)
    pod = by_kind(children, "StatefulSet")["spec"]["template"]["spec"]
    assert pod["initContainers"] == [init]
    # the Redis pod's own fsGroup stands: the init container (65532) writes group-writable files
    # (umask 002) into the setgid volume, which Redis (999, that group) then appends to
    assert pod["securityContext"]["fsGroup"] == REDIS_UID


@pytest.fixture
def keyless_archiver(tmp_path: Path) -> Iterator[int]:
    """The real archiver as the sidecar runs it, but with no S3 keys in its environment."""
    port = free_port()
    argv = [sys.executable, "-m", "examples.rediscluster.backup.archive"]
    argv += ["--aof-dir", str(tmp_path / "appendonlydir"), "--state-dir", str(tmp_path / "state")]
    argv += ["--status-address", "127.0.0.1", "--status-port", str(port)]
    argv += [
        "--s3-endpoint",
        "http://127.0.0.1:9",
        "--s3-bucket",
        "b",
        "--namespace",
        "shop",
        "--cluster",
        "orders",
    ]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    process: ManagedProcess = start_process(
        "archiver", argv, tmp_path / "archiver.log", attached=True, env=env
    )
    try:
        yield port
    finally:
        process.stop(grace=10)
    assert process.exit_code() == 0  # it served its error until stopped, never crashed


async def test_missing_keys_keep_the_sidecar_up_and_the_condition_names_the_store_error(
    keyless_archiver: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archiving, "STATUS_PORT", keyless_archiver)
    c = archived()
    pod = Pod.model_validate(
        {"metadata": {"name": "orders-0", "namespace": "shop"}, "status": {"podIP": "127.0.0.1"}}
    )
    now = "2026-01-01T00:00:00Z"

    async def observed() -> tuple[Any, Any]:
        return await archiving.observe_archive(c, {"orders-0": pod}, "orders-0", now)

    poll_until("the archiver to listen", lambda: _listening(keyless_archiver), 30)
    archive, cond = await observed()
    assert cond is not None
    assert (cond.type, cond.status, cond.reason) == ("ContinuousArchiving", "False", "StoreError")
    assert "credentials are missing" in (cond.message or "")
    assert archive is not None
    assert (archive.pod, archive.timeline, archive.last_archived_time) == ("orders-0", None, None)
    archive, cond = await archiving.observe_archive(c, {"orders-0": pod}, None, now)
    assert cond is not None
    assert cond.reason == "NoMaster"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
