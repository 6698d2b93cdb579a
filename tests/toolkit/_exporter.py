"""The real ``redis_exporter`` (``tools/redis_exporter/build.sh``) run as the sidecar would run it,
against real redis-servers on loopback, and its ``/metrics`` parsed.

``run_sidecar`` starts the binary with the container's own args and env from
``exporter_container`` (``$(VAR)`` references expanded as the kubelet does; ``secretKeyRef``s
resolved from a dict standing for the Secrets), so the flags and variables tested are the spec's.
The process gets ``PR_SET_PDEATHSIG`` and is stopped (and waited for) when the context exits.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from examples.rediscluster.shared.exporter import METRICS_PORT
from pyctrl.envtest import poll_until
from tests.install.conftest import built
from tests.rediscluster._servers import RedisServer, _die_with_parent, free_port

__all__ = ["Sample", "Sidecar", "exporter_binary", "replicate", "run_sidecar"]


def replicate(replica: RedisServer, master: RedisServer) -> None:
    """``REPLICAOF`` and wait until the master lists the replica online (with its offset)."""
    with replica.client() as c:
        c.replicaof(master.host, master.port)

    def online() -> bool:
        with master.client() as c:
            return bool(c.info("replication").get("slave0", {}).get("state") == "online")

    poll_until(f"{replica.name} online at {master.name}", online, 30)


def exporter_binary() -> str:
    return built("redis_exporter")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Sidecar:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def scrape(self) -> list[Sample]:
        with urllib.request.urlopen(self.url, timeout=20) as answer:
            text = answer.read().decode()
        return [
            Sample(s.name, dict(s.labels), s.value)
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]

    def value(self, name: str, **labels: str) -> float | None:
        """The value of the one sample ``name`` with these labels (None when absent)."""
        found = [s.value for s in self.scrape() if s.name == name and labels.items() <= s.labels.items()]
        assert len(found) <= 1, f"{name}{labels}: {found}"
        return found[0] if found else None


def _expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion of env values and args (unknown references stay)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), value)


def _resolve_env(
    container: dict[str, Any], fields: Mapping[str, str], secrets: Mapping[tuple[str, str], str]
) -> dict[str, str]:
    env: dict[str, str] = {}
    for var in container.get("env", []):
        source = var.get("valueFrom")
        if source is None:
            env[var["name"]] = _expand(var["value"], env)
        elif "fieldRef" in source:
            env[var["name"]] = fields[source["fieldRef"]["fieldPath"]]
        else:
            ref = source["secretKeyRef"]
            env[var["name"]] = secrets[(ref["name"], ref["key"])]
    return env


@contextlib.contextmanager
def run_sidecar(
    container: dict[str, Any],
    *,
    log_dir: Path,
    secrets: Mapping[tuple[str, str], str] = {},
    address: str | None = None,
    paths: Mapping[str, str] = {},
) -> Iterator[Sidecar]:
    """Run the container's exporter on 127.0.0.1 (its ``POD_IP``), on a free port.

    ``address`` replaces ``REDIS_ADDR`` (the test's server, when the spec's names a pod's DNS
    name); ``paths`` maps in-pod paths (mounted volumes) to local ones in args."""
    port = free_port()
    fields = {"status.podIP": "127.0.0.1", "metadata.name": "rc-0"}
    env = _resolve_env(container, fields, secrets)
    if address is not None:
        env["REDIS_ADDR"] = address
    args = [_expand(a, env) for a in container["args"]]
    args = [a.replace(f"127.0.0.1:{METRICS_PORT}", f"127.0.0.1:{port}") for a in args]  # a free port
    for inside, outside in paths.items():
        args = [a.replace(inside, outside) for a in args]
    assert f"--web.listen-address=127.0.0.1:{port}" in args, args
    log = log_dir / "redis_exporter.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [exporter_binary(), *args],
            env=env,  # nothing else: the exporter sees only the container's variables
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads touch this before exec
        )
    sidecar = Sidecar(f"http://127.0.0.1:{port}/metrics", proc, log)
    try:

        def serving() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"redis_exporter exited {proc.returncode}: {log.read_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    return True
            except (urllib.error.URLError, ConnectionError):
                return False

        poll_until("redis_exporter to serve /health", serving, 30, interval=0.05)
        yield sidecar
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
