"""RedisBackup end to end: the operator (holding only the generated ClusterRole) runs backup Jobs
on the local node, from real redis-server pods into a real S3 store (versitygw) and a PVC."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from pyctrl.envtest import Environment
from pyctrl.envtest.objectstore import ObjectStore
from pyctrl.metrics import registry
from pyctrl.testing import eventually
from tests.backup.conftest import BUCKET, object_store
from tests.crdgen._kube import kubectl_run
from tests.operator.conftest import Cluster, OperatorFactory, RunningOperator
from tests.operator.test_cluster_mode import (
    all_seeds_readable,
    assert_check_clean,
    cluster_check,
    cluster_ready,
    fill,
)

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


async def recorded(envtest: Environment, namespace: str, name: str, *reasons: str) -> None:
    """Wait for Events with these reasons about ``name`` (the recorder writes in the background)."""

    async def check() -> bool:
        items = envtest.http.get(f"/api/v1/namespaces/{namespace}/events")["items"]
        return set(reasons) <= {e["reason"] for e in items if e["involvedObject"].get("name") == name}

    await eventually(check, within=30, what=f"Events {reasons} for {name}", interval=0.2)


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


# These tests do not fault Redis: a long down-after keeps a loaded machine's slow PONG (while
# 100,000 keys load) from starting a failover that would unblock the test's WAIT.
QUIET_DOWN_AFTER_MS = 10_000


async def running_cluster(c: Cluster, replicas: int = 2) -> str:
    await c.create_ready(replicas, downAfterMilliseconds=QUIET_DOWN_AFTER_MS)
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
    await recorded(envtest, namespace, "to-s3", "BackupStarted", "BackupSucceeded")
    job = envtest.http.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/to-s3-backup")
    assert job["metadata"]["ownerReferences"][0]["name"] == "to-s3"
    assert job["spec"]["backoffLimit"] == 1
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
    start_operator: OperatorFactory,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    # the store and the unreachable port are allowed; any other endpoint is refused (issue 24)
    await start_operator(s3_endpoint_allowlist=f"{object_store.endpoint},http://127.0.0.1:9")
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
    elsewhere = s3_destination(object_store, endpoint="http://127.0.0.2:9")
    elsewhere["s3"]["credentialsSecret"] = {"name": "good-creds"}
    cases = {
        "unknown-cluster": ("nope", good, "RedisCluster 'nope' not found"),
        "missing-bucket": ("ok", no_bucket, "bucket 'no-such-bucket' does not exist"),
        "wrong-credentials": ("ok", s3_destination(object_store), "rejected the credentials"),
        "unreachable": ("ok", unreachable, "cannot reach http://127.0.0.1:9"),
        "missing-claim": ("ok", {"pvc": {"claimName": "nope"}}, "PersistentVolumeClaim 'nope' not found"),
        "not-allowed": (
            "ok",
            elsewhere,
            "'http://127.0.0.2:9' is not among the S3 endpoints the operator allows",
        ),
    }
    for name, (cluster, destination, _) in cases.items():
        b.create(name, cluster, destination)
    for name, (_, _, why) in cases.items():
        status = await eventually(partial(b.finished, name), within=180, what=f"{name} done", interval=0.5)
        assert status["phase"] == "Failed", (name, status)
        assert why in status["message"], (name, status["message"])

        async def warned(n: str = name) -> bool:  # Events are written in the background
            return any(e["type"] == "Warning" for e in b.events(n))

        await eventually(warned, within=30, what=f"a Warning Event for {name}", interval=0.2)
    # unreachable: retried (bounded) before failing; the permanent ones failed on their first pod
    jobs = envtest.http.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    failures = {
        j["metadata"]["labels"]["redis.pyctrl.dev/backup"]: j["status"].get("failed", 0) for j in jobs
    }
    assert failures["unreachable"] == 2
    assert failures["missing-bucket"] == failures["wrong-credentials"] == 1
    assert not {"unknown-cluster", "missing-claim", "not-allowed"} & set(failures)  # refused before any Job
    assert await c.ready(2)
    listed = object_store.client().list_objects_v2(Bucket=BUCKET, Prefix=f"redis/{namespace}/")
    assert listed.get("KeyCount", 0) == 0


def condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)


async def backed_up(
    c: Cluster, b: Backups, store: ObjectStore, name: str, keys: int
) -> tuple[dict[str, str], dict[str, Any]]:
    """Load ``keys`` keys into the running cluster ``c`` and back it up to S3 as ``name``."""
    client = await c.redis(str(c.status()["currentMaster"]))
    data = await load_keys(client, keys)
    await client.aclose()
    create_s3_secret(c.envtest, c.namespace, store.access_key, store.secret_key)
    b.create(name, c.name, s3_destination(store))
    status = await eventually(lambda: b.finished(name), within=120, what=f"{name} finished", interval=0.5)
    assert status["phase"] == "Succeeded", status
    return data, status


async def seeded(c: Cluster, replicas: int, data: dict[str, str], backup: dict[str, Any]) -> None:
    """``c`` becomes Running, restored from ``backup``, with every key of ``data`` on every pod."""
    await eventually(partial(c.ready, replicas), within=180, what=f"{c.name} Running", interval=0.5)

    def restored_condition() -> dict[str, Any] | None:
        cond = condition(c.status(), "Restored")
        return cond if cond is not None and cond["status"] == "True" else None

    # Restored is judged from the status the reconcile read (the master recorded with a replica
    # Ready), so it turns True one reconcile after the status that first says Running
    restored = await eventually(restored_condition, within=60, what=f"{c.name} Restored", interval=0.5)
    assert "RedisBackup nightly" in restored["message"]
    assert backup["sha256"] in restored["message"]
    for pod in c.pods():  # the master was seeded; the replica synced from it
        client = await c.redis(pod)
        keys = list(data)
        values: list[Any] = []
        for start in range(0, len(keys), 10_000):
            values += await client.mget(keys[start : start + 10_000])
        assert await client.dbsize() == len(data)
        assert dict(zip(keys, values, strict=True)) == data, pod
        await client.aclose()


async def test_restores_from_one_source_seed_every_key_or_fail_on_a_corrupt_or_missing_backup(
    operator: RunningOperator,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    """One source cluster, two backups of it: ``nightly`` seeds a new cluster (and one with
    persistence); ``flipped``, corrupted in the store, and a backup that does not exist fail their
    restores and promote nothing. The four restores run at once."""
    src = cluster_factory("src")
    await running_cluster(src, replicas=1)
    b = Backups(envtest, namespace)
    data, backup = await backed_up(src, b, object_store, "nightly", 100_000)
    b.create("flipped", "src", s3_destination(object_store))
    flipped = await eventually(partial(b.finished, "flipped"), within=120, what="flipped done", interval=0.5)
    assert flipped["phase"] == "Succeeded", flipped
    key = str(flipped["location"]).removeprefix(f"s3://{BUCKET}/")
    body = bytearray(object_store.client().get_object(Bucket=BUCKET, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0x01  # one flipped bit, same size
    object_store.client().put_object(Bucket=BUCKET, Key=key, Body=bytes(body))

    dst = cluster_factory("dst")
    dst.create(replicas=2, downAfterMilliseconds=QUIET_DOWN_AFTER_MS, restoreFrom={"backupName": "nightly"})
    # with persistence Redis loads its AOF, not dump.rdb: the backup becomes the AOF's base
    aof = cluster_factory("aof")
    aof.create(
        replicas=1,
        enablePersistence=True,
        storageSize="256Mi",
        downAfterMilliseconds=QUIET_DOWN_AFTER_MS,
        restoreFrom={"backupName": "nightly"},
    )
    bad = cluster_factory("bad")
    bad.create(replicas=2, downAfterMilliseconds=QUIET_DOWN_AFTER_MS, restoreFrom={"backupName": "flipped"})
    missing = cluster_factory("missing")
    missing.create(replicas=2, restoreFrom={"backupName": "no-such-backup"})

    for c, replicas in ((dst, 2), (aof, 1)):
        await seeded(c, replicas, data, backup)
    client = await aof.redis(str(aof.status()["currentMaster"]))
    assert (await client.info("persistence"))["aof_enabled"] == 1  # it runs on the seeded AOF
    await client.aclose()
    cm = envtest.http.get(f"/api/v1/namespaces/{namespace}/configmaps/dst-restore")
    assert cm["data"] == {"done": "true"}  # pods created from now on sync instead of re-seeding
    await recorded(envtest, namespace, "dst", "Restored")

    # the corrupt and the missing backup: refused, nothing promoted
    async def failed(c: Cluster) -> dict[str, Any] | None:
        cond = condition(c.status(), "Restored")
        return cond if cond is not None and cond["reason"] == "RestoreFailed" else None

    corrupt = await eventually(lambda: failed(bad), within=120, what="bad: RestoreFailed", interval=0.5)
    assert "does not match" in corrupt["message"], corrupt
    gone = await eventually(lambda: failed(missing), within=60, what="missing: RestoreFailed", interval=0.5)
    assert "RedisBackup 'no-such-backup' not found" in gone["message"]
    assert bad.status().get("currentMaster") is None  # nothing promoted
    assert not [
        p
        for p in bad.pods().values()
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
    ]
    assert missing.status().get("currentMaster") is None
    sts = envtest.http.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets")["items"]
    assert "missing" not in {s["metadata"]["name"] for s in sts}  # no pod could start empty
    await recorded(envtest, namespace, "bad", "RestoreFailed")
    await recorded(envtest, namespace, "missing", "RestoreFailed")


async def test_a_schedule_keeps_the_newest_backups_in_the_store_and_as_objects(
    start_operator: OperatorFactory,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    await start_operator(min_backup_interval=15)  # the default minimum is 5 minutes
    create_s3_secret(envtest, namespace, object_store.access_key, object_store.secret_key)
    c = cluster_factory("sched")
    # every 15 s (croniter's seconds field) instead of every minute: four runs in about a minute
    await c.create_ready(
        1, backup={"schedule": "* * * * * */15", "keep": 2, "destination": s3_destination(object_store)}
    )
    b = Backups(envtest, namespace)
    seen: set[str] = set()

    async def four_runs_two_kept() -> list[dict[str, Any]] | None:
        items = envtest.http.get(f"{b.base}?labelSelector=redis.pyctrl.dev/cluster%3Dsched")["items"]
        seen.update(i["metadata"]["name"] for i in items)
        live = [i for i in items if not i["metadata"].get("deletionTimestamp")]
        done = [i for i in live if (i.get("status") or {}).get("phase") == "Succeeded"]
        if len(seen) < 4 or len(live) != 2 or len(done) != 2:
            return None
        listed = object_store.client().list_objects_v2(Bucket=BUCKET, Prefix=f"redis/{namespace}/")
        keys = {o["Key"] for o in listed.get("Contents", [])}
        return (
            live if keys == {i["status"]["location"].removeprefix(f"s3://{BUCKET}/") for i in live} else None
        )

    kept = await eventually(four_runs_two_kept, within=180, what="4 runs, the newest 2 kept", interval=0.5)
    names = sorted(seen)
    assert sorted(i["metadata"]["name"] for i in kept) == names[-len(kept) :]  # the newest two
    assert all(n.startswith("sched-") for n in names)

    # the freshness gauges of RedisClusterBackupTooOld: the newest success, twice the 15 s interval
    labels = {"namespace": namespace, "name": "sched"}
    newest = max(datetime.fromisoformat(i["status"]["completionTime"]).timestamp() for i in kept)

    def fresh() -> bool:
        value = registry.get_sample_value("rediscluster_backup_last_success_timestamp_seconds", labels)
        return value is not None and value >= newest  # a later run may have succeeded meanwhile

    await eventually(fresh, within=60, what="the last-success gauge at the newest backup", interval=0.5)
    assert registry.get_sample_value("rediscluster_backup_max_age_seconds", labels) == 30


async def test_schedules_are_bounded_one_under_the_minimum_refused_and_no_pile_up_without_a_master(
    start_operator: OperatorFactory,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    kubeconfig: Path,
) -> None:
    """Issue 24, test 5: a per-second schedule is refused at ``kubectl apply`` (the CRD's rule);
    one the CRD admits but whose runs come closer than ``--min-backup-interval`` makes no
    RedisBackup (Event InvalidSchedule naming the interval); on a cluster with no serving master,
    while the schedule comes due again and again, at most one scheduled RedisBackup exists (the
    runs due meanwhile are Events BackupSkipped)."""
    await start_operator(min_backup_interval=20)  # the tests' stand-in for the default 5 minutes
    destination = {"pvc": {"claimName": "backups"}}
    per_second = {
        "apiVersion": "redis.pyctrl.dev/v1alpha1",
        "kind": "RedisCluster",
        "metadata": {"name": "persecond", "namespace": namespace},
        "spec": {"replicas": 1, "backup": {"schedule": "* * * * * *", "destination": destination}},
    }
    applied = kubectl_run(envtest, kubeconfig, "apply", "-f", "-", stdin=json.dumps(per_second))
    assert applied.returncode != 0
    assert "spec.backup.schedule" in applied.stderr
    assert "a per-second schedule is refused" in applied.stderr

    create_claim(envtest, namespace, "backups")  # every input is there but a serving master
    nowhere = {"pyctrl.dev/no-such-node": "true"}  # no node has it: the pods stay Pending
    fast = cluster_factory("fast")  # every 10 s: admitted, but under the operator's 20 s
    fast.create(
        replicas=1, nodeSelector=nowhere, backup={"schedule": "* * * * * */10", "destination": destination}
    )
    stuck = cluster_factory("stuck")
    stuck.create(
        replicas=1, nodeSelector=nowhere, backup={"schedule": "* * * * * */20", "destination": destination}
    )
    b = Backups(envtest, namespace)

    def events(cluster: str, reason: str) -> list[dict[str, Any]]:
        items = envtest.http.get(f"/api/v1/namespaces/{namespace}/events")["items"]
        return [e for e in items if e["involvedObject"].get("name") == cluster and e["reason"] == reason]

    async def skipped_twice() -> list[dict[str, Any]] | None:
        found = events("stuck", "BackupSkipped")
        return found if len({e["message"] for e in found}) >= 2 else None  # two distinct due times

    skipped = await eventually(skipped_twice, within=180, what="two runs of 'stuck' skipped", interval=0.5)
    items = envtest.http.get(f"{b.base}?labelSelector=redis.pyctrl.dev/cluster%3Dstuck")["items"]
    assert len(items) == 1, [i["metadata"]["name"] for i in items]
    assert (items[0].get("status") or {}).get("phase") in (None, "Pending")
    for event in skipped:
        assert f"scheduled backup {items[0]['metadata']['name']} has not finished" in event["message"]
        assert event["message"].endswith("(at most one unfinished scheduled backup per cluster)")

    (refused,) = events("fast", "InvalidSchedule")
    assert refused["message"] == (
        "spec.backup.schedule '* * * * * */10' runs every 10 s at the closest: the operator's minimum "
        "backup interval is 20 s (--min-backup-interval)"
    )
    assert envtest.http.get(f"{b.base}?labelSelector=redis.pyctrl.dev/cluster%3Dfast")["items"] == []


async def test_deleting_a_cluster_takes_a_final_backup_and_a_failing_one_holds_until_skipped(
    operator: RunningOperator,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    create_s3_secret(envtest, namespace, object_store.access_key, object_store.secret_key)
    good = cluster_factory("good")
    down = cluster_factory("down")
    unreachable = s3_destination(object_store, endpoint="http://127.0.0.1:9")
    await asyncio.gather(
        good.create_ready(1, backup={"onDelete": True, "destination": s3_destination(object_store)}),
        down.create_ready(1, backup={"onDelete": True, "destination": unreachable}),
    )
    client = await good.redis(str(good.status()["currentMaster"]))
    await load_keys(client, 1000)
    await client.aclose()

    async def holds(c: Cluster) -> bool:
        return "redis.pyctrl.dev/final-backup" in c.get()["metadata"].get("finalizers", [])

    await eventually(lambda: holds(good), within=30, what="the final-backup finalizer", interval=0.2)
    await eventually(lambda: holds(down), within=30, what="the final-backup finalizer", interval=0.2)
    envtest.http.request("DELETE", f"{good.base}/good")
    envtest.http.request("DELETE", f"{down.base}/down")

    async def gone(c: Cluster) -> bool:
        try:
            c.get()
        except Exception as exc:
            return "404" in str(exc)
        return False

    await eventually(lambda: gone(good), within=120, what="good deleted", interval=0.2)
    key = f"redis/{namespace}/good-final.rdb"
    body = object_store.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()  # there already
    b = Backups(envtest, namespace)
    final = b.status("good-final")
    assert final["phase"] == "Succeeded"
    assert final["sha256"] == hashlib.sha256(body).hexdigest()

    async def failed_once() -> bool:
        return "FinalBackupFailed" in {e["reason"] for e in b.events("down")}

    await eventually(failed_once, within=150, what="FinalBackupFailed on down", interval=0.5)
    held = down.get()
    assert "redis.pyctrl.dev/final-backup" in held["metadata"]["finalizers"]  # still held
    final_condition = condition(held.get("status") or {}, "FinalBackup")
    assert final_condition is not None
    assert "cannot reach http://127.0.0.1:9" in final_condition["message"]
    envtest.http.request(
        "PATCH",
        f"{down.base}/down",
        {"metadata": {"annotations": {"redis.pyctrl.dev/skip-final-backup": "true"}}},
        content_type="application/merge-patch+json",
    )
    await eventually(lambda: gone(down), within=60, what="down deleted after the skip", interval=0.2)
    await recorded(envtest, namespace, "down", "FinalBackupSkipped")


def _die_with_parent() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def operator_subprocess(kubeconfig: Path, namespace: str, log: Path) -> subprocess.Popen[bytes]:
    """The operator as its own process (so it can be SIGKILLed), as the generated-role user."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "examples.rediscluster",
                f"--kubeconfig={kubeconfig}",
                f"--namespace={namespace}",
                "--metrics-bind-address=127.0.0.1:0",
                "--health-probe-bind-address=127.0.0.1:0",
            ],
            cwd=Path(__file__).resolve().parents[2],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - set before exec, no threads involved
        )


