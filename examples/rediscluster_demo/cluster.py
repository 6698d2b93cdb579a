"""``python -m examples.rediscluster_demo --mode cluster``: a sharded cluster forming, resharding
(3 -> 4 shards) and failing a shard over, on the local embedded cluster; every process started is
stopped on exit, on Ctrl-C and on failure (the control plane and operator of ``demo``)."""

from __future__ import annotations

import json
import time

from examples.rediscluster_demo.harness import ROOT, Demo, operator_process, say
from pyctrl.envtest import Environment
from pyctrl.envtest._process import free_port

__all__ = ["run_cluster"]

MANIFEST = {
    "apiVersion": "redis.pyctrl.dev/v1alpha1",
    "kind": "RedisCluster",
    "metadata": {"name": "demo", "namespace": "default"},
    "spec": {"mode": "cluster", "shards": 3, "replicasPerShard": 1, "downAfterMilliseconds": 2000},
}


def _progress(demo: Demo, shards: int) -> str | None:
    s = demo.cluster().get("status") or {}
    if (
        s.get("phase") == "Running"
        and len(s.get("shards") or []) == shards
        and s.get("slotsOk") == 16384
        and not s.get("resharding")
    ):
        return None
    moving = f", {s.get('resharding')}: {s.get('slotsToMove')} slots to move" if s.get("resharding") else ""
    state = f"phase={s.get('phase', 'Pending')}, clusterState={s.get('clusterState')}"
    return f"{state}, slotsOk={s.get('slotsOk')}{moving}"


def _show(demo: Demo) -> None:
    print(demo.kubectl("get", "rediscluster", "-o", "wide"), flush=True)
    print(
        demo.kubectl(
            "get", "pods", "-o", "wide", "-L", "redis.pyctrl.dev/role", "-L", "redis.pyctrl.dev/shard"
        ),
        flush=True,
    )
    for shard in (demo.cluster().get("status") or {}).get("shards") or []:
        index, master, replicas = shard["index"], shard.get("master"), shard.get("replicas", [])
        say(f"shard {index}: master {master}, replicas {replicas}, slots {shard.get('slots', [])}")


def run_cluster(keep: bool) -> int:
    say("starting the local control plane: etcd, kube-apiserver, kube-controller-manager and a local node")
    with Environment(crd_directory_paths=[ROOT / "crds"]) as env:
        demo = Demo(env)
        log_path = env.log_dir / "operator.log"
        metrics_port = free_port()
        with operator_process(env, log_path, metrics_port) as op:
            say(f"operator running (pid {op.pid}); its log: {log_path}")
            demo.kubectl("apply", "-f", "-", stdin=json.dumps(MANIFEST))
            say("applied a RedisCluster with mode: cluster, 3 shards, 1 replica per shard")
            demo.wait("3 shards to serve every slot", lambda: _progress(demo, 3), 240)
            _show(demo)
            ip = demo.pod_ip("demo-0")
            for i in range(200):
                demo.redis_cli(ip, "-c", "SET", f"key{i}", str(i))
            say("wrote 200 keys through redis-cli -c (it follows MOVED)")
            check = demo.redis_cli(ip, "--cluster", "check", f"{ip}:6379")
            print(
                "\n".join(line for line in check.splitlines() if "keys |" in line or "[OK]" in line),
                flush=True,
            )
            say("resharding: spec.shards 3 -> 4")
            demo.kubectl("patch", "rediscluster", "demo", "--type=merge", "-p", '{"spec":{"shards":4}}')
            demo.wait("4 balanced shards", lambda: _progress(demo, 4), 600)
            _show(demo)
            victim = demo.cluster()["status"]["shards"][1]["master"]
            say(f"crashing shard 1's master {victim}: redis-cli SHUTDOWN NOSAVE")
            start = time.monotonic()
            demo.redis_cli(demo.pod_ip(victim), "SHUTDOWN", "NOSAVE")

            def failed_over() -> str | None:
                shard = demo.cluster()["status"]["shards"][1]
                master = shard.get("master")  # absent while nobody serves the shard
                if master not in (None, victim) and shard.get("ready") and _progress(demo, 4) is None:
                    return None
                return f"shard 1 master={master or '-'}, ready={shard.get('ready')}"

            demo.wait("shard 1 to fail over", failed_over, 180)
            took = time.monotonic() - start
            say(f"shard 1 served by {demo.cluster()['status']['shards'][1].get('master')} after {took:.1f}s")
            _show(demo)
            missing = [i for i in range(200) if demo.redis_cli(ip, "-c", "GET", f"key{i}") != str(i)]
            say(f"keys readable after resharding and failover: {200 - len(missing)}/200")
            demo.show_events_and_metrics(metrics_port)
            if keep:
                demo.keep_running(op)
        say("stopping the operator and the control plane")
    say("done: every process stopped")
    return 0
