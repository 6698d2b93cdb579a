"""``make demo``: the RedisCluster operator on a local embedded cluster, end to end.

Starts the local control plane with its node (building the binaries first if needed), runs the
operator as its own process, applies ``samples/rediscluster.yaml``, waits until the cluster is
Ready (saying what it waits for), shows it, crashes the master and shows the new one, then stops
everything. ``--nodes 3 --lose-node`` runs three nodes (the pods spread one per node) and, instead
of crashing the master's redis-server, powers the master's whole node off, shows the failover,
then boots the node again and shows its pod back as a replica. ``--keep`` leaves it all running
until Ctrl-C instead. Every process started here is stopped on exit, on Ctrl-C and on failure.
``--backup`` shows a backup to S3 and a restore instead (``examples/rediscluster_demo/backup.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from examples.rediscluster_demo.harness import ROOT, SAMPLE, Demo, operator_process, say
from pyctrl.envtest import Environment, EnvtestError
from pyctrl.envtest._process import free_port


def run(keep: bool, nodes: int = 1, lose_node: bool = False) -> int:
    say(
        "starting the local control plane: etcd, kube-apiserver, kube-controller-manager, "
        f"kube-scheduler and {nodes} local node(s)"
    )
    with Environment(crd_directory_paths=[ROOT / "crds"], nodes=nodes) as env:
        say(f"control plane up at {env.server_url}; kubeconfig {env.kubeconfig_path}")
        demo = Demo(env)
        log_path = env.log_dir / "operator.log"
        metrics_port = free_port()
        with operator_process(env, log_path, metrics_port) as op:
            say(f"operator running (pid {op.pid}); its log: {log_path}")
            demo.kubectl("apply", "-f", str(SAMPLE))
            say(f"applied {SAMPLE.relative_to(ROOT)}")
            demo.wait("RedisCluster demo to become Ready", demo.ready_progress, 180)
            demo.show()
            master = demo.cluster()["status"]["currentMaster"]
            ip = demo.pod_ip(master)
            demo.redis_cli(ip, "SET", "greeting", "hello from the old master")
            acked = demo.redis_cli(ip, "WAIT", "1", "2000")
            say(f"wrote greeting on {master} ({ip}); acknowledged by {acked} replica(s)")
            epoch = demo.cluster()["status"]["masterEpoch"]
            start = time.monotonic()
            node = demo.break_master(master, ip, lose_node)

            def failed_over() -> str | None:
                status = demo.cluster().get("status") or {}
                if status.get("masterEpoch", 0) > epoch and status.get("currentMaster") != master:
                    return None
                return f"phase={status.get('phase')}, master={status.get('currentMaster')}"

            demo.wait("a new master", failed_over, 120)
            new = demo.cluster()["status"]["currentMaster"]
            say(f"new master {new} after {time.monotonic() - start:.1f}s")
            if node is not None:
                demo.wait(
                    f"kube-controller-manager to mark {node} NotReady", lambda: demo.node_ready(node), 120
                )
                print(demo.kubectl("get", "nodes"), flush=True)
                demo.show()
                say(f"booting {node} again")
                env.start_node(node)
            demo.wait("the cluster to be Running again", demo.ready_progress, 180)
            demo.show()
            value = demo.redis_cli(demo.pod_ip(new), "GET", "greeting")
            say(f"greeting on the new master: {value!r}")
            demo.show_events_and_metrics(metrics_port)
            if keep:
                demo.keep_running(op)
            if op.poll() is not None and not keep:
                say(f"the operator exited early with code {op.returncode}; see {log_path}")
                return 1
        say("stopping the operator and the control plane")
    say("done: every process stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.rediscluster_demo", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--keep", action="store_true", help="keep everything running until Ctrl-C")
    parser.add_argument(
        "--backup", action="store_true", help="show a backup to S3 and a restore instead of a failover"
    )
    parser.add_argument(
        "--mode",
        choices=("replication", "cluster"),
        default="replication",
        help="the RedisCluster spec.mode to show",
    )
    parser.add_argument("--nodes", type=int, default=1, help="local nodes (default 1)")
    parser.add_argument(
        "--lose-node", action="store_true", help="power the master's node off instead of crashing its Redis"
    )
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    if args.lose_node and args.nodes < 2:
        parser.error("--lose-node needs --nodes 2 or more (the pods must have somewhere to go)")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    try:
        if args.backup:
            from examples.rediscluster_demo.backup import run_backup_demo

            return run_backup_demo(args.keep)
        if args.mode == "cluster":
            from examples.rediscluster_demo.cluster import run_cluster

            return run_cluster(args.keep)
        return run(args.keep, args.nodes, args.lose_node)
    except (RuntimeError, TimeoutError, EnvtestError) as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