async def slow_backup(c: Cluster, store: ObjectStore, keys: int) -> Backups:
    """A running 1-replica cluster ``c`` holding ``keys`` keys whose snapshot takes 100 µs a key,
    and the RedisBackup of the same name to S3: its Job runs for seconds."""
    await c.create_ready(1, downAfterMilliseconds=QUIET_DOWN_AFTER_MS)
    client = await c.redis(str(c.status()["currentMaster"]))
    # a debugging knob tenants may not set through redisConfig (refused by the allowlist): the
    # test, holding the server, turns it on itself; it slows every snapshot of this process
    await client.config_set("rdb-key-save-delay", 100)
    await load_keys(client, keys)
    await client.aclose()
    create_s3_secret(c.envtest, c.namespace, store.access_key, store.secret_key)
    b = Backups(c.envtest, c.namespace)
    b.create(c.name, c.name, s3_destination(store))
    return b


async def test_an_operator_killed_while_a_backup_job_runs_completes_it_once_after_restart(
    operator_kubeconfig: Path,
    cluster_factory: Callable[[str], Cluster],
    namespace: str,
    object_store: ObjectStore,
    tmp_path: Path,
) -> None:
    procs = [operator_subprocess(operator_kubeconfig, namespace, tmp_path / "operator.log")]
    try:
        c = cluster_factory("slow")
        envtest = c.envtest
        b = await slow_backup(c, object_store, 60_000)
        pods = f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3Dslow-backup"

        async def job_pod_running() -> bool:
            items = envtest.http.get(pods)["items"]
            return any(p["status"].get("phase") == "Running" for p in items)

        await eventually(job_pod_running, within=60, what="the backup Job's pod running", interval=0.1)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        assert b.status("slow")["phase"] == "Running"
        procs.append(operator_subprocess(operator_kubeconfig, namespace, tmp_path / "operator.log"))
        status = await eventually(lambda: b.finished("slow"), within=120, what="slow finished", interval=0.5)
        assert status["phase"] == "Succeeded", status
        jobs = envtest.http.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
        assert [j["metadata"]["name"] for j in jobs] == ["slow-backup"]  # not started twice
        assert len(envtest.http.get(pods)["items"]) == 1  # one attempt, not retried
        listed = object_store.client().list_objects_v2(Bucket=BUCKET, Prefix=f"redis/{namespace}/")
        assert [o["Key"] for o in listed.get("Contents", [])] == [f"redis/{namespace}/slow.rdb"]
        body = (
            object_store.client().get_object(Bucket=BUCKET, Key=f"redis/{namespace}/slow.rdb")["Body"].read()
        )
        assert status["sha256"] == hashlib.sha256(body).hexdigest()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


