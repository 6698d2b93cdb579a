"""RedisBackup end to end: the operator (holding only the generated ClusterRole) runs backup Jobs
on the local node, from real redis-server pods into a real S3 store (versitygw) and a PVC."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from pyctrl.envtest import Environment
from pyctrl.envtest.objectstore import ObjectStore
from pyctrl.testing import eventually
from tests.backup.conftest import BUCKET, object_store
from tests.operator.conftest import Cluster, RunningOperator

__all__ = ["object_store"]  # the session fixture, used here

pytestmark = pytest.mark.controlplane

BACKUPS = "/apis/redis.pyctrl.dev/v1alpha1/namespaces/{ns}/redisbackups"


class Backups:
    """Test-side view of the namespace's RedisBackups (admin HTTP client)."""

    def __init__(self, envtest: Environment, namespace: str) -> None:
        self.envtest, self.namespace = envtest, namespace
        self.base = BACKUPS.format(ns=namespace)

    def create(self, name: str, cluster: str, destination: dict[str, Any]) -> None:
        body = {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisBackup",
            "metadata": {"name": name},
            "spec": {"clusterName": cluster, "destination": destination},
        }
        self.envtest.http.request("POST", self.base, body)

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.envtest.http.get(f"{self.base}/{name}"))

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})

    async def finished(self, name: str) -> dict[str, Any] | None:
        status = self.status(name)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    def events(self, name: str) -> list[dict[str, Any]]:
        items = self.envtest.http.get(f"/api/v1/namespaces/{self.namespace}/events")["items"]
        return [e for e in items if e["involvedObject"].get("name") == name]


def s3_destination(
    store: ObjectStore, *, bucket: str = BUCKET, endpoint: str | None = None
) -> dict[str, Any]:
    return {
        "s3": {
            "endpoint": endpoint or store.endpoint,
            "bucket": bucket,
            "prefix": "redis/",
            "credentialsSecret": {"name": "s3-creds"},
        }
    }


def create_s3_secret(envtest: Environment, namespace: str, access: str, secret: str) -> None:
    data = {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}
    envtest.http.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        {
            "metadata": {"name": "s3-creds"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        },
    )


def create_claim(envtest: Environment, namespace: str, name: str) -> None:
    envtest.http.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        {
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )


def claim_dir(envtest: Environment, namespace: str, name: str) -> Path:
    """The host directory of the claim's volume (the local node's hostPath provisioner)."""
    pvc = envtest.http.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")
    pv = envtest.http.get(f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
    return Path(pv["spec"]["hostPath"]["path"])


async def load_keys(client: aioredis.Redis, n: int) -> dict[str, str]:
    data = {f"key:{i}": f"value-{i}-{'v' * (i % 13)}" for i in range(n)}
    items = list(data.items())
    for start in range(0, n, 10_000):
        pipe = client.pipeline(transaction=False)
        for k, v in items[start : start + 10_000]:
            pipe.set(k, v)
        await pipe.execute()
    return data


async def running_cluster(c: Cluster, replicas: int = 2) -> str:
    c.create(replicas=replicas, downAfterMilliseconds=2000)
    await eventually(lambda: c.ready(replicas), within=120, what="Running", interval=0.2)
    return str(c.status()["currentMaster"])


def cmdlines() -> list[bytes]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    out.append(f.read())
            except OSError:
                continue
    return out


async def test_a_backup_to_s3_and_to_a_pvc_succeeds_with_the_size_and_sha256_of_what_is_stored(
    operator: RunningOperator,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    c = cluster_factory("src")
    master = await running_cluster(c)
    writer = await c.redis(master)
    await load_keys(writer, 100_000)
    assert await writer.wait(1, 5000) == 1  # the replica has every key before the snapshot
    await writer.aclose()
    create_s3_secret(envtest, namespace, object_store.access_key, object_store.secret_key)
    create_claim(envtest, namespace, "backups")
    b = Backups(envtest, namespace)
    b.create("to-s3", "src", s3_destination(object_store))
    b.create("to-pvc", "src", {"pvc": {"claimName": "backups"}})
    s3 = await eventually(lambda: b.finished("to-s3"), within=120, what="to-s3 finished", interval=0.5)
    pvc = await eventually(lambda: b.finished("to-pvc"), within=120, what="to-pvc finished", interval=0.5)
    assert s3["phase"] == "Succeeded", s3
    assert pvc["phase"] == "Succeeded", pvc
    replica = next(p for p in c.pods() if p != master)
    assert s3["sourcePod"] == pvc["sourcePod"] == replica  # taken from the replica, not the master
    key = f"redis/{namespace}/to-s3.rdb"
    assert s3["location"] == f"s3://{BUCKET}/{key}"
    body = object_store.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert (s3["sizeBytes"], s3["sha256"]) == (len(body), hashlib.sha256(body).hexdigest())
    assert body.startswith(b"REDIS")
    assert pvc["location"] == "pvc://backups/to-pvc"
    stored = (claim_dir(envtest, namespace, "backups") / "to-pvc").read_bytes()
    assert (pvc["sizeBytes"], pvc["sha256"]) == (len(stored), hashlib.sha256(stored).hexdigest())
    assert len(stored) > 1_000_000  # 100,000 keys, not an empty snapshot
    assert {"BackupStarted", "BackupSucceeded"} <= {e["reason"] for e in b.events("to-s3")}
    job = envtest.http.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/to-s3-backup")
    assert job["metadata"]["ownerReferences"][0]["name"] == "to-s3"
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["activeDeadlineSeconds"] > 0
    # the S3 secret key: nowhere but in its Secret
    visible = json.dumps(
        [
            b.get("to-s3"),
            job,
            envtest.http.get(f"/api/v1/namespaces/{namespace}/events"),
            envtest.http.get(f"/api/v1/namespaces/{namespace}/configmaps"),
            envtest.http.get(f"/api/v1/namespaces/{namespace}/pods"),
        ]
    )
    assert object_store.secret_key not in visible
    assert not [cmd for cmd in cmdlines() if object_store.secret_key.encode() in cmd]
    pods = envtest.http.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3Dto-s3-backup")
    log_dir = Path(pods["items"][0]["metadata"]["annotations"]["pyctrl.dev/log-dir"])
    log = (log_dir / "backup.log").read_text()
    assert "stored" in log
    assert object_store.secret_key not in log


async def test_bad_input_fails_with_its_reason_and_an_event_and_leaves_the_cluster_running(
    operator: RunningOperator,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    c = cluster_factory("ok")
    await running_cluster(c)
    create_s3_secret(envtest, namespace, object_store.access_key, "not-the-secret-key")
    b = Backups(envtest, namespace)
    envtest.http.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        {
            "metadata": {"name": "good-creds"},
            "data": {
                "AWS_ACCESS_KEY_ID": base64.b64encode(object_store.access_key.encode()).decode(),
                "AWS_SECRET_ACCESS_KEY": base64.b64encode(object_store.secret_key.encode()).decode(),
            },
        },
    )
    good = s3_destination(object_store)
    good["s3"]["credentialsSecret"] = {"name": "good-creds"}
    no_bucket = s3_destination(object_store, bucket="no-such-bucket")
    no_bucket["s3"]["credentialsSecret"] = {"name": "good-creds"}
    unreachable = s3_destination(object_store, endpoint="http://127.0.0.1:9")
    unreachable["s3"]["credentialsSecret"] = {"name": "good-creds"}
    cases = {
        "unknown-cluster": ("nope", good, "RedisCluster 'nope' not found"),
        "missing-bucket": ("ok", no_bucket, "bucket 'no-such-bucket' does not exist"),
        "wrong-credentials": ("ok", s3_destination(object_store), "rejected the credentials"),
        "unreachable": ("ok", unreachable, "cannot reach http://127.0.0.1:9"),
        "missing-claim": ("ok", {"pvc": {"claimName": "nope"}}, "PersistentVolumeClaim 'nope' not found"),
    }
    for name, (cluster, destination, _) in cases.items():
        b.create(name, cluster, destination)
    for name, (_, _, why) in cases.items():
        status = await eventually(partial(b.finished, name), within=180, what=f"{name} done", interval=0.5)
        assert status["phase"] == "Failed", (name, status)
        assert why in status["message"], (name, status["message"])
        assert any(e["type"] == "Warning" for e in b.events(name)), name
    # unreachable: retried (bounded) before failing; the permanent ones failed on their first pod
    jobs = envtest.http.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    failures = {
        j["metadata"]["labels"]["redis.pyctrl.dev/backup"]: j["status"].get("failed", 0) for j in jobs
    }
    assert failures["unreachable"] == 3
    assert failures["missing-bucket"] == failures["wrong-credentials"] == 1
    assert not {"unknown-cluster", "missing-claim"} & set(failures)  # refused before any Job
    assert await c.ready(2)
    listed = object_store.client().list_objects_v2(Bucket=BUCKET, Prefix=f"redis/{namespace}/")
    assert listed.get("KeyCount", 0) == 0
