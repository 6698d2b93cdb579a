"""``make demo``: the RedisCluster operator on a local embedded cluster, end to end.

Starts the local control plane with its node (building the binaries first if needed), runs the
operator as its own process, applies ``samples/rediscluster.yaml``, waits until the cluster is
Ready (saying what it waits for), shows it, crashes the master and shows the new one, then stops
everything. ``--nodes 3 --lose-node`` runs three nodes (the pods spread one per node) and, instead
of crashing the master's redis-server, powers the master's whole node off, shows the failover,
then boots the node again and shows its pod back as a replica. ``--keep`` leaves it all running
until Ctrl-C instead. Every process started here is stopped on exit, on Ctrl-C and on failure.
``--backup`` shows a backup to S3 and a restore instead (``examples/rediscluster/backup/demo.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyctrl.envtest import Environment, EnvtestError
from pyctrl.envtest._process import free_port

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).parent / "samples" / "rediscluster.yaml"


def say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


class Demo:
    def __init__(self, env: Environment) -> None:
        self.env = env
        assert env.bin_dir is not None
        self.kubectl_bin = str(env.bin_dir / "kubectl")

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        out = subprocess.run(
            [self.kubectl_bin, f"--kubeconfig={self.env.kubeconfig_path}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def cluster(self) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", "rediscluster", "demo", "-o", "json")))

    def wait(self, what: str, check: Callable[[], str | None], timeout: float) -> None:
        """Poll ``check`` (None when done, else a progress line) until done; print changes."""
        deadline, last = time.monotonic() + timeout, ""
        while (progress := check()) is not None:
            if progress != last:
                say(f"waiting for {what}: {progress}")
                last = progress
            if time.monotonic() > deadline:
                raise TimeoutError(f"gave up waiting for {what} after {timeout:.0f}s (last: {progress})")
            time.sleep(0.5)

    def ready_progress(self) -> str | None:
        status = self.cluster().get("status") or {}
        ready, phase = status.get("readyReplicas", 0), status.get("phase", "Pending")
        if phase == "Running":
            return None
        return f"phase={phase}, ready replicas {ready}/3, master={status.get('currentMaster') or '-'}"

    def show(self) -> None:
        print(self.kubectl("get", "rediscluster", "-o", "wide"), flush=True)
        print(self.kubectl("get", "pods", "-o", "wide", "-L", "redis.pyctrl.dev/role"), flush=True)

    def pod_ip(self, pod: str) -> str:
        return self.kubectl("get", "pod", pod, "-o", "jsonpath={.status.podIP}").strip()

    def node_ready(self, node: str) -> str | None:
        """None once the node's Ready condition is no longer True, else its status."""
        jsonpath = '{.status.conditions[?(@.type=="Ready")].status}'
        ready = self.kubectl("get", "node", node, "-o", f"jsonpath={jsonpath}").strip()
        return f"Ready={ready}" if ready == "True" else None

    def break_master(self, master: str, ip: str, lose_node: bool) -> str | None:
        """Crash the master's Redis, or power its node off (then return the node's name)."""
        if not lose_node:
            say(f"crashing the master {master}: redis-cli SHUTDOWN NOSAVE")
            self.redis_cli(ip, "SHUTDOWN", "NOSAVE")
            return None
        node = self.kubectl("get", "pod", master, "-o", "jsonpath={.spec.nodeName}").strip()
        say(f"powering off {node}, the master's node: its node process and containers SIGKILLed")
        self.env.stop_node(node)
        return node

    def redis_cli(self, ip: str, *args: str) -> str:
        out = subprocess.run(
            ["redis-cli", "-h", ip, *args], capture_output=True, text=True, timeout=10, check=False
        )
        return out.stdout.strip()

    def show_events_and_metrics(self, metrics_port: int) -> None:
        """The RedisClusters' Events, then the operator's rediscluster_* metrics."""
        events = self.kubectl("get", "events", "--field-selector", "involvedObject.kind=RedisCluster")
        print(events, flush=True)
        say(f"the operator's metrics (http://127.0.0.1:{metrics_port}/metrics):")
        print(operator_metrics(metrics_port), flush=True)

    def keep_running(self, op: subprocess.Popen[bytes]) -> None:
        """``--keep``: wait for Ctrl-C (or the operator's exit), saying how to reach the cluster."""
        say(f"kept running; export KUBECONFIG={self.env.kubeconfig_path}; Ctrl-C stops everything")
        with contextlib.suppress(KeyboardInterrupt):
            op.wait()


@contextlib.contextmanager
def operator_process(env: Environment, log_path: Path, metrics: int = 0) -> Iterator[subprocess.Popen[bytes]]:
    """The operator as its own process; ``metrics`` is its metrics port (0: any free one)."""
    probe = free_port(avoid={metrics})
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "examples.rediscluster",
                f"--kubeconfig={env.kubeconfig_path}",
                f"--metrics-bind-address=127.0.0.1:{metrics}",
                f"--health-probe-bind-address=127.0.0.1:{probe}",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=35)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def operator_metrics(port: int) -> str:
    """The rediscluster_* samples, without HELP/TYPE lines and the phases that are not current."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()

    def shown(line: str) -> bool:
        if line.startswith("rediscluster_phase"):
            return not line.endswith(" 0.0")
        return line.startswith("rediscluster_") and not line.startswith("rediscluster_failovers_created")

    return "\n".join(line for line in text.splitlines() if shown(line))


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
        prog="python -m examples.rediscluster.demo", description=__doc__.splitlines()[0]
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
            from examples.rediscluster.backup.demo import run_backup_demo

            return run_backup_demo(args.keep)
        if args.mode == "cluster":
            from examples.rediscluster.cluster.demo import run_cluster  # imports this module

            return run_cluster(args.keep)
        return run(args.keep, args.nodes, args.lose_node)
    except (RuntimeError, TimeoutError, EnvtestError) as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