def check_stored_per_shard(
    store: ObjectStore, folder: str, status: dict[str, Any], shards: list[dict[str, Any]]
) -> None:
    """The manifest and one RDB per shard in ``folder``, agreeing with ``status`` and the cluster's
    ``shards`` (each taken from its shard's replica)."""
    s3 = store.client()
    manifest_body = s3.get_object(Bucket=BUCKET, Key=f"{folder}/manifest.json")["Body"].read()
    assert status["location"] == f"s3://{BUCKET}/{folder}/manifest.json"
    assert status["sha256"] == hashlib.sha256(manifest_body).hexdigest()
    manifest = json.loads(manifest_body)
    total = 0
    for shard, backed, entry in zip(shards, status["shards"], manifest["shards"], strict=True):
        body = s3.get_object(Bucket=BUCKET, Key=f"{folder}/shard-{shard['index']}.rdb")["Body"].read()
        assert body.startswith(b"REDIS")
        digest = hashlib.sha256(body).hexdigest()
        assert backed["index"] == entry["shard"] == shard["index"]
        assert backed["sourcePod"] == shard["replicas"][0]  # from the shard's replica
        assert backed["slots"] == entry["slots"] == shard["slots"]
        assert (
            (backed["sizeBytes"], backed["sha256"])
            == (entry["sizeBytes"], entry["sha256"])
            == (len(body), digest)
        )
        total += len(body)
    assert status["sizeBytes"] == total


