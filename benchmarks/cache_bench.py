"""``python -m benchmarks.cache_bench``: the informer cache against a raw list, on a real apiserver.

Starts its own control plane (etcd + kube-apiserver, no node) unless ``--kubeconfig`` is given,
creates ``--objects`` ConfigMaps (3 labels, ~300 bytes of data each) and measures, as medians
over ``--runs`` rounds (modes rotated each round so noise hits all alike):

- initial sync: an informer's start → ``has_synced`` (streaming list, and paged list with
  ``resourceVersion=0``), beside a raw paged list (``resourceVersion=0``, ``limit=500``, the
  request the paged informer sends) parsed with the same parser (orjson);
- memory: bytes the synced store holds (tracemalloc, after ``gc``), per object, beside the
  objects' compact JSON size — as stored (managedFields stripped: the stricter ratio) and as
  served by the apiserver;
- watch throughput: ``--burst`` updates made while the informer's watch is down, then the time
  from restarting it until every event is applied to the store (network + parse + apply), and
  the same events applied in-process (parse + apply, no network).

Metadata only: ``--secrets`` Secrets of ``--secret-bytes`` of data each (default 10,000 of 4 KiB)
in a namespace of their own, cached by a pyctrl ``Cache`` in full (``Secret``) and as metadata only
(``PartialObjectMetadata.of(Secret)``), each in a process of its own (``benchmarks/_secrets_cache.py``),
``--secret-runs`` rounds, modes alternated: RSS before the informer, RSS once synced (after a full
garbage collection), what the cache added, and the sync time.

Nothing is asserted. The output ends with ``RATIO initial_sync_vs_raw_list <v>`` (streaming sync
over raw list: lower is better), ``RATIO cache_bytes_per_json_byte <v>`` and
``RATIO metadata_only_rss_vs_full <v>`` (RSS the metadata-only cache adds ÷ RSS the full one adds,
medians).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from benchmarks import _procs
from pyctrl.cache import Informer
from pyctrl.cache.reflector import strip_managed_fields
from pyctrl.client import (
    ApiClient,
    ConfigMap,
    ListOptions,
    Namespace,
    ObjectMeta,
    PartialObjectMetadata,
    PatchType,
    RawPatch,
    Secret,
    load_kubeconfig,
)
from pyctrl.client.watch import parse_event
from pyctrl.envtest import Environment

NS = "bench-cache"
SECRETS_NS = "bench-secrets"
REPO = Path(__file__).resolve().parent.parent
LOGS = Path.home() / ".cache" / "pyctrl" / "bench" / "logs"
PAYLOAD = "x" * 240


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cache_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=5, help="rounds of the sync and memory measurements")
    p.add_argument("--burst", type=int, default=5_000, help="updates in the watch burst")
    p.add_argument("--burst-runs", type=int, default=3)
    p.add_argument("--secrets", type=int, default=10_000, help="Secrets of the metadata-only phase (0: none)")
    p.add_argument("--secret-bytes", type=int, default=4096)
    p.add_argument("--secret-runs", type=int, default=3)
    p.add_argument("--kubeconfig", type=Path, help="use this cluster instead of starting one")
    return p.parse_args()


def _configmap(i: int) -> ConfigMap:
    return ConfigMap(
        metadata=ObjectMeta(
            name=f"cm-{i:05d}",
            namespace=NS,
            labels={"app": "bench", "shard": str(i % 16), "tier": "cache"},
        ),
        data={"config.yaml": f"index: {i}\npayload: {PAYLOAD}\n", "index": str(i)},
    )


async def _bounded(n: int, parallel: int, job: Callable[[int], Awaitable[Any]]) -> None:
    queue = iter(range(n))

    async def worker() -> None:
        for i in queue:
            await job(i)

    await asyncio.gather(*(worker() for _ in range(parallel)))


async def _setup(client: ApiClient, objects: int) -> None:
    existing = await client.list(Namespace, field_selector=f"metadata.name={NS}")
    if not existing.items:
        await client.create(Namespace(metadata=ObjectMeta(name=NS)))
    have = len((await client.list(ConfigMap, namespace=NS, labels={"app": "bench"})).items)
    print(f"creating {objects - have} ConfigMaps in {NS} ...", flush=True)
    await _bounded(objects - have, 64, lambda i: client.create(_configmap(have + i)))


async def _raw_list(client: ApiClient) -> tuple[float, list[dict[str, Any]]]:
    start = time.perf_counter()
    items: list[dict[str, Any]] = []
    token: str | None = None
    path = f"/api/v1/namespaces/{NS}/configmaps"
    while True:
        params = {"limit": 500, "continue": token} if token else {"limit": 500, "resourceVersion": "0"}
        page = orjson.loads(await client.rest.request("GET", path, params=params))
        items.extend(page["items"])
        token = page["metadata"].get("continue") or None
        if token is None:
            return time.perf_counter() - start, items


async def _raw_stream(client: ApiClient) -> float:
    """The streaming list read raw: every line parsed, until the initial-events-end bookmark."""
    start = time.perf_counter()
    params = {
        "watch": "1",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "60",
    }
    async for line in client.rest.stream_lines(f"/api/v1/namespaces/{NS}/configmaps", params=params):
        event = orjson.loads(line)
        if event["type"] == "BOOKMARK":
            break
    return time.perf_counter() - start


async def _informer(client: ApiClient, *, watch_list: bool) -> Informer:
    lw = await client.list_watcher(ConfigMap, ListOptions.build(namespace=NS))
    return Informer(lw, ConfigMap, watch_list=watch_list)


async def _sync(client: ApiClient, *, watch_list: bool) -> tuple[float, Informer]:
    informer = await _informer(client, watch_list=watch_list)
    start = time.perf_counter()
    informer.start()
    await informer.wait_for_sync()
    elapsed = time.perf_counter() - start
    await informer.stop()
    return elapsed, informer


async def _memory(client: ApiClient) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        _, informer = await _sync(client, watch_list=True)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        assert len(informer.store) > 0
        return held
    finally:
        tracemalloc.stop()


async def _burst(client: ApiClient, burst: int, round_no: int) -> tuple[float, float]:
    informer = await _informer(client, watch_list=True)
    informer.start()
    await informer.wait_for_sync()
    await informer.stop()
    last_rv = ""

    async def touch(i: int) -> None:
        nonlocal last_rv
        patch = RawPatch(PatchType.MERGE, {"data": {"round": str(round_no)}})
        done = await client.patch(_configmap(i), patch)
        rv = done.metadata.resource_version or ""
        if int(rv) > int(last_rv or 0):
            last_rv = rv

    await _bounded(burst, 64, touch)
    applied = asyncio.Event()

    def on_change(_: object) -> None:
        if informer.reflector.last_sync_resource_version == last_rv:
            applied.set()

    informer.reflector.notify = on_change
    start = time.perf_counter()
    informer.start()
    await applied.wait()
    networked = time.perf_counter() - start
    await informer.stop()
    # the same events once more, in-process: parse + apply, no network
    lines = [
        orjson.dumps(
            {
                "type": "MODIFIED",
                "object": {
                    **_configmap(i).model_dump(mode="json", exclude_none=True),
                    "metadata": {"name": f"cm-{i:05d}", "namespace": NS, "resourceVersion": str(10**9 + i)},
                },
            }
        )
        for i in range(burst)
    ]
    from pyctrl.cache.watcher import Apply

    start = time.perf_counter()
    for line in lines:
        informer.reflector.apply(Apply(parse_event(line).object))
    in_process = time.perf_counter() - start
    return burst / networked, burst / in_process


async def _secrets_setup(client: ApiClient, count: int, size: int) -> None:
    existing = await client.list(Namespace, field_selector=f"metadata.name={SECRETS_NS}")
    if not existing.items:
        await client.create(Namespace(metadata=ObjectMeta(name=SECRETS_NS)))
    have = len((await client.list(PartialObjectMetadata.of(Secret), namespace=SECRETS_NS)).items)
    print(f"creating {max(0, count - have)} Secrets of {size} B in {SECRETS_NS} ...", flush=True)
    payload = base64.b64encode(os.urandom(size)).decode()  # random: etcd and the wire carry it all

    async def create(i: int) -> None:
        name = f"secret-{have + i:05d}"
        meta = ObjectMeta(name=name, namespace=SECRETS_NS, labels={"app": "bench", "shard": str(i % 16)})
        await client.create(Secret(metadata=meta, data={"payload": payload}))

    await _bounded(max(0, count - have), 32, create)


async def _secrets_run(kubeconfig: Path, mode: str) -> dict[str, float]:
    """One child process caching the Secrets in ``mode``; its figures."""
    log = LOGS / f"secrets-cache-{mode}.log"
    argv = [sys.executable, "-m", "benchmarks._secrets_cache", "--kubeconfig", str(kubeconfig)]
    child = _procs.start(f"secrets-{mode}", [*argv, "--namespace", SECRETS_NS, "--mode", mode], log, cwd=REPO)
    try:
        await asyncio.to_thread(child.proc.wait, 900)  # TimeoutExpired past 15 min: stopped below
    finally:
        child.stop()
    lines = log.read_text().splitlines()
    if child.proc.returncode != 0 or not lines:
        raise RuntimeError(f"secrets cache ({mode}) failed (exit {child.proc.returncode}):{child.tail()}")
    figures: dict[str, float] = json.loads(lines[-1])
    return figures


async def _secrets(kubeconfig: Path, args: argparse.Namespace) -> float:
    """The metadata-only phase (module docstring); returns the RSS ratio."""
    async with ApiClient(await load_kubeconfig(kubeconfig)) as client:
        await _secrets_setup(client, args.secrets, args.secret_bytes)
    runs: dict[str, list[dict[str, float]]] = {"full": [], "metadata": []}
    for round_no in range(args.secret_runs):
        for mode in ["full", "metadata"] if round_no % 2 == 0 else ["metadata", "full"]:
            figures = await _secrets_run(kubeconfig, mode)
            print(f"  secrets round {round_no + 1}, {mode}: {json.dumps(figures)}", flush=True)
            runs[mode].append(figures)

    def med(mode: str, key: str) -> float:
        return _median([r[key] for r in runs[mode]])

    def added(mode: str) -> float:
        return _median([r["rss_after_mib"] - r["rss_before_mib"] for r in runs[mode]])

    print(
        f"\nmetadata only: {args.secrets:,} Secrets of {args.secret_bytes:,} B, medians of "
        f"{args.secret_runs} runs each, one process per run"
    )
    print(
        "{:>10} {:>12} {:>12} {:>12} {:>9}".format(
            "cached", "RSS before", "RSS synced", "cache adds", "sync s"
        )
    )
    for mode in runs:
        print(
            f"{mode:>10} {med(mode, 'rss_before_mib'):>8.0f} MiB {med(mode, 'rss_after_mib'):>8.0f} MiB "
            f"{added(mode):>8.1f} MiB {med(mode, 'sync_s'):>9.2f}"
        )
    return added("metadata") / added("full")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def bench(kubeconfig: Path, args: argparse.Namespace) -> None:
    async with ApiClient(await load_kubeconfig(kubeconfig)) as client:
        await _setup(client, args.objects)
        raw_times: list[float] = []
        raw_stream_times: list[float] = []
        stream_times: list[float] = []
        paged_times: list[float] = []
        served = stored = count = 0
        for round_no in range(args.runs):
            steps = ["raw", "stream", "paged", "raw-stream"]
            steps = steps[round_no % 4 :] + steps[: round_no % 4]
            for step in steps:
                if step == "raw":
                    elapsed, items = await _raw_list(client)
                    raw_times.append(elapsed)
                    # sizes from the listed objects, which are then dropped: 10,000 parsed objects
                    # kept alive would slow every later garbage collection (and so every mode)
                    count = len(items)
                    served = sum(len(orjson.dumps(i)) for i in items)
                    stored = sum(len(orjson.dumps(strip_managed_fields(i))) for i in items)
                    del items
                elif step == "raw-stream":
                    raw_stream_times.append(await _raw_stream(client))
                elif step == "stream":
                    stream_times.append((await _sync(client, watch_list=True))[0])
                else:
                    paged_times.append((await _sync(client, watch_list=False))[0])
        held = [await _memory(client) for _ in range(max(1, min(args.runs, 3)))]
        bursts = [await _burst(client, args.burst, n) for n in range(args.burst_runs)]

    raw, stream, paged = _median(raw_times), _median(stream_times), _median(paged_times)
    held_per_obj = _median([float(h) for h in held]) / count
    rows = [
        ("objects", f"{count}", ""),
        ("raw paged list (rv=0, limit 500) + orjson", f"{raw * 1000:.0f} ms", f"{count / raw:,.0f} obj/s"),
        (
            "raw streaming list + orjson",
            f"{_median(raw_stream_times) * 1000:.0f} ms",
            f"x{_median(raw_stream_times) / raw:.2f} of raw list",
        ),
        ("informer sync, streaming list", f"{stream * 1000:.0f} ms", f"x{stream / raw:.2f} of raw"),
        ("informer sync, paged list", f"{paged * 1000:.0f} ms", f"x{paged / raw:.2f} of raw"),
        ("compact JSON per object, as served", f"{served / count:.0f} B", "with managedFields"),
        ("compact JSON per object, as stored", f"{stored / count:.0f} B", "managedFields stripped"),
        (
            "cache memory per object",
            f"{held_per_obj:.0f} B",
            f"x{held_per_obj / (stored / count):.2f} stored JSON, "
            f"x{held_per_obj / (served / count):.2f} served JSON",
        ),
        (
            "watch burst applied (network)",
            f"{_median([b[0] for b in bursts]):,.0f} ev/s",
            f"{args.burst} updates",
        ),
        ("watch events applied in-process", f"{_median([b[1] for b in bursts]):,.0f} ev/s", "parse + apply"),
    ]
    width = max(len(r[0]) for r in rows)
    print(
        f"\ncache benchmark (medians of {args.runs} sync rounds, {len(held)} memory, {args.burst_runs} burst)"
    )
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>14}  {note}")
    print(f"RATIO initial_sync_vs_raw_list {stream / raw:.3f}")
    print(f"RATIO cache_bytes_per_json_byte {held_per_obj / (stored / count):.3f}")
    if args.secrets:
        print(f"RATIO metadata_only_rss_vs_full {await _secrets(kubeconfig, args):.3f}")


def main() -> None:
    args = _args()
    if args.kubeconfig is not None:
        asyncio.run(bench(args.kubeconfig, args))
        return
    env = Environment(local_node=False)
    env.start()  # on the main thread: envtest processes die with the thread that started them
    try:
        asyncio.run(bench(env.kubeconfig_path, args))
    finally:
        env.stop()


if __name__ == "__main__":
    main()
