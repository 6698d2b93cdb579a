"""A fleet of RedisClusters on one operator: what each managed cluster costs, and whether a
failover stays fast while the rest of the fleet is being reconciled.

``python -m benchmarks.fleet_bench [--scales 1,50,200] [--runs 5] [--window 60] [--nodes N]``
starts the local control plane with ``N`` local nodes (default: enough for the largest scale at
110 pods a node), the operator as its own process (``python -m examples.rediscluster``, its
default 4 workers), then grows the fleet scale by scale (replication mode, 2 pods each,
``memoryLimit`` 32Mi so Redis' maxmemory is small). At each scale, once every cluster is Running:

- **steady CPU**: the operator's CPU seconds over ``--window`` seconds of an idle fleet, per
  managed cluster per minute (the prober's rounds and periodic requeues are what it pays);
- **RSS per cluster**: the operator's RSS growth since its start with no cluster, per cluster;
- **probe traffic**: connections accepted per pod per minute by ``fleet-0``'s pods over the same
  window (INFO ``total_connections_received``): the prober's connections (one per probe with a
  fresh connection each, about none with kept ones), with the load average at the window's end;
- **failover, fleet idle**: ``--runs`` times, the master of cluster ``fleet-0`` is crashed
  (``SHUTDOWN NOSAVE``) while a writer ``SET``s on the pod labelled master; the time from the crash
  to the first write acknowledged (``OK``) by another pod;
- **failover, fleet busy**: the same, but at the crash an annotation is changed on *every* cluster
  at once (labels do not trigger the operator's reconcile; annotations do), so every other cluster
  is queued for a reconcile just as the failover needs the workers;
- **reconcile latency** p50/p99 and **queue wait** p50/p99 (``controller_runtime_reconcile_time``
  and ``workqueue_queue_duration`` histograms of the operator, over the busy runs), interpolated
  within buckets as ``histogram_quantile`` does.

Medians over the runs. RATIO lines: ``fleet_failover_busy_vs_lone`` (busy over idle failover at
the largest scale), ``fleet_cpu_per_cluster_growth_50_to_200`` (steady CPU per cluster at 200 over
at 50; printed only when both ran), ``fleet_rss_per_cluster_mib`` (at the largest scale).
Figures are printed, never asserted. Everything started is stopped on any exit: on Ctrl-C the
current measurement is cancelled (the fleet-wide patches and the writer are not waited for), the
operator gets 5 s to stop, then the control plane and its nodes stop every pod; a further Ctrl-C
is ignored meanwhile, so the stopping cannot be cut short, and the scales measured so far are
reported.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import signal
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchmarks import _procs
from benchmarks._failover_run import _inject
from benchmarks._failover_systems import OperatorSystem, redis_client, redis_info, until
from pyctrl.client import load_kubeconfig
from pyctrl.client.rest import Transport
from pyctrl.envtest import Environment
from pyctrl.envtest._process import free_port

REPO = Path(__file__).resolve().parents[1]
NS = "default"
BASE = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{NS}/redisclusters"
PODS_PER_NODE = 100  # of the local node's 110, some room left


class FleetCluster(OperatorSystem):
    """One 2-pod RedisCluster of the fleet (created in bulk by :func:`grow`)."""

    async def steady(self) -> bool:
        s = await self.status()
        return s.get("phase") == "Running" and s.get("readyReplicas") == 2


def cluster_body(name: str, down_after_ms: int) -> bytes:
    # explicitly open (auth is on by default): the figures stay comparable with earlier runs
    spec = {
        "replicas": 2,
        "downAfterMilliseconds": down_after_ms,
        "memoryLimit": "32Mi",
        "auth": {"enabled": False},
    }
    body = {"apiVersion": "redis.pyctrl.dev/v1alpha1", "kind": "RedisCluster", "metadata": {"name": name}}
    return orjson.dumps({**body, "spec": spec})


async def grow(t: Transport, start: int, stop: int, down_after_ms: int) -> None:
    """Create clusters ``fleet-<start>`` … ``fleet-<stop - 1>`` (16 creates in flight) and wait until
    all of the fleet is Running (or, past the deadline, at least 90 % of it)."""
    sem = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        async with sem:
            body = cluster_body(f"fleet-{i}", down_after_ms)
            await t.request("POST", BASE, body=body, content_type="application/json")

    await asyncio.gather(*(create(i) for i in range(start, stop)))
    began = time.monotonic()
    deadline = began + 300 + 6 * (stop - start)
    while True:
        doc = await t.request_json("GET", BASE)
        running = sum(
            (i.get("status") or {}).get("phase") == "Running"
            and (i.get("status") or {}).get("readyReplicas") == 2
            for i in doc.get("items") or []
        )
        print(f"  {running}/{stop} clusters Running ({time.monotonic() - began:.0f} s)", flush=True)
        if running == stop:
            return
        if time.monotonic() > deadline:
            if running >= 0.9 * stop:  # a loaded machine keeps a few failing over: measured as is
                print(f"  going on with {running}/{stop} Running (the others keep failing over)", flush=True)
                return
            raise TimeoutError(f"only {running}/{stop} clusters Running after {deadline - began:.0f} s")
        await asyncio.sleep(5.0)  # a list of the whole fleet every 5 s, no more


def _every(check: Any, seconds: float) -> Any:
    """``check`` run at most every ``seconds`` (``until`` polls every 50 ms; a list of hundreds of
    clusters that often would load the apiserver)."""
    last = [0.0]

    async def gated() -> Any:
        if time.monotonic() - last[0] < seconds:
            return False
        last[0] = time.monotonic()
        return await check()

    return gated


async def touch_all(t: Transport, n: int, round_: int) -> None:
    """Change an annotation on every cluster at once (32 patches in flight)."""
    sem = asyncio.Semaphore(32)
    body = orjson.dumps({"metadata": {"annotations": {"bench.pyctrl.dev/touch": str(round_)}}})

    async def patch(i: int) -> None:
        async with sem:
            with contextlib.suppress(Exception):
                await t.request(
                    "PATCH", f"{BASE}/fleet-{i}", body=body, content_type="application/merge-patch+json"
                )

    await asyncio.gather(*(patch(i) for i in range(n)))


class Writer:
    """``SET`` in a loop on the pod the operator labels master; ``acked`` holds (time, pod)."""

    def __init__(self, system: FleetCluster) -> None:
        self.system = system
        self.acked: list[tuple[float, str]] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop writing: the loop ends after its current command (0.5 s timeouts), else it is
        cancelled."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 5)

    async def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            pod = await self.system.discover()
            if pod is None:
                await asyncio.sleep(0.02)  # poll interval until a master is named again
                continue
            client = redis_client(self.system.pods[pod])
            try:
                while not self._stop.is_set():
                    await client.set(f"fleet:{i}", i)
                    self.acked.append((time.monotonic(), pod))
                    i += 1
                    await asyncio.sleep(0.005)  # ~200 writes/s: enough resolution, little load
            except Exception:
                await asyncio.sleep(0.02)  # the master failed or is no longer master: look again
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()


async def failover(system: FleetCluster, t: Transport, busy_clusters: int, round_: int) -> float | None:
    """Crash ``system``'s master; seconds to the first write acknowledged by another pod (None:
    not within 90 s). With ``busy_clusters``, every cluster's annotation changes at the crash."""
    await until(system.steady, 300, f"{system.cluster} steady before the run")
    old = await system.master()
    writer = Writer(system)
    writer.start()
    busy: asyncio.Task[None] | None = None
    try:
        await until(lambda: _true(len(writer.acked) > 50), 30, "writes flowing")
        if busy_clusters:
            busy = asyncio.create_task(touch_all(t, busy_clusters, round_))
        crashed = time.monotonic()
        try:
            await _inject("crash", system.pods[old])
        except Exception as exc:  # the master did not answer in time (a loaded machine): no figure
            print(f"  could not crash {old}: {exc}", flush=True)
            return None
        deadline = crashed + 90
        while time.monotonic() < deadline:
            first = next((at for at, pod in writer.acked if pod != old and at > crashed), None)
            if first is not None:
                return first - crashed
            await asyncio.sleep(0.02)  # poll interval, bounded by the deadline
        return None
    except BaseException:  # interrupted: the fleet's patches are not waited for
        if busy is not None:
            busy.cancel()
        raise
    finally:
        await writer.stop()
        if busy is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await busy