async def dbsize(c: Cluster, pod: str) -> int:
    client = await c.redis(pod)
    try:
        return int(await client.dbsize())
    finally:
        await client.aclose()


async def test_a_cluster_mode_backup_holds_one_rdb_per_shard_and_a_restore_gives_each_shard_its_keys(
    operator: RunningOperator,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    src = cluster_factory("sharded")
    src.create(mode="cluster", shards=3, replicasPerShard=1, downAfterMilliseconds=QUIET_DOWN_AFTER_MS)
    await eventually(lambda: cluster_ready(src, 3), within=150, what="3 shards Running", interval=0.3)
    await fill(src.pod_ip("sharded-0"), 3000, password=src.password())
    shards = src.status()["shards"]
    for shard in shards:  # each replica has its shard's keys before the snapshot
        client = await src.redis(shard["master"])
        try:
            assert await client.wait(1, 5000) == 1
        finally:
            await client.aclose()
    create_s3_secret(envtest, namespace, object_store.access_key, object_store.secret_key)
    b = Backups(envtest, namespace)
    b.create("per-shard", "sharded", s3_destination(object_store))
    status = await eventually(
        lambda: b.finished("per-shard"), within=180, what="per-shard finished", interval=0.5
    )
    assert status["phase"] == "Succeeded", status
    check_stored_per_shard(object_store, f"redis/{namespace}/per-shard", status, shards)
    # a restore into a cluster of another mode is refused with its reason; nothing starts
    wrong = cluster_factory("wrong")
    wrong.create(replicas=1, restoreFrom={"backupName": "per-shard"})
    # the restore: each shard's first pod seeded from its shard's RDB, the replica syncing from it
    dst = cluster_factory("copy")
    dst.create(
        mode="cluster",
        shards=3,
        replicasPerShard=1,
        downAfterMilliseconds=QUIET_DOWN_AFTER_MS,
        restoreFrom={"backupName": "per-shard"},
    )
    await eventually(
        lambda: cluster_ready(dst, 3), within=180, what="the restored shards Running", interval=0.5
    )

    async def restored() -> dict[str, Any] | None:
        cond = condition(dst.status(), "Restored")
        return cond if cond is not None and cond["status"] == "True" else None

    cond = await eventually(restored, within=60, what="Restored", interval=0.5)
    assert status["sha256"] in cond["message"]
    assert [s["slots"] for s in dst.status()["shards"]] == [s["slots"] for s in shards]  # each shard its own

    async def nodes_agree() -> bool:  # the seeded masters' claims spread by gossip
        try:
            assert_check_clean(await cluster_check(dst.pod_ip("copy-0"), password=dst.password()), masters=3)
        except AssertionError:
            return False
        return True

    await eventually(nodes_agree, within=60, what="redis-cli --cluster check clean", interval=1)
    assert await all_seeds_readable(dst.pod_ip("copy-0"), 3000, password=dst.password()) == []
    for before, after in zip(shards, dst.status()["shards"], strict=True):  # each shard its keys
        want = await dbsize(src, before["master"])
        assert want > 0
        for pod in (after["master"], *after["replicas"]):  # the replica synced from its seeded master
            assert await dbsize(dst, pod) == want, pod
    # deleting the RedisBackup removes every shard's RDB and the manifest from the store
    envtest.http.request("DELETE", f"{b.base}/per-shard")

    async def store_emptied() -> bool:
        listed = object_store.client().list_objects_v2(Bucket=BUCKET, Prefix="redis/")
        return not [o for o in listed.get("Contents", []) if o["Key"].startswith(f"redis/{namespace}/")]

    await eventually(store_emptied, within=90, what="the backup's objects deleted", interval=0.5)
    refused = condition(wrong.status(), "Restored")
    assert refused is not None
    assert refused["reason"] == "RestoreFailed"
    assert "holds one RDB per shard of 3 shards" in refused["message"]
    sts = envtest.http.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets")["items"]
    assert "wrong" not in {s["metadata"]["name"] for s in sts}


async def test_a_finished_backup_job_whose_pods_are_gone_fails_the_backup_instead_of_waiting_forever(
    start_operator: OperatorFactory,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    first = await start_operator()
    b = await slow_backup(cluster_factory("lost"), object_store, 40_000)
    job = f"/apis/batch/v1/namespaces/{namespace}/jobs/lost-backup"
    pods = f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3Dlost-backup"

    async def recorded_running() -> bool:
        return b.status("lost").get("phase") == "Running"

    await eventually(recorded_running, within=60, what="the backup Running", interval=0.2)
    await first.shutdown()  # nobody reads the Job's result now

    async def job_complete() -> bool:
        conditions = (envtest.http.get(job).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    await eventually(job_complete, within=120, what="the Job complete", interval=0.5)
    envtest.http.request("DELETE", pods)  # its pods go, and their termination message with them

    async def pods_gone() -> bool:
        return not envtest.http.get(pods)["items"]

    await eventually(pods_gone, within=60, what="the Job's pods gone", interval=0.2)
    await start_operator()
    status = await eventually(lambda: b.finished("lost"), within=60, what="lost finished", interval=0.5)
    assert status["phase"] == "Failed", status
    assert "completed but its pods are gone" in status["message"]
    await recorded(envtest, namespace, "lost", "BackupResultLost")
