"""``python -m examples.rediscluster_demo --backup``: a backup to S3 and a restore, with kubectl.

Starts the local control plane with its node, a real S3-compatible store on loopback (versitygw,
``pyctrl.envtest.objectstore``) and the operator as its own process; applies a RedisCluster,
writes keys, ``kubectl apply``s a RedisBackup to the store and shows it Succeeded, then a new
RedisCluster with ``restoreFrom`` and the keys read back from it. The source cluster also archives
its append-only file continuously (``spec.backup.archive``): a key deleted by mistake after a
second T is brought back by a third RedisCluster restored to T (``restoreFrom.pointInTime``).
Every process started is stopped on exit, on Ctrl-C and on failure (``--keep``: left running until Ctrl-C).
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyctrl.envtest import Environment
from pyctrl.envtest.objectstore import ObjectStore

__all__ = ["run_backup_demo"]


def _manifests(store: ObjectStore) -> dict[str, str]:
    s3 = {
        "endpoint": store.endpoint,
        "bucket": "backups",
        "prefix": "redis/",
        "credentialsSecret": {"name": "s3-creds"},
    }
    docs = {
        "source": {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisCluster",
            "metadata": {"name": "shop"},
            "spec": {
                "replicas": 2,
                "enablePersistence": True,
                "storageSize": "256Mi",
                "backup": {"destination": {"s3": s3}, "archive": {"archiveTimeoutSeconds": 5}},
            },
        },
        "backup": {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisBackup",
            "metadata": {"name": "shop-manual"},
            "spec": {"clusterName": "shop", "destination": {"s3": s3}},
        },
        "restored": {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisCluster",
            "metadata": {"name": "shop-copy"},
            "spec": {"replicas": 2, "restoreFrom": {"backupName": "shop-manual"}},
        },
    }
    return {k: json.dumps(v) for k, v in docs.items()}


def _pitr_manifest(store: ObjectStore, target: str) -> str:
    s3 = {
        "endpoint": store.endpoint,
        "bucket": "backups",
        "prefix": "redis/",
        "credentialsSecret": {"name": "s3-creds"},
    }
    return json.dumps(
        {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisCluster",
            "metadata": {"name": "shop-at-t"},
            "spec": {
                "replicas": 1,
                "enablePersistence": True,
                "storageSize": "256Mi",
                "restoreFrom": {"pointInTime": target, "archive": {"clusterName": "shop", "s3": s3}},
            },
        }
    )


def run_backup_demo(keep: bool) -> int:
    from examples.rediscluster_demo.harness import ROOT, Demo, operator_process, say

    say("starting the local control plane, its node and an S3 store (versitygw) on loopback")
    with (
        Environment(crd_directory_paths=[ROOT / "crds"]) as env,
        ObjectStore(Path(tempfile.mkdtemp(prefix="demo-s3-"))) as store,
    ):
        store.create_bucket("backups")
        say(f"S3 store at {store.endpoint}, bucket 'backups'")
        demo = Demo(env)
        log_path = env.log_dir / "operator.log"
        with operator_process(env, log_path) as op:
            say(f"operator running (pid {op.pid}); its log: {log_path}")
            # the keys go by stdin into a Secret: never on a command line
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s3-creds", "namespace": "default"},
                "stringData": {
                    "AWS_ACCESS_KEY_ID": store.access_key,
                    "AWS_SECRET_ACCESS_KEY": store.secret_key,
                },
            }
            demo.kubectl("apply", "-f", "-", stdin=json.dumps(secret))
            docs = _manifests(store)
            demo.kubectl("apply", "-f", "-", stdin=docs["source"])

            def running(name: str) -> str | None:
                status = json.loads(demo.kubectl("get", "rdc", name, "-o", "json")).get("status") or {}
                return None if status.get("phase") == "Running" else f"phase={status.get('phase', 'Pending')}"

            demo.wait("RedisCluster shop Running", lambda: running("shop"), 180)
            master = json.loads(demo.kubectl("get", "rdc", "shop", "-o", "json"))["status"]["currentMaster"]
            ip = demo.pod_ip(master)
            for i in range(5):
                demo.redis_cli(ip, "SET", f"order:{i}", f"paid-{i}", cluster="shop")
            demo.redis_cli(ip, "WAIT", "1", "2000", cluster="shop")
            say(f"wrote order:0..4 on {master}; kubectl apply -f redisbackup.yaml (to S3)")
            demo.kubectl("apply", "-f", "-", stdin=docs["backup"])

            def backed_up() -> str | None:
                status = (
                    json.loads(demo.kubectl("get", "rdb", "shop-manual", "-o", "json")).get("status") or {}
                )
                phase = status.get("phase", "Pending")
                if phase == "Failed":
                    raise RuntimeError(f"backup failed: {status.get('message')}")
                return None if phase == "Succeeded" else f"phase={phase}"

            demo.wait("RedisBackup shop-manual Succeeded", backed_up, 180)
            print(demo.kubectl("get", "rdb", "-o", "wide"), flush=True)
            say("kubectl apply -f restored.yaml (spec.restoreFrom: {backupName: shop-manual})")
            demo.kubectl("apply", "-f", "-", stdin=docs["restored"])
            demo.wait("RedisCluster shop-copy Running", lambda: running("shop-copy"), 240)

            def restored_condition() -> dict[str, Any]:
                status = json.loads(demo.kubectl("get", "rdc", "shop-copy", "-o", "json")).get("status") or {}
                return next((c for c in status.get("conditions", []) if c["type"] == "Restored"), {})

            def seeded() -> str | None:
                cond = restored_condition()
                return None if cond.get("status") == "True" else f"Restored={cond.get('status')}"

            demo.wait("condition Restored=True on shop-copy", seeded, 60)
            copy = json.loads(demo.kubectl("get", "rdc", "shop-copy", "-o", "json"))
            restored = restored_condition()
            say(f"condition Restored={restored['status']}: {restored['message']}")
            new_ip = demo.pod_ip(copy["status"]["currentMaster"])
            value = demo.redis_cli(new_ip, "GET", "order:3", cluster="shop-copy")
            say(f"order:3 on the restored cluster: {value!r}")
            print(demo.kubectl("get", "rdc", "-o", "wide"), flush=True)
            _point_in_time(demo, store, ip)
            if keep:
                demo.keep_running(op)
        say("stopping the operator, the store and the control plane")
    say("done: every process stopped")
    return 0


def _point_in_time(demo: Any, store: ObjectStore, ip: str) -> None:
    """Delete a key by mistake after T, then restore a new cluster to T: the key is back."""
    from examples.rediscluster_demo.harness import say

    def archive() -> dict[str, Any]:
        return dict(
            json.loads(demo.kubectl("get", "rdc", "shop", "-o", "json"))["status"].get("archive") or {}
        )

    def archived_past(moment: float) -> Any:
        def check() -> str | None:
            last = archive().get("lastArchivedTime")
            if last and datetime.fromisoformat(last.replace("Z", "+00:00")).timestamp() > moment:
                return None
            return f"lastArchivedTime={last}"

        return check

    demo.wait("the archive of shop past now", archived_past(time.time()), 120)
    target = datetime.fromtimestamp(int(time.time()), UTC)
    t_text = target.strftime("%Y-%m-%dT%H:%M:%SZ")
    demo.wait(
        "the clock past T + 1", lambda: None if time.time() >= target.timestamp() + 2 else "waiting", 10
    )
    demo.redis_cli(ip, "DEL", "order:3")
    say(f"status.archive of shop: {json.dumps(archive())}")
    say(f"T = {t_text}; then DEL order:3 on shop (the mistake)")
    demo.wait("the archive of shop past the DEL", archived_past(time.time()), 120)
    say(
        "kubectl apply -f shop-at-t.yaml "
        f"(spec.restoreFrom: {{pointInTime: {t_text}, archive: {{clusterName: shop}}}})"
    )
    demo.kubectl("apply", "-f", "-", stdin=_pitr_manifest(store, t_text))

    def running() -> str | None:
        status = json.loads(demo.kubectl("get", "rdc", "shop-at-t", "-o", "json")).get("status") or {}
        return None if status.get("phase") == "Running" else f"phase={status.get('phase', 'Pending')}"

    demo.wait("RedisCluster shop-at-t Running", running, 240)

    def restored() -> dict[str, Any]:
        status = json.loads(demo.kubectl("get", "rdc", "shop-at-t", "-o", "json")).get("status") or {}
        return next((c for c in status.get("conditions", []) if c["type"] == "Restored"), {})

    demo.wait(
        "condition Restored=True on shop-at-t",
        lambda: None if restored().get("status") == "True" else f"Restored={restored().get('reason')}",
        60,
    )
    say(f"condition Restored=True: {restored()['message']}")
    status = json.loads(demo.kubectl("get", "rdc", "shop-at-t", "-o", "json"))["status"]
    new_ip = demo.pod_ip(status["currentMaster"])
    say(f"order:3 on shop: {demo.redis_cli(ip, 'GET', 'order:3')!r}")
    say(f"order:3 on shop-at-t (restored to {t_text}): {demo.redis_cli(new_ip, 'GET', 'order:3')!r}")
