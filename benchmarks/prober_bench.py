"""The health prober's cost per probed pod: a fresh connection per probe against kept ones.

``python -m benchmarks.prober_bench [--pods 40] [--seconds 30] [--rounds 3]`` starts ``--pods``
redis-servers on loopback with a password (as the operator's pods have: each new connection pays
the TCP handshake, ``AUTH`` and a close), registers them with one
:class:`~examples.rediscluster.replication.prober.HealthProber` as clusters of 2 pods, and
measures this process's CPU time over ``--seconds`` of probing at the operator's interval (0.5 s),
alternately with ``max_kept=0`` (every probe opens its own connection: the prober before kept
connections) and the default (one kept connection per pod), ``--rounds`` times each, alternating
so the machine's noise hits both alike. It also counts the connections the servers accepted
(INFO ``total_connections_received``) and the pods not answering at the end of each window.

Printed: CPU milliseconds per pod per minute, per probe (PINGs counted by the servers' INFO
commandstats: on a loaded machine the prober falls behind its interval, and fresh connections
the more, so per minute understates their cost) and connections per pod per minute for each,
medians over the rounds, and ``RATIO prober_cpu_kept_vs_fresh`` and
``RATIO prober_cpu_per_probe_kept_vs_fresh`` (kept over fresh; lower is better).
Figures are printed, never asserted. Every redis-server started is stopped on any exit (Ctrl-C
included: each runs in its own session and dies with this process).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

from benchmarks import _procs
from examples.rediscluster.replication.prober import HealthProber
from examples.rediscluster.shared.redis_admin import RedisConnection
from pyctrl.envtest._process import free_port

REPO = Path(__file__).resolve().parents[1]
INTERVAL = 0.5  # the operator's probe interval


def start_servers(n: int, password: str, base: Path) -> tuple[list[_procs.Child], list[int]]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found: apt-get install -y redis-server")
    children, ports = [], []
    for i in range(n):
        port = free_port()
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--requirepass", password, "--dir", str(base)]
        children.append(_procs.start(f"redis-{i}", argv, base / f"redis-{i}.log", cwd=base))
        ports.append(port)
    return children, ports


def wait_ready(ports: list[int], password: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    for port in ports:
        while True:
            try:
                with redis.Redis(port=port, password=password, socket_timeout=2) as c:
                    c.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # poll interval until the server answers


def counters(ports: list[int], password: str) -> tuple[int, int]:
    """(connections accepted, PINGs answered) by the servers so far (this check's connection
    included)."""
    conns = pings = 0
    for port in ports:
        with redis.Redis(port=port, password=password, socket_timeout=5) as c:
            conns += int(c.info("stats")["total_connections_received"])
            pings += int(c.info("commandstats").get("cmdstat_ping", {}).get("calls", 0))
    return conns, pings


async def window(
    ports: list[int], password: str, max_kept: int, seconds: float
) -> tuple[float, float, float, int]:
    """(CPU ms per pod per minute, CPU ms per probe, connections per pod per minute, pods not
    answering at the end)."""
    prober = HealthProber(lambda _: None, interval=INTERVAL, max_kept=max_kept)
    keys = []
    for i in range(0, len(ports) - 1, 2):
        key = ("bench", f"cluster-{i // 2}")
        endpoints = {f"pod-{j}": RedisConnection("127.0.0.1", ports[j], password) for j in (i, i + 1)}
        prober.watch(key, endpoints, master=f"pod-{i}", down_after=5.0)
        keys.append((key, list(endpoints)))
    await prober.start()
    try:
        await asyncio.sleep(2 * INTERVAL)  # warm-up: kept connections open
        conns0, pings0 = await asyncio.to_thread(counters, ports, password)
        cpu0, t0 = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)  # the measured window
        cpu, span = time.process_time() - cpu0, time.monotonic() - t0
        conns1, pings1 = await asyncio.to_thread(counters, ports, password)
        conns, pings = conns1 - conns0 - len(ports), pings1 - pings0  # less the check's connections
        failing = sum(prober.unhealthy_for(key, pod) > 0 for key, pods in keys for pod in pods)
    finally:
        await prober.stop()
    pods = 2 * len(keys)
    return cpu * 1000 / pods / span * 60, cpu * 1000 / max(pings, 1), conns / pods / span * 60, failing


async def run(args: argparse.Namespace, ports: list[int], password: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"fresh": [], "kept": [], "fresh per probe": [], "kept per probe": []}
    for r in range(args.rounds):
        for name, max_kept in (
            (("fresh", 0), ("kept", 1024)) if r % 2 == 0 else (("kept", 1024), ("fresh", 0))
        ):
            cpu, per_probe, conns, failing = await window(ports, password, max_kept, args.seconds)
            out[name].append(cpu)
            out[name + " per probe"].append(per_probe)
            print(
                f"round {r + 1} {name:>5}: {cpu:7.1f} CPU ms/pod/min, {per_probe:6.2f} CPU ms/probe, "
                f"{conns:6.1f} connections/pod/min, {failing} pods not answering",
                flush=True,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=int, default=40, help="redis-servers probed (even, default 40)")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured window per round (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each mode (default 3)")
    args = parser.parse_args(argv)
    if args.pods < 2 or args.pods % 2 or args.seconds <= 0 or args.rounds < 1:
        parser.error("--pods must be an even number >= 2, --seconds positive, --rounds >= 1")
    password = secrets.token_urlsafe(16)  # never printed
    with tempfile.TemporaryDirectory(prefix="prober-bench-") as tmp:
        children: list[_procs.Child] = []
        try:
            print(f"starting {args.pods} redis-servers", flush=True)
            children, ports = start_servers(args.pods, password, Path(tmp))
            wait_ready(ports, password)
            results = asyncio.run(run(args, ports, password))
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        finally:
            print(f"stopping {len(children)} redis-servers", flush=True)
            for child in children:
                child.stop(grace=5.0)
    m = {name: statistics.median(values) for name, values in results.items()}
    print(f"\nmedians over {args.rounds} rounds, fresh / kept connections:")
    print(f"  CPU ms per pod per minute {m['fresh']:.1f} / {m['kept']:.1f}")
    print(f"  CPU ms per probe {m['fresh per probe']:.2f} / {m['kept per probe']:.2f}")
    print(f"RATIO prober_cpu_kept_vs_fresh {m['kept'] / m['fresh']:.3f}")
    print(f"RATIO prober_cpu_per_probe_kept_vs_fresh {m['kept per probe'] / m['fresh per probe']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
