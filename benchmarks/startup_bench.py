"""Start-up cost of the peers, fresh processes, interleaved: ``python -m benchmarks.startup_bench``.

Each *variant* is a peer module run from a source tree (``label=TREE:MODULE``; the tree comes first
on ``sys.path``, so a second checkout of pyctrl, e.g. a ``git worktree`` at an older commit, can be
compared with this one under the same interpreter). Modes:

- ``import``: ``python -c "import MODULE"``; the child's CPU seconds (user + system, from
  ``wait4``) and peak RSS (its ``VmHWM``);
- ``cluster`` (needs ``--kubeconfig``, a control plane with ``peers/crd.yaml``): the peer started
  on a fresh empty namespace, spawn to the convergence of its first Item (the benchmark's
  *start-up*: seconds and the CPU used by then), then, on one namespace holding ``--objects``
  converged Items, a fresh process's RSS once a new Item converged and it is quiet (*RSS idle*).

Every round runs each variant once, the order rotated each round; medians are printed, with the
ratios of every variant to the first (of the medians, and the median of the per-round ratios:
*paired*, which the machine's drift between rounds disturbs less). Figures are printed, never
asserted.

``--bytecode`` sets up each tree's ``pyctrl`` and ``benchmarks`` bytecode first: ``compile`` (as a
``pip install`` leaves an installed package) or ``remove`` (what a checkout run with
``PYTHONDONTWRITEBYTECODE=1`` has: every module compiled from source at each start); ``keep``
(the default) leaves the trees as they are.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import _procs
from benchmarks._cluster import Convergence, create_items, create_namespace, delete_namespace, item_names
from pyctrl.client import load_config
from pyctrl.client.rest import Transport

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Variant:
    label: str
    tree: Path
    module: str
    figures: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.figures.setdefault(name, []).append(value)


def _variant(spec: str) -> Variant:
    label, _, rest = spec.partition("=")
    tree, _, module = rest.rpartition(":")
    return Variant(label, Path(tree or REPO).resolve(), module)


def _bytecode(tree: Path, how: str) -> None:
    for package in ("pyctrl", "benchmarks"):
        if how == "compile":
            compileall.compile_dir(tree / package, quiet=1)
        elif how == "remove":
            for cache in (tree / package).rglob("__pycache__"):
                shutil.rmtree(cache)


def _rotated(variants: list[Variant], round_no: int) -> list[Variant]:
    k = round_no % len(variants)
    return variants[k:] + variants[:k]


#: the child's peak RSS: ``VmHWM`` belongs to its own address space (``ru_maxrss`` from ``wait4``
#: would count the orchestrator's pages the child had before its ``exec``)
_HWM = "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))"


def _import_once(v: Variant) -> None:
    code = f"import {v.module}; {_HWM}"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=v.tree, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{v.label}: import failed ({proc.returncode})")
    v.add("import CPU s", usage.ru_utime + usage.ru_stime)
    v.add("import RSS MiB", int(out) / 1024)


async def _cluster_once(
    t: Transport, v: Variant, *, kubeconfig: Path, idle_ns: str, tag: str, log: Path
) -> None:
    """Start-up on a fresh empty namespace, then RSS idle on ``idle_ns`` (its Items converged)."""
    argv = [sys.executable, "-m", v.module, "--kubeconfig", str(kubeconfig), "--concurrency", "16"]
    ns = f"startup-{tag}"
    await create_namespace(t, ns)
    try:
        async with Convergence(t, ns) as watch:
            await create_items(t, ns, ["sentinel"], parallel=1)
            started = time.perf_counter()
            child = _procs.start(v.label, [*argv, "--namespace", ns], log, cwd=v.tree)
            try:
                converged = await watch.wait(["sentinel"], 180.0, alive=child.alive)
                v.add("start-up CPU s", child.cpu_seconds())
                v.add("start-up s", converged - started)
                await _procs.wait_quiet(child)
                v.add("RSS at start MiB", child.rss_mib())
            finally:
                child.stop()
    finally:
        await delete_namespace(t, ns)
    async with Convergence(t, idle_ns) as watch:
        await create_items(t, idle_ns, [tag], parallel=1)
        child = _procs.start(v.label, [*argv, "--namespace", idle_ns], log, cwd=v.tree)
        try:
            await watch.wait([tag], 180.0, alive=child.alive)
            await _procs.wait_quiet(child)
            v.add("RSS idle MiB", child.rss_mib())
        finally:
            child.stop()


async def _cluster(variants: list[Variant], a: argparse.Namespace) -> None:
    t = Transport(await load_config(str(a.kubeconfig)))
    idle_ns = "startup-idle"
    log_dir = Path(a.log_dir)
    try:
        await create_namespace(t, idle_ns)
        names = item_names(a.objects)
        async with Convergence(t, idle_ns) as watch:  # converge the Items once, with the first variant
            await create_items(t, idle_ns, names)
            first = variants[0]
            argv = [sys.executable, "-m", first.module, "--kubeconfig", str(a.kubeconfig)]
            child = _procs.start(
                "prepare", [*argv, "--namespace", idle_ns], log_dir / "prepare.log", cwd=first.tree
            )
            try:
                await watch.wait(names, 600.0, alive=child.alive)
            finally:
                child.stop()
        for r in range(a.rounds):
            for v in _rotated(variants, r):
                tag = f"r{r}-{v.label}"
                await _cluster_once(
                    t, v, kubeconfig=a.kubeconfig, idle_ns=idle_ns, tag=tag, log=log_dir / f"{tag}.log"
                )
                print(f"round {r} {v.label}: " + _last(v), flush=True)
    finally:
        await delete_namespace(t, idle_ns)
        await t.close()


def _last(v: Variant) -> str:
    return "  ".join(f"{k} {vals[-1]:.3f}" for k, vals in v.figures.items())


def _report(variants: list[Variant]) -> None:
    base = variants[0]
    for name in base.figures:
        print(f"{name}:")
        for v in variants:
            vals = v.figures.get(name, [])
            med = statistics.median(vals)
            ratio = med / statistics.median(base.figures[name])
            paired = statistics.median(x / y for x, y in zip(vals, base.figures[name], strict=True))
            each = " ".join(f"{x:.3f}" for x in vals)
            print(f"  {v.label:<12} median {med:8.3f}  ratio {ratio:5.3f}  paired {paired:5.3f}  ({each})")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["import", "cluster"])
    p.add_argument("variants", nargs="+", help="LABEL=TREE:MODULE (TREE empty: this checkout)")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--kubeconfig", type=Path)
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--log-dir", default="/tmp/startup-bench")
    p.add_argument("--bytecode", choices=["keep", "compile", "remove"], default="keep")
    a = p.parse_args()
    variants = [_variant(s) for s in a.variants]
    for tree in {v.tree for v in variants}:
        _bytecode(tree, a.bytecode)
    if a.mode == "import":
        for r in range(a.rounds):
            for v in _rotated(variants, r):
                _import_once(v)
    else:
        if a.kubeconfig is None:
            p.error("cluster needs --kubeconfig")
        asyncio.run(_cluster(variants, a))
    _report(variants)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
