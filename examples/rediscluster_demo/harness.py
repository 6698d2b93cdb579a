"""The pieces of the demos: the local control plane's kubectl, waits that say what they wait for,
the operator as its own process (stopped on exit, on Ctrl-C and on failure)."""

from __future__ import annotations

import base64
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

from pyctrl.envtest import Environment
from pyctrl.envtest._process import free_port

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "rediscluster" / "samples" / "rediscluster.yaml"


def say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


class Demo:
    def __init__(self, env: Environment) -> None:
        self.env = env
        assert env.bin_dir is not None
        self.kubectl_bin = str(env.bin_dir / "kubectl")
        self._passwords: dict[str, str] = {}

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

    def password(self, cluster: str) -> str:
        """The generated password of the RedisCluster ``cluster`` (auth is on by default), read
        from its Secret ``<cluster>-auth`` as any client would (once per cluster)."""
        if cluster not in self._passwords:
            data = self.kubectl("get", "secret", f"{cluster}-auth", "-o", "jsonpath={.data.password}")
            self._passwords[cluster] = base64.b64decode(data).decode()
        return self._passwords[cluster]

    def redis_cli(self, ip: str, *args: str, cluster: str = "demo") -> str:
        """redis-cli against ``ip``, logged in with ``cluster``'s password (REDISCLI_AUTH: no argv)."""
        env = {**os.environ, "REDISCLI_AUTH": self.password(cluster)}
        out = subprocess.run(
            ["redis-cli", "-h", ip, *args], capture_output=True, text=True, timeout=10, check=False, env=env
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
                "--no-metrics-secure",  # plain HTTP on loopback: read here without a token
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
