"""One process caching the Secrets of a namespace, in full or metadata only; prints its figures.

``python -m benchmarks._secrets_cache --kubeconfig K --namespace NS --mode full|metadata`` starts a
pyctrl :class:`~pyctrl.cache.Cache` limited to ``NS`` with an informer of ``Secret`` (``full``) or
of ``PartialObjectMetadata.of(Secret)`` (``metadata``), waits for its sync and prints one JSON line:
``rss_before_mib`` (VmRSS once imported and connected, before the informer), ``rss_after_mib``
(synced, after a full garbage collection), ``sync_s`` (informer start → synced) and ``objects``.
Run by ``benchmarks/cache_bench.py`` so each mode's RSS is a process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from pathlib import Path

from pyctrl.cache import Cache
from pyctrl.client import ApiClient, PartialObjectMetadata, Secret, load_kubeconfig


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def measure(kubeconfig: Path, namespace: str, mode: str) -> dict[str, float]:
    kind = Secret if mode == "full" else PartialObjectMetadata.of(Secret)
    async with ApiClient(await load_kubeconfig(kubeconfig)) as client:
        await client.mapping(Secret)  # discovery done: what remains is the informer's own cost
        gc.collect()
        before = rss_mib()
        cache = Cache(client, default_namespaces=[namespace])
        informer = await cache.get_informer(kind)
        start = time.perf_counter()
        async with cache:
            if not await informer.wait_for_sync(600):
                raise RuntimeError(f"the {mode} informer did not sync within 600 s")
            sync = time.perf_counter() - start
            gc.collect()
            after = rss_mib()
            objects = sum(len(i.store) for i in informer.informers.values())
    return {"rss_before_mib": before, "rss_after_mib": after, "sync_s": sync, "objects": objects}


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks._secrets_cache", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--mode", choices=("full", "metadata"), required=True)
    a = p.parse_args()
    print(json.dumps(asyncio.run(measure(a.kubeconfig, a.namespace, a.mode))), flush=True)


if __name__ == "__main__":
    main()
