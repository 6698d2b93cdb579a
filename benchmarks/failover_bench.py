"""Failover time of the RedisCluster operator, median over repeated master kills.

``python -m benchmarks.failover_bench [--kills 5] [--down-after-ms 2000]``: starts the local control
plane and node, runs the operator as its own process (as ``make demo`` does), creates a 3-pod
cluster, then repeatedly: waits until it is Running, writes continuously with ``WAIT 1``, crashes
the master (``SHUTDOWN NOSAVE``) and measures

- *promoted*: crash → another pod answers ``ROLE`` as master (asked directly, every 20 ms);
- *first write*: crash → the first write acknowledged by the new master (what clients see);
- *running*: crash → phase Running again (old master back as a replica, all in sync).

It also counts acknowledged writes missing afterwards (should be 0). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from examples.rediscluster.demo import ROOT, operator_process
from pyctrl.envtest import Environment


class Bench:
    def __init__(self, env: Environment, name: str) -> None:
        self.env = env
        self.base = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/default/redisclusters/{name}"
        self.name = name

    def status(self) -> dict[str, Any]:
        return dict(self.env.http.get(self.base).get("status") or {})

    def pod_ip(self, pod: str) -> str:
        return str(self.env.http.get(f"/api/v1/namespaces/default/pods/{pod}")["status"]["podIP"])

    async def until(self, check: Any, within: float) -> float:
        """Poll ``check`` until true; the monotonic time it became true."""
        deadline = time.monotonic() + within
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError("benchmark step timed out")
            await asyncio.sleep(0.05)  # poll interval
        return time.monotonic()


async def role(ip: str) -> str:
    """What Redis at ``ip`` says it is ("master", "slave"), or "down" (no answer within 0.3 s)."""
    client = aioredis.Redis(host=ip, socket_timeout=0.3, socket_connect_timeout=0.3)
    try:
        reply = await client.execute_command("ROLE")  # type: ignore[no-untyped-call]
        return bytes(reply[0]).decode()
    except Exception:
        return "down"
    finally:
        await client.aclose()


async def find_master(ips: dict[str, str]) -> str | None:
    """The pod that answers as master, asked directly (what a client finds fastest)."""
    for pod, ip in ips.items():
        if await role(ip) == "master":
            return pod
    return None


async def writer(ips: dict[str, str], acked: list[tuple[float, int, str]], stop: asyncio.Event) -> None:
    """SET + WAIT 1 in a loop against whichever pod is master; keep the acknowledged keys."""
    i = 0
    while not stop.is_set():
        master = await find_master(ips)
        if master is None:
            await asyncio.sleep(0.02)  # poll interval until some pod is master again
            continue
        client = aioredis.Redis(host=ips[master], socket_timeout=1, socket_connect_timeout=1)
        try:
            while not stop.is_set():
                await client.set(f"k{i}", i)
                if await client.wait(1, 500) >= 1:
                    acked.append((time.monotonic(), i, master))
                i += 1
        except Exception:
            await asyncio.sleep(0.02)  # backoff: the master is gone, look for the next one
        finally:
            await client.aclose()


async def one_kill(b: Bench, ips: dict[str, str]) -> dict[str, float]:
    await b.until(lambda: b.status().get("phase") == "Running", 180)
    old = b.status()["currentMaster"]
    acked: list[tuple[float, int, str]] = []
    stop = asyncio.Event()
    task = asyncio.create_task(writer(ips, acked, stop))
    try:
        await b.until(lambda: len(acked) > 50, 30)
        victim = aioredis.Redis(host=ips[old], socket_timeout=1)
        crashed = time.monotonic()
        with contextlib.suppress(Exception):
            await victim.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
        await victim.aclose()
        others = {p: ip for p, ip in ips.items() if p != old}
        while await find_master(others) is None:
            if time.monotonic() > crashed + 60:
                raise TimeoutError("no new master within 60 s")
            await asyncio.sleep(0.02)  # poll interval, deadline above
        promoted = time.monotonic()
        first = await b.until(lambda: any(m != old and t > crashed for t, _, m in acked), 60)
        running = await b.until(lambda: b.status().get("phase") == "Running", 120)
    finally:
        stop.set()
        await task
    new = b.status()["currentMaster"]
    client = aioredis.Redis(host=ips[new], socket_timeout=2)
    missing = sum([await client.get(f"k{i}") is None for _, i, _ in acked])
    await client.aclose()
    return {
        "promoted_s": promoted - crashed,
        "first_write_s": first - crashed,
        "running_s": running - crashed,
        "acked": float(len(acked)),
        "lost": float(missing),
    }


async def run(kills: int, down_after_ms: int) -> list[dict[str, float]]:
    with (
        Environment(crd_directory_paths=[ROOT / "crds"]) as env,
        operator_process(env, env.log_dir / "operator.log"),
    ):
        env.http.request(
            "POST",
            "/apis/redis.pyctrl.dev/v1alpha1/namespaces/default/redisclusters",
            {
                "apiVersion": "redis.pyctrl.dev/v1alpha1",
                "kind": "RedisCluster",
                "metadata": {"name": "bench"},
                "spec": {"replicas": 3, "downAfterMilliseconds": down_after_ms},
            },
        )
        b = Bench(env, "bench")
        await b.until(lambda: b.status().get("phase") == "Running", 180)
        ips = {p: b.pod_ip(p) for p in ("bench-0", "bench-1", "bench-2")}  # stable across restarts
        results = []
        for k in range(kills):
            r = await one_kill(b, ips)
            results.append(r)
            print(
                f"kill {k + 1}: another pod answers as master {r['promoted_s']:.2f}s, first acknowledged "
                f"write {r['first_write_s']:.2f}s, Running {r['running_s']:.2f}s, "
                f"acknowledged writes lost {r['lost']:.0f}/{r['acked']:.0f}",
                flush=True,
            )
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--down-after-ms", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    results = asyncio.run(run(args.kills, args.down_after_ms))
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(
        f"failover (downAfterMilliseconds={args.down_after_ms}, {len(results)} kills), medians: "
        f"promoted {med['promoted_s']:.2f}s, first write {med['first_write_s']:.2f}s, "
        f"Running {med['running_s']:.2f}s, lost writes {sum(r['lost'] for r in results):.0f}"
    )
    print(f"RATIO failover_first_write_vs_down_after {med['first_write_s'] * 1000 / args.down_after_ms:.2f}")
    if args.json:
        args.json.write_text(
            json.dumps({"down_after_ms": args.down_after_ms, "runs": results, "median": med}, indent=2)
        )


if __name__ == "__main__":
    main()