async def _true(value: bool) -> bool:
    return value


# -- the operator's histograms ------------------------------------------------------------------
_BUCKET = re.compile(r"^(\w+)_bucket\{(.*)\} ([0-9.e+-]+)$")


def scrape(port: int) -> dict[str, dict[float, float]]:
    """Cumulative buckets of the ``rediscluster`` controller's reconcile time and queue wait."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[str, dict[float, float]] = {"reconcile": {}, "queue": {}}
    for line in text.splitlines():
        m = _BUCKET.match(line)
        if m is None or 'rediscluster"' not in m.group(2):
            continue
        le = float(re.search(r'le="([^"]+)"', m.group(2)).group(1).replace("+Inf", "inf"))  # type: ignore[union-attr]
        if m.group(1) == "controller_runtime_reconcile_time_seconds":
            out["reconcile"][le] = float(m.group(3))
        elif m.group(1) == "workqueue_queue_duration_seconds" and 'name="rediscluster"' in m.group(2):
            out["queue"][le] = float(m.group(3))
    return out


def quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float | None:
    """``histogram_quantile`` over the observations between two scrapes."""
    buckets = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank, prev_le, prev_count = q * buckets[-1][1], 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_count) / max(count - prev_count, 1e-9)
        prev_le, prev_count = le, count
    return None


@dataclass
class Scale:
    clusters: int
    cpu_per_cluster_min: float = 0.0
    rss_per_cluster_mib: float = 0.0
    probe_connections_per_pod_min: float | None = None
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    lone: list[float | None] = field(default_factory=list)
    busy: list[float | None] = field(default_factory=list)
    latency: dict[str, float | None] = field(default_factory=dict)


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _s(value: float | None, unit: str = "s") -> str:
    return "-" if value is None else f"{value:.3f}{unit}"


async def measure(
    scales: list[int], args: argparse.Namespace, env: Environment, t: Transport, results: list[Scale]
) -> None:
    """Measure each scale in turn, appending its row to ``results`` as soon as it is complete."""
    metrics = free_port()
    argv = [sys.executable, "-m", "examples.rediscluster", f"--kubeconfig={env.kubeconfig_path}"]
    argv += [
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        "--no-metrics-secure",  # plain HTTP on loopback: read here without a token
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
    ]
    operator = _procs.start("operator", argv, env.log_dir / "fleet-operator.log", cwd=REPO)
    try:
        await until(_every(lambda: _true(_up(metrics)), 0.5), 60, "the operator serving metrics")
        await _procs.wait_quiet(operator, window=2.0, busy=0.05)
        rss0 = operator.rss_mib()
        print(f"operator up: RSS {rss0:.1f} MiB with no cluster", flush=True)
        have = 0
        for n in scales:
            print(f"\nscale {n}: growing the fleet from {have}", flush=True)
            try:
                await grow(t, have, n, args.down_after_ms)
            except TimeoutError as exc:  # report the scales measured so far
                print(f"  scale {n} not measured: {exc}", flush=True)
                break
            have = n
            row = Scale(n)
            await _procs.wait_quiet(operator, window=5.0, busy=0.5, timeout=120)
            lone = FleetCluster(t, args.down_after_ms, name="fleet-0")
            items = (
                await t.request_json(
                    "GET",
                    f"/api/v1/namespaces/{NS}/pods",
                    params={"labelSelector": "app.kubernetes.io/instance=fleet-0"},
                )
            )["items"]
            lone.pods = {p["metadata"]["name"]: p["status"]["podIP"] for p in items}
            conns0 = await connections_received(lone)
            cpu0, at0 = operator.cpu_seconds(), time.monotonic()
            await asyncio.sleep(args.window)  # the measured window of an idle fleet
            cpu, span = operator.cpu_seconds() - cpu0, time.monotonic() - at0
            conns = await connections_received(lone)
            row.load = os.getloadavg()
            row.cpu_per_cluster_min = cpu / span * 60 / n
            row.rss_per_cluster_mib = (operator.rss_mib() - rss0) / n
            if conns is not None and conns0 is not None:  # less this benchmark's two INFO connections
                row.probe_connections_per_pod_min = (conns - conns0 - 2) / len(lone.pods) / span * 60
            print(
                f"  steady: {cpu / span * 60:.2f} CPU s/min in all, "
                f"{row.cpu_per_cluster_min:.3f} per cluster; "
                f"RSS per cluster {row.rss_per_cluster_mib:.3f} MiB; connections opened per pod per "
                f"minute {_s(row.probe_connections_per_pod_min, '')}; load average "
                + " ".join(f"{x:.1f}" for x in row.load),
                flush=True,
            )
            before = await asyncio.to_thread(scrape, metrics)
            for k in range(args.runs):
                for busy in (False, True):
                    took = await failover(lone, t, n if busy else 0, k + 100 * n)
                    (row.busy if busy else row.lone).append(took)
                    print(
                        f"  run {k + 1} failover, fleet {'busy' if busy else 'idle'}: {_s(took)}", flush=True
                    )
            after = await asyncio.to_thread(scrape, metrics)
            for what in ("reconcile", "queue"):
                for q in (0.5, 0.99):
                    row.latency[f"{what} p{int(q * 100)}"] = quantile(q, before[what], after[what])
            print("  " + ", ".join(f"{k} {_s(v)}" for k, v in row.latency.items()), flush=True)
            results.append(row)
    finally:
        stopping(f"the operator (pid {operator.pid})")
        operator.stop(grace=5.0)


async def connections_received(system: FleetCluster) -> int | None:
    """Connections ``system``'s pods have accepted (INFO stats), summed; None if one does not answer."""
    try:
        infos = [await redis_info(ip, "stats") for ip in system.pods.values()]
    except Exception:  # a pod failing over: no figure this time
        return None
    return sum(int(i["total_connections_received"]) for i in infos)


