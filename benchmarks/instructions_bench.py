"""Instructions per reconciled object, counted by valgrind: a measure no other tenant can move.

Run: ``python -m benchmarks.instructions_bench [--peers pyctrl,raw] [--small 500] [--large 1500]``.

CPU seconds on this shared 2-core machine move by tens of percent between runs with nothing
changed (benchmarks/README.md); instructions do not. For each program, on one local control plane
(no node), a backlog of ``--small`` Items and then one of ``--large`` Items is drained by the
program running under ``valgrind --tool=cachegrind``: started on the existing Items, stopped once
every one converged. The difference of the two totals over the difference of the Item counts is
the program's instructions per object, its start-up, initial list and shutdown cancelled out.
Valgrind slows a program about 50-fold, which batches its watch events more than a real run would;
the figure compares programs and commits, it does not predict seconds. Every process started is
stopped on the way out. Nothing is asserted: figures are printed, with ``RATIO
instructions_per_object_vs_raw`` when both pyctrl and the raw loop ran.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks import _procs
from benchmarks._cluster import Convergence, create_items, create_namespace, item_names
from benchmarks._peers import PEERS, REPO
from pyctrl.client import ApiClient, load_kubeconfig
from pyctrl.envtest import Environment

CRD = REPO / "benchmarks" / "peers" / "crd.yaml"
_TOTAL = re.compile(r"I\s+refs:\s+([\d,]+)")


async def _drain(kubeconfig: Path, key: str, n: int, logs: Path) -> int:
    """Instructions of ``key``'s program draining a backlog of ``n`` Items (start to stop)."""
    peer = PEERS[key]
    ns = f"icount-{key.replace('_', '-')}-{n}"
    async with ApiClient(await load_kubeconfig(kubeconfig)) as client:
        await create_namespace(client.rest, ns)
        names = item_names(n)
        await create_items(client.rest, ns, names)
        async with Convergence(client.rest, ns, "i:") as watch:
            argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
            log = logs / f"{ns}.log"
            child = _procs.start(key, [*argv, *peer.argv(kubeconfig, ns, 16, "i:")], log, cwd=REPO)
            try:
                await watch.wait(names, 1800.0, alive=child.alive)
                await _procs.wait_quiet(child, timeout=120.0)
            finally:
                child.stop(grace=300.0)  # valgrind writes its totals on the way out
    found = _TOTAL.findall(log.read_text(errors="replace"))
    if not found:
        raise RuntimeError(f"{key}: no instruction total in {log}{child.tail(8)}")
    return int(found[-1].replace(",", ""))


async def _measure(kubeconfig: Path, keys: list[str], small: int, large: int, logs: Path) -> dict[str, float]:
    per_object: dict[str, float] = {}
    for key in keys:
        low = await _drain(kubeconfig, key, small, logs)
        high = await _drain(kubeconfig, key, large, logs)
        per_object[key] = (high - low) / (large - small)
        print(
            f"instructions: {key:<18} {small} Items {low:>15,}  {large} Items {high:>15,}"
            f"  per object {per_object[key]:>12,.0f}",
            flush=True,
        )
    return per_object


def main() -> int:
    summary = __doc__.split("\n\n")[0]
    p = argparse.ArgumentParser(prog="python -m benchmarks.instructions_bench", description=summary)
    p.add_argument("--peers", default="pyctrl,raw", help="comma-separated: pyctrl, raw, kopf")
    p.add_argument("--small", type=int, default=500)
    p.add_argument("--large", type=int, default=1500)
    a = p.parse_args()
    keys = [k.strip() for k in a.peers.split(",") if k.strip()]
    if shutil.which("valgrind") is None:
        print("instructions_bench: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    if unknown := [k for k in keys if k not in PEERS or PEERS[k].command is None]:
        print(f"instructions_bench: not a Python peer here: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if a.large <= a.small:
        print("instructions_bench: --large must exceed --small", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="icount-") as tmp,
        Environment(local_node=False, crd_directory_paths=[CRD]) as env,
    ):
        per_object = asyncio.run(_measure(env.kubeconfig_path, keys, a.small, a.large, Path(tmp)))
    if "pyctrl" in per_object and "raw" in per_object:
        print(f"RATIO instructions_per_object_vs_raw {per_object['pyctrl'] / per_object['raw']:.3f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("instructions_bench: interrupted; every process it started was stopped", file=sys.stderr)
        sys.exit(130)
