"""The ``leader`` scenario: kill the operator's leader process, time the standby taking over.

Two operator processes run with ``--leader-elect`` (default lease: 15 s / 10 s / 2 s) beside a
1-pod RedisCluster; once one leads and the other has started, the leader is killed (SIGKILL, so
its lease is not released) and the standby's ``/metrics`` are read every 50 ms:

- *elected*: kill → ``leader_election_master_status`` 1 on the standby (the lease expiry);
- *first reconcile*: kill → its first ``controller_runtime_reconcile_total`` sample;
- their difference: what the new leader spends before its first reconcile — with warm standby
  its caches are already synced, without it they list first.

Runs alternate warm and cold, ``--kills`` of each.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import orjson

from benchmarks import _procs
from benchmarks._failover_systems import NS, until
from examples.rediscluster_demo.harness import ROOT
from pyctrl.client.errors import NotFound
from pyctrl.envtest._process import free_port

__all__ = ["LeaderOutcome", "leader_runs", "report_leader"]

_CLUSTER = "leaderbench"


@dataclass
class LeaderOutcome:
    warm: bool
    elected_s: float | None
    first_reconcile_s: float | None
    fault: str = "leader"
    system: str = "operator"
    note: str = ""


def _metric(port: int, name: str) -> float:
    """Sum of every sample of ``name`` on the operator's /metrics (0 if absent or unreachable)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            text = response.read().decode()
    except OSError:
        return 0.0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#") and "_created" not in line
    )


def _serves(port: int, name: str) -> bool:
    """The operator at ``port`` answers /metrics with a sample of ``name`` (a standby's is 0)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            return any(line.startswith(name) for line in response.read().decode().splitlines())
    except OSError:
        return False


def _operator(ctx: Any, tag: str, warm: bool) -> tuple[_procs.Child, int]:
    metrics = free_port()
    argv = [
        sys.executable,
        "-m",
        "examples.rediscluster",
        f"--kubeconfig={ctx.env.kubeconfig_path}",
        "--leader-elect",
        "--leader-election-id=leaderbench",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        "--no-metrics-secure",  # plain HTTP on loopback: read here without a token
        f"--health-probe-bind-address=127.0.0.1:{free_port(avoid={metrics})}",
        "--warm-standby" if warm else "--no-warm-standby",
    ]
    log = ctx.env.log_dir / f"leader-{tag}.log"
    return _procs.start(f"operator-{tag}", argv, log, cwd=ROOT, env=dict(os.environ)), metrics


async def _metric_at_least(port: int, name: str, value: float) -> bool:
    return await asyncio.to_thread(_metric, port, name) >= value


async def _one(ctx: Any, k: int, warm: bool) -> LeaderOutcome:
    leader, leader_port = _operator(ctx, f"{k}-a", warm)
    standby: _procs.Child | None = None
    try:
        await until(lambda: _metric_at_least(leader_port, "leader_election_master_status", 1), 60, "a leader")
        await until(
            lambda: _metric_at_least(leader_port, "controller_runtime_reconcile_total", 1),
            60,
            "its reconcile",
        )
        standby, port = _operator(ctx, f"{k}-b", warm)
        await until(
            lambda: asyncio.to_thread(_serves, port, "leader_election_master_status"), 60, "the standby"
        )
        await asyncio.sleep(3.0)  # let the standby settle (warm: its caches sync) before the kill
        killed = time.monotonic()
        os.kill(leader.pid, signal.SIGKILL)
        elected = first = None
        while time.monotonic() < killed + 90 and first is None:
            if elected is None and await _metric_at_least(port, "leader_election_master_status", 1):
                elected = time.monotonic()
            if await _metric_at_least(port, "controller_runtime_reconcile_total", 1):
                first = time.monotonic()
                elected = elected or first
            await asyncio.sleep(0.05)  # poll interval, bounded by the deadline above
        return LeaderOutcome(
            warm,
            None if elected is None else elected - killed,
            None if first is None else first - killed,
            note="" if first is not None else "no reconcile by the standby within 90 s",
        )
    finally:
        leader.stop(grace=5)
        if standby is not None:
            standby.stop(grace=35)


async def leader_runs(ctx: Any) -> list[LeaderOutcome]:
    base = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{NS}/redisclusters"
    body = {
        "apiVersion": "redis.pyctrl.dev/v1alpha1",
        "kind": "RedisCluster",
        "metadata": {"name": _CLUSTER},
        "spec": {"replicas": 1, "auth": {"enabled": False}},  # explicitly open (auth is on by default)
    }
    await ctx.t.request("POST", base, body=orjson.dumps(body), content_type="application/json")
    outcomes: list[LeaderOutcome] = []
    try:
        for k in range(ctx.args.kills):
            for warm in (True, False):
                o = await _one(ctx, k, warm)
                outcomes.append(o)
                print(
                    f"run {k + 1} leader kill, warm standby {'on ' if warm else 'off'}: elected "
                    f"{_s(o.elected_s)}, first reconcile {_s(o.first_reconcile_s)}"
                    + (f"  [{o.note}]" if o.note else ""),
                    flush=True,
                )
    finally:
        with contextlib.suppress(NotFound):
            await ctx.t.request("DELETE", f"{base}/{_CLUSTER}")
    return outcomes


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def report_leader(outcomes: list[Any]) -> None:
    print("\nleader kill -> the standby's first reconcile, medians:")
    after: dict[bool, float] = {}
    for warm in (True, False):
        runs = [o for o in outcomes if o.warm is warm and o.first_reconcile_s is not None]
        if not runs:
            continue
        elected = statistics.median(o.elected_s for o in runs)
        first = statistics.median(o.first_reconcile_s for o in runs)
        after[warm] = statistics.median(o.first_reconcile_s - o.elected_s for o in runs)
        print(
            f"  warm standby {'on ' if warm else 'off'} ({len(runs)} runs): elected {elected:.2f}s, "
            f"first reconcile {first:.2f}s, elected -> first reconcile {after[warm]:.3f}s"
        )
    if True in after and False in after and after[False] > 0:
        print(f"RATIO leader_elected_to_first_reconcile_warm_vs_cold {after[True] / after[False]:.2f}")