def stopping(what: str) -> None:
    """From here on the run only stops what it started: a further Ctrl-C is ignored, so it cannot
    cut the stopping short and leave processes behind."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"stopping {what} (Ctrl-C is ignored until everything started is stopped)", flush=True)


def _up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2):
            return True
    except OSError:
        return False


def report(results: list[Scale]) -> None:
    print("\nfleet of 2-pod RedisClusters on one operator, medians over the runs:")
    print(
        f"{'clusters':>8} {'CPU s/cluster/min':>18} {'RSS MiB/cluster':>16} {'failover idle':>14} "
        f"{'failover busy':>14} {'reconcile p50/p99':>20} {'queue wait p50/p99':>20} "
        f"{'conns/pod/min':>13} {'load avg 1/5/15':>16}"
    )
    for r in results:
        lat = r.latency
        print(
            f"{r.clusters:>8} {r.cpu_per_cluster_min:>18.3f} {r.rss_per_cluster_mib:>16.3f} "
            f"{_s(_median(r.lone)):>14} {_s(_median(r.busy)):>14} "
            f"{_s(lat.get('reconcile p50')) + '/' + _s(lat.get('reconcile p99')):>20} "
            f"{_s(lat.get('queue p50')) + '/' + _s(lat.get('queue p99')):>20} "
            f"{_s(r.probe_connections_per_pod_min, ''):>13} {'/'.join(f'{x:.1f}' for x in r.load):>16}"
        )
    if not results:
        return
    last = results[-1]
    lone, busy = _median(last.lone), _median(last.busy)
    if lone and busy is not None:
        print(f"RATIO fleet_failover_busy_vs_lone {busy / lone:.3f}")
    by = {r.clusters: r for r in results}
    if 50 in by and 200 in by and by[50].cpu_per_cluster_min > 0:
        growth = by[200].cpu_per_cluster_min / by[50].cpu_per_cluster_min
        print(f"RATIO fleet_cpu_per_cluster_growth_50_to_200 {growth:.3f}")
    print(f"RATIO fleet_rss_per_cluster_mib {last.rss_per_cluster_mib:.3f}")


async def run(args: argparse.Namespace, results: list[Scale]) -> None:
    started = time.monotonic()
    nodes = args.nodes or max(1, math.ceil(2 * max(args.scales) / PODS_PER_NODE))
    print(f"control plane with {nodes} local node(s)", flush=True)
    stopped_at = 0.0
    try:
        with Environment(crd_directory_paths=[REPO / "crds"], nodes=nodes) as env:
            try:
                t = Transport(await load_kubeconfig(env.kubeconfig_path))
                try:
                    await measure(args.scales, args, env, t, results)
                finally:
                    await t.close()
            finally:
                stopping(f"the control plane and its {nodes} node(s) with every pod")
                stopped_at = time.monotonic()
    finally:
        if stopped_at:
            print(
                f"the control plane and every pod stopped in {time.monotonic() - stopped_at:.0f} s",
                flush=True,
            )
        print(f"\nbenchmark took {time.monotonic() - started:.0f} s", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scales", default="1,50,200", help="fleet sizes, growing (default 1,50,200)")
    parser.add_argument("--runs", type=int, default=5, help="failovers per condition per scale (default 5)")
    parser.add_argument("--window", type=float, default=60.0, help="steady-CPU window, seconds (default 60)")
    parser.add_argument("--nodes", type=int, default=0, help="local nodes (default: 1 per 50 clusters)")
    parser.add_argument("--down-after-ms", type=int, default=5000)
    args = parser.parse_args(argv)
    try:
        args.scales = [int(x) for x in args.scales.split(",")]
    except ValueError:
        parser.error(f"--scales: comma-separated cluster counts, got {args.scales!r}")
    if (
        not args.scales
        or any(b <= a for a, b in zip(args.scales, args.scales[1:], strict=False))
        or args.scales[0] < 1
    ):
        parser.error("--scales must be growing positive counts, e.g. 1,50,200")
    if args.runs < 1 or args.window <= 0:
        parser.error("--runs must be at least 1 and --window positive")
    if args.down_after_ms < 1000:
        parser.error("--down-after-ms must be at least 1000 (the operator's minimum)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: list[Scale] = []
    try:
        asyncio.run(run(args, results))
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped; the scales measured so far:", file=sys.stderr)
        report(results)
        return 130
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
