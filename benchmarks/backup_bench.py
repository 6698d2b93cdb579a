"""``python -m benchmarks.backup_bench``: the operator's backup Job against the raw pipeline.

On one local control plane (envtest + local node), a one-pod RedisCluster is filled with
incompressible 1000-byte values up to each dataset size (default 100 MiB and 1 GiB); then, per
repetition and interleaved:

- **raw**: ``redis-cli --rdb -`` piped into boto3's ``upload_fileobj`` with the same transfer
  settings as the worker (8 MiB parts, 4 threads), run here, timed from start to the end of the
  upload;
- **job**: a RedisBackup created, timed until its status is Succeeded (Job creation, pod start,
  the worker's stream and upload, the status write) — what a user waits for.

Both go to the same versitygw on loopback. Printed: MB/s (10^6 bytes of RDB per second) of each,
the median over the repetitions, ``RATIO backup_vs_raw`` (job MB/s / raw MB/s, medians, per size)
and the worker pod's peak RSS (its own ``ru_maxrss``, reported in its termination message) at each
size. Everything started is stopped at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import redis.asyncio as aioredis

from examples.rediscluster.backup.store import S3Store
from examples.rediscluster.operator import OperatorOptions, build_operator
from pyctrl.client import load_kubeconfig
from pyctrl.envtest import Environment
from pyctrl.envtest.objectstore import ObjectStore
from pyctrl.testing import eventually

BUCKET = "bench"
NS = "backup-bench"
VALUE = 1000
MiB = 1024 * 1024
CRDS = Path(__file__).resolve().parents[1] / "crds"


def _http(env: Environment) -> Any:
    return env.http


async def _load(client: aioredis.Redis, start: int, stop: int) -> None:
    for base in range(start, stop, 2000):
        pipe = client.pipeline(transaction=False)
        for i in range(base, min(base + 2000, stop)):
            pipe.set(f"k:{i:09d}", os.urandom(VALUE))
        await pipe.execute()


async def _until_succeeded(env: Environment, name: str) -> dict[str, Any]:
    base = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{NS}/redisbackups/{name}"

    async def done() -> dict[str, Any] | None:
        status = dict(_http(env).get(base).get("status") or {})
        if status.get("phase") == "Failed":
            raise RuntimeError(f"backup {name} failed: {status.get('message')}")
        return status if status.get("phase") == "Succeeded" else None

    return await eventually(done, within=1200, what=f"backup {name}", interval=0.05)


def _worker_rss(env: Environment, name: str) -> int:
    import json

    pods = _http(env).get(f"/api/v1/namespaces/{NS}/pods?labelSelector=job-name%3D{name}-backup")["items"]
    for pod in pods:
        for status in pod["status"].get("containerStatuses") or []:
            message = (status.get("state", {}).get("terminated") or {}).get("message")
            if message:
                return int(json.loads(message.strip().splitlines()[-1]).get("peakRssBytes", 0))
    return 0


def _raw(store: ObjectStore, ip: str, key: str) -> tuple[float, int]:
    """redis-cli --rdb - | boto3 upload_fileobj (the worker's transfer settings)."""
    os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = store.access_key, store.secret_key
    target = S3Store(store.endpoint, BUCKET, key, store.region, ca_bundle=None)
    started = time.monotonic()
    cli = subprocess.Popen(
        ["redis-cli", "-h", ip, "-p", "6379", "--rdb", "-"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert cli.stdout is not None
    target.client.upload_fileobj(cli.stdout, BUCKET, key, Config=target.transfer)
    if cli.wait(60) != 0:
        raise RuntimeError("redis-cli --rdb failed")
    seconds = time.monotonic() - started
    size = store.client().head_object(Bucket=BUCKET, Key=key)["ContentLength"]
    return seconds, int(size)


def _backup(name: str, store: ObjectStore) -> dict[str, Any]:
    s3 = {"endpoint": store.endpoint, "bucket": BUCKET, "credentialsSecret": {"name": "s3-creds"}}
    return {
        "apiVersion": "redis.pyctrl.dev/v1alpha1",
        "kind": "RedisBackup",
        "metadata": {"name": name},
        "spec": {"clusterName": "big", "destination": {"s3": s3}},
    }


async def _start_cluster(env: Environment, store: ObjectStore) -> str:
    """The secret and a one-pod RedisCluster; the master's IP once it runs."""
    keys = {"AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key}
    secret = {"metadata": {"name": "s3-creds"}, "stringData": keys}
    _http(env).request("POST", f"/api/v1/namespaces/{NS}/secrets", secret)
    rdc = {
        "apiVersion": "redis.pyctrl.dev/v1alpha1",
        "kind": "RedisCluster",
        "metadata": {"name": "big"},
        "spec": {"replicas": 1, "auth": {"enabled": False}},  # explicitly open (auth is on by default)
    }
    _http(env).request("POST", f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{NS}/redisclusters", rdc)

    async def running() -> str | None:
        path = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{NS}/redisclusters/big"
        status = _http(env).get(path).get("status") or {}
        return cast(str, status.get("currentMaster")) if status.get("phase") == "Running" else None

    master = await eventually(running, within=180, what="the cluster Running", interval=0.2)
    return str(_http(env).get(f"/api/v1/namespaces/{NS}/pods/{master}")["status"]["podIP"])


async def _measure(env: Environment, store: ObjectStore, ip: str, size: int, repeats: int) -> dict[str, Any]:
    raw_mbps, job_mbps, rss = [], [], []
    for rep in range(repeats):
        seconds, nbytes = await asyncio.to_thread(_raw, store, ip, f"raw/{size}-{rep}.rdb")
        raw_mbps.append(nbytes / seconds / 1e6)
        name = f"b{size}-{rep}"
        started = time.monotonic()
        path = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{NS}/redisbackups"
        _http(env).request("POST", path, _backup(name, store))
        status = await _until_succeeded(env, name)
        job_seconds = time.monotonic() - started
        stored = int(status["sizeBytes"])
        job_mbps.append(stored / job_seconds / 1e6)
        rss.append(_worker_rss(env, name))
        print(
            f"  {size} MiB rep {rep + 1}: raw {raw_mbps[-1]:.1f} MB/s ({seconds:.1f} s), job "
            f"{job_mbps[-1]:.1f} MB/s ({job_seconds:.1f} s, RDB {stored / MiB:.0f} MiB), "
            f"worker peak RSS {rss[-1] / MiB:.1f} MiB",
            flush=True,
        )
    return {
        "size_mib": size,
        "raw": statistics.median(raw_mbps),
        "job": statistics.median(job_mbps),
        "rss": max(rss),
    }


def _report(results: list[dict[str, Any]]) -> None:
    print()
    print(f"{'dataset':>8} {'raw MB/s':>9} {'job MB/s':>9} {'ratio':>6} {'worker peak RSS':>16}")
    for r in results:
        ratio, rss = r["job"] / r["raw"], r["rss"] / MiB
        print(f"{r['size_mib']:>5} MiB {r['raw']:>9.1f} {r['job']:>9.1f} {ratio:>6.2f} {rss:>12.1f} MiB")
    print()
    for r in results:
        print(f"RATIO backup_vs_raw_{r['size_mib']}MiB {r['job'] / r['raw']:.3f}")
    print(f"RATIO backup_vs_raw {results[-1]['job'] / results[-1]['raw']:.3f}")
    if len(results) > 1:
        print(f"RATIO worker_rss_largest_vs_smallest {results[-1]['rss'] / results[0]['rss']:.3f}")


async def bench(sizes_mib: list[int], repeats: int, state: Path) -> None:
    env = Environment(crd_directory_paths=[CRDS])
    store = ObjectStore(state / "s3")
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    print("backup_bench: starting the control plane, local node and object store", flush=True)
    env.start()
    try:
        store.start()
        store.create_bucket(BUCKET)
        env.create_namespace(NS)
        config = await load_kubeconfig(env.kubeconfig_path)
        options = OperatorOptions(
            namespace=NS, metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0"
        )
        task = asyncio.create_task(build_operator(config, options).manager.start(stop))
        ip = await _start_cluster(env, store)
        client = aioredis.Redis(host=ip, port=6379, socket_timeout=60)
        loaded = 0
        results = []
        for size in sorted(sizes_mib):
            want = size * MiB // (VALUE + 40)
            print(f"backup_bench: loading {size} MiB ({want} keys of {VALUE} random bytes)", flush=True)
            await _load(client, loaded, want)
            loaded = want
            results.append(await _measure(env, store, ip, size, repeats))
        await client.aclose()
        _report(results)
    finally:
        stop.set()
        if task is not None:
            try:
                await asyncio.wait_for(task, 40)
            except Exception:
                task.cancel()
        store.cleanup()
        env.stop()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.backup_bench", description=__doc__.splitlines()[0])
    p.add_argument(
        "--sizes", default="100,1024", help="dataset sizes in MiB, comma-separated (default 100,1024)"
    )
    p.add_argument("--repeats", type=int, default=3, help="repetitions per size and side (default 3)")
    args = p.parse_args()
    state = Path(tempfile.mkdtemp(prefix="backup-bench-"))
    asyncio.run(bench([int(s) for s in args.sizes.split(",")], args.repeats, state))


if __name__ == "__main__":
    main()
