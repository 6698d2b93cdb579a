"""Online resharding of ``mode: cluster`` beside ``redis-cli --cluster rebalance``, same move, same data.

``python -m benchmarks.reshard_bench [--keys 1000000] [--value-bytes 64]`` starts the local control
plane, its node and the operator (its own process), and measures, in one run:

- **operator**: a RedisCluster ``mode: cluster, shards: 3, replicasPerShard: 0`` filled with
  ``--keys`` keys through redis-py's cluster client, then ``shards: 4``: the time from the patch
  until the operator reports the move done (``status.slotsToMove`` 0, Resharding False) — a
  quarter of the slots and of the keys move to the new shard;
- **redis-cli**: four plain ``redis-server --cluster-enabled yes`` processes on loopback, three
  holding the 16384 slots and the same keys, then ``redis-cli --cluster rebalance
  --cluster-use-empty-masters`` (its default pipeline of 10 keys per MIGRATE): the same move.

During each move a cluster-aware client keeps reading and writing random keys; the commands it saw
fail are counted. Printed per system: seconds, keys moved, keys/s, MB/s (keys moved x (key +
value bytes)), client errors; then ``RATIO reshard_vs_redis_cli`` = operator keys/s / redis-cli
keys/s. Figures are printed, never asserted; everything started is stopped on any exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from benchmarks import _procs
from examples.rediscluster_demo.harness import ROOT, operator_process
from pyctrl.envtest import Environment
from pyctrl.envtest._process import free_port


@dataclass
class Result:
    system: str
    seconds: float
    keys_moved: int
    client_errors: int
    client_ops: int

    def line(self, key_bytes: int) -> str:
        rate = self.keys_moved / self.seconds if self.seconds else 0.0
        mb = self.keys_moved * key_bytes / 1e6 / self.seconds if self.seconds else 0.0
        return (
            f"{self.system:10s} {self.seconds:8.1f} s  {self.keys_moved:9d} keys moved  {rate:10.0f} keys/s  "
            f"{mb:7.2f} MB/s  client errors {self.client_errors} of {self.client_ops} commands"
        )


async def fill(host: str, port: int, keys: int, value: str) -> None:
    client = RedisCluster(host=host, port=port, socket_timeout=30)
    try:
        step = 5000
        for start in range(0, keys, step):
            pipe = client.pipeline()
            for i in range(start, min(keys, start + step)):
                pipe.set(f"k{i}", value)
            await pipe.execute()
            if start % 200000 == 0:
                print(f"  filled {start}/{keys} keys", flush=True)
    finally:
        await client.aclose()


async def traffic(host: str, port: int, keys: int, stop: asyncio.Event) -> tuple[int, int]:
    """Reads and writes of random keys until ``stop``; (commands, failed commands)."""
    client = RedisCluster(host=host, port=port, socket_timeout=5)
    ops = errors = 0
    try:
        while not stop.is_set():
            key = f"k{random.randrange(keys)}"
            try:
                await client.get(key)
                await client.set(key, "x" * 8)
                ops += 2
            except Exception:
                errors += 1
                ops += 1
    finally:
        await client.aclose()
    return ops, errors


async def measure(name: str, host: str, port: int, keys: int, move: Callable[[], Awaitable[int]]) -> Result:
    stop = asyncio.Event()
    load = asyncio.create_task(traffic(host, port, keys, stop))
    started = time.monotonic()
    try:
        moved = await move()
    finally:
        stop.set()
        ops, errors = await load
    return Result(name, time.monotonic() - started, moved, errors, ops)


async def _command(host: str, port: int, *args: str | int) -> Any:
    client = aioredis.Redis(host=host, port=port, socket_timeout=10, decode_responses=True)
    try:
        return await client.execute_command(*args)  # type: ignore[no-untyped-call]
    finally:
        await client.aclose()


async def _until_answers(port: int) -> None:
    for _ in range(100):
        with contextlib.suppress(Exception):
            await _command("127.0.0.1", port, "PING")
            return
        await asyncio.sleep(0.1)  # redis-server start-up
    raise TimeoutError(f"redis-server on port {port} does not answer")


# -- the operator --------------------------------------------------------------------------------


async def _until(check: Callable[[], bool], what: str, within: float) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.5)  # poll interval


async def operator_run(env: Environment, keys: int, value: str, workdir: Path) -> Result:
    base = "/apis/redis.pyctrl.dev/v1alpha1/namespaces/default/redisclusters"
    body = {
        "apiVersion": "redis.pyctrl.dev/v1alpha1",
        "kind": "RedisCluster",
        "metadata": {"name": "bench"},
        # explicitly open (auth is on by default): the clients below give no password
        "spec": {"mode": "cluster", "shards": 3, "replicasPerShard": 0, "auth": {"enabled": False}},
    }
    env.http.request("POST", base, body)

    def status() -> dict[str, object]:
        return dict(env.http.get(f"{base}/bench").get("status") or {})

    def balanced(shards: int) -> bool:
        s = status()
        shard_list = s.get("shards") or []
        return s.get("phase") == "Running" and isinstance(shard_list, list) and len(shard_list) == shards

    print("operator: waiting for 3 shards", flush=True)
    await _until(lambda: balanced(3), "3 shards Running", 300)

    def pod_ip(name: str) -> str:
        pods = env.http.get(
            "/api/v1/namespaces/default/pods?labelSelector=app.kubernetes.io/instance%3Dbench"
        )
        return str(next(p["status"]["podIP"] for p in pods["items"] if p["metadata"]["name"] == name))

    ip = pod_ip("bench-0")
    print(f"operator: filling {keys} keys", flush=True)
    await fill(ip, 6379, keys, value)

    async def move() -> int:
        env.http.request(
            "PATCH", f"{base}/bench", {"spec": {"shards": 4}}, content_type="application/merge-patch+json"
        )
        await _until(lambda: bool(status().get("resharding")), "the resharding to start", 120)
        await _until(lambda: balanced(4) and not status().get("resharding"), "4 balanced shards", 3600)
        return int(await _command(pod_ip("bench-3"), 6379, "DBSIZE"))

    return await measure("operator", ip, 6379, keys, move)


# -- redis-cli --------------------------------------------------------------------------------------


async def redis_cli_run(keys: int, value: str, workdir: Path) -> Result:
    ports: list[int] = []
    while len(ports) < 4:  # the cluster bus listens on port + 10000: at most 55535
        port = free_port()
        if port <= 50000 and port not in ports:
            ports.append(port)
    children = []
    try:
        for port in ports:
            d = workdir / f"node-{port}"
            d.mkdir()
            argv = [
                "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf", "--dir", str(d), "--save", "", "--appendonly", "no",
            ]  # fmt: skip
            children.append(_procs.start(f"redis-{port}", argv, d / "log", cwd=d))
        for port in ports:
            await _until_answers(port)
        for i, port in enumerate(ports[:3]):
            first, last = i * 16384 // 3, (i + 1) * 16384 // 3 - 1
            await _command("127.0.0.1", port, "CLUSTER", "ADDSLOTSRANGE", first, last)
        for port in ports[1:]:
            await _command("127.0.0.1", ports[0], "CLUSTER", "MEET", "127.0.0.1", port)
        for _ in range(120):
            info = str(await _command("127.0.0.1", ports[0], "CLUSTER", "INFO"))
            if "cluster_state:ok" in info and "cluster_known_nodes:4" in info:
                break
            await asyncio.sleep(0.5)  # poll the gossip
        print(f"redis-cli: filling {keys} keys", flush=True)
        await fill("127.0.0.1", ports[0], keys, value)

        async def move() -> int:
            proc = await asyncio.create_subprocess_exec(
                "redis-cli", "--cluster", "rebalance", f"127.0.0.1:{ports[0]}", "--cluster-use-empty-masters",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            await proc.wait()
            return int(await _command("127.0.0.1", ports[3], "DBSIZE"))

        return await measure("redis-cli", "127.0.0.1", ports[0], keys, move)
    finally:
        for child in children:
            child.stop()


async def main_async(args: argparse.Namespace) -> int:
    value = "v" * args.value_bytes
    key_bytes = len(f"k{args.keys}") + args.value_bytes
    workdir = Path(tempfile.mkdtemp(prefix="reshard-bench-"))
    try:
        cli = await redis_cli_run(args.keys, value, workdir)
        print(cli.line(key_bytes), flush=True)
        with (
            Environment(crd_directory_paths=[ROOT / "crds"]) as env,
            operator_process(env, workdir / "operator.log"),
        ):
            op = await operator_run(env, args.keys, value, workdir)
        print(op.line(key_bytes), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    ratio = (op.keys_moved / op.seconds) / (cli.keys_moved / cli.seconds)
    print(f"RATIO reshard_vs_redis_cli {ratio:.2f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reshard_bench", description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=64)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(main_async(args))
    return 130


if __name__ == "__main__":
    sys.exit(main())
