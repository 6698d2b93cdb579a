"""envtest start-up time with one node against several: ``python -m benchmarks.envtest_bench``.

Starts (and stops) ``Environment(nodes=1)`` and ``Environment(nodes=N)`` alternately, ``--runs``
times each, and prints every run, the medians and ``RATIO envtest_start_<N>_nodes_vs_1 <value>``.
A start is timed from ``Environment.start()`` to its return: every component healthy, every node
Ready. Stops are timed too. Every control plane is stopped, also on failure and Ctrl-C.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from pyctrl.envtest import Environment


def _one(nodes: int) -> tuple[float, float]:
    env = Environment(nodes=nodes)
    began = time.monotonic()
    try:
        env.start()
        started = time.monotonic() - began
    finally:
        stopping = time.monotonic()
        env.stop()
    return started, time.monotonic() - stopping


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.envtest_bench", description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="starts per node count (default 5)")
    parser.add_argument("--nodes", type=int, default=3, help="the several-nodes count (default 3)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.nodes < 2:
        parser.error("--runs must be >= 1 and --nodes >= 2")
    starts: dict[int, list[float]] = {1: [], args.nodes: []}
    stops: dict[int, list[float]] = {1: [], args.nodes: []}
    for run in range(args.runs):
        for count in (1, args.nodes) if run % 2 == 0 else (args.nodes, 1):
            started, stopped = _one(count)
            starts[count].append(started)
            stops[count].append(stopped)
            print(f"run {run + 1}: {count} node(s): start {started:.1f} s, stop {stopped:.1f} s", flush=True)
    one, many = statistics.median(starts[1]), statistics.median(starts[args.nodes])
    print(f"median start: 1 node {one:.1f} s, {args.nodes} nodes {many:.1f} s")
    print(
        f"median stop: 1 node {statistics.median(stops[1]):.1f} s, "
        f"{args.nodes} nodes {statistics.median(stops[args.nodes]):.1f} s"
    )
    print(f"RATIO envtest_start_{args.nodes}_nodes_vs_1 {many / one:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
