"""Memory of the operator's slot views for a large ``mode: cluster``: slots held as runs vs sets.

``python -m benchmarks.slot_views_bench [--shards 100] [--replicas 5]`` builds the ``CLUSTER NODES``
reply of every pod of a cluster of ``--shards`` masters with ``--replicas`` replicas each (the
slots split evenly, one contiguous range per master; each reply from its pod's point of view),
parses them all with the operator's parser (``cluster.nodes.parse_cluster_nodes``) and measures,
with ``tracemalloc``, the memory retained by:

- **slot views (runs)**: per pod view, node id -> slots as the operator holds them now
  (``SlotSet``: runs of two 16-bit numbers);
- **slot views (sets)**: the same maps with each node's slots expanded into a ``frozenset`` of
  ints, as the operator held them before (one Python int per slot per view);
- **whole views**: every ``NodeFacts`` (every peer of every view, its flags, ids, addresses and
  slots), what the operator holds after observing the cluster once.

Printed: each figure in MiB, the aim (slot views under 64 MiB) met or not, and last
``RATIO slot_views_sets_vs_runs`` = sets / runs (> 1: runs are smaller). Figures are printed,
never asserted; nothing is started (pure Python, a few seconds; the set form needs ~1 GiB for the
default size while it is measured).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from examples.rediscluster.cluster.nodes import NodeFacts, parse_cluster_nodes
from examples.rediscluster.cluster.slots import even_layout

MIB = 2**20


def replies(shards: int, replicas: int) -> list[str]:
    """The CLUSTER NODES reply of every pod (masters first, then their replicas)."""
    masters = [f"{i:040x}" for i in range(shards)]
    pods = [(m, "master", "-") for m in masters]
    pods += [(f"{shards + i:040x}", "slave", masters[i % shards]) for i in range(shards * replicas)]
    layout = even_layout(shards)
    lines = []
    for n, (node, role, master) in enumerate(pods):
        slots = f" {layout[n].start}-{layout[n].stop - 1}" if role == "master" else ""
        ip = f"10.{n // 65536}.{n // 256 % 256}.{n % 256}"
        lines.append(f"{node} {ip}:6379@16379 {role} {master} 0 1700000000000 {n} connected{slots}")
    out = []
    for n in range(len(pods)):
        mine = lines[n].replace(" master ", " myself,master ", 1).replace(" slave ", " myself,slave ", 1)
        out.append("\n".join([*lines[:n], mine, *lines[n + 1 :]]) + "\n")
    return out


def retained(build: Callable[[], Any]) -> tuple[Any, int]:
    """What ``build()`` returns and the bytes it still holds (tracemalloc, after a collection)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = build()
        gc.collect()
        return result, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def facts(text: str) -> NodeFacts:
    me, peers, migrating, importing = parse_cluster_nodes(text)
    return NodeFacts(me, peers, migrating, importing, cluster_state="ok")


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.slot_views_bench", description=__doc__.split("\n")[0]
    )
    p.add_argument("--shards", type=int, default=100)
    p.add_argument("--replicas", type=int, default=5, help="replicas per shard")
    args = p.parse_args()
    texts = replies(args.shards, args.replicas)
    pods = len(texts)
    print(f"slot_views: {args.shards} shards x {args.replicas} replicas: {pods} views of {pods} nodes")
    started = time.perf_counter()
    for text in texts:
        facts(text)
    print(f"slot_views: parsing the {pods} replies takes {time.perf_counter() - started:.1f} s")
    views, whole = retained(lambda: [facts(t) for t in texts])
    print(f"slot_views: whole views (runs)    {whole / MIB:8.1f} MiB")

    runs, runs_bytes = retained(lambda: [{i: p.slots for i, p in f.peers.items()} for f in views])
    print(f"slot_views: slot views (runs)     {runs_bytes / MIB:8.1f} MiB")
    del runs
    _, sets_bytes = retained(lambda: [{i: frozenset(p.slots) for i, p in f.peers.items()} for f in views])
    print(f"slot_views: slot views (sets)     {sets_bytes / MIB:8.1f} MiB  (the former representation)")
    met = "met" if runs_bytes < 64 * MIB else "NOT met"
    print(f"slot_views: aim (slot views under 64 MiB): {met}")
    print(f"RATIO slot_views_sets_vs_runs {sets_bytes / runs_bytes:.1f}")


if __name__ == "__main__":
    main()
