"""``python -m benchmarks`` (``make bench``): pyctrl against kopf, controller-runtime and a raw loop.

Order: the workqueue and cache benchmarks (their own processes); the controller-runtime peer's
build; one local control plane (etcd + kube-apiserver + kube-controller-manager, no node) with the
test CRD; ``--runs`` rounds of ``--objects`` Items for every program, round-robin with the order
rotated each round so the machine's noise hits all alike; ``--memory-rounds`` rounds of
``--memory-objects``; ``--large-rounds`` backlog-only rounds of ``--large-objects`` for
``--large-peers`` (the cost per object at 100,000: the Items are created once, every program then
starts on them with a mark of its own); then the table, the cost table (per object, start-up
excluded), ``results/cost.png``, ``results/peers.json``, ``results/peers.png``, the README section,
and last the ``RATIO <name> <value>`` lines. Each run of the ``--runs`` and ``--memory-rounds``
rounds also has a backlog phase (``--no-backlog``: none): a fresh program started on the run's
converged Items under another mark, timed from its first to its last convergence (see
``benchmarks/_runs.py``). Every process started is stopped on the way out, on failure and on
Ctrl-C too. Nothing is asserted: figures are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import _report
from benchmarks._cluster import create_items, create_namespace, item_names
from benchmarks._micro import run_micro
from benchmarks._peers import PEERS, REPO, Peer, build_controller_runtime
from benchmarks._runs import Run, backlog_only, run_once
from pyctrl.client import ApiClient, load_kubeconfig
from pyctrl.client.rest import Transport
from pyctrl.envtest import Environment

RESULTS = REPO / "benchmarks" / "results"
CRD = REPO / "benchmarks" / "peers" / "crd.yaml"
LOGS = Path.home() / ".cache" / "pyctrl" / "bench" / "logs"


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="rounds with --objects Items (default 3)")
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--memory-rounds", type=int, default=1, help="rounds with --memory-objects (0: none)")
    p.add_argument("--memory-objects", type=int, default=10000)
    p.add_argument("--large-rounds", type=int, default=1, help="backlog-only rounds with --large-objects")
    p.add_argument("--large-objects", type=int, default=100_000)
    p.add_argument(
        "--large-peers",
        default="pyctrl,controller_runtime,raw",
        help="programs of the large rounds (kopf's 100,000 would not fit the hour)",
    )
    p.add_argument("--concurrency", type=int, default=16, help="concurrent reconciles, all programs")
    p.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of " + ",".join(PEERS))
    p.add_argument("--no-backlog", action="store_true", help="skip the backlog phase of the --runs rounds")
    p.add_argument(
        "--no-micro", action="store_true", help="skip the workqueue, cache and watch-stall benchmarks"
    )
    p.add_argument("--no-write", action="store_true", help="print only; leave results/ and README alone")
    p.add_argument("--from-json", type=Path, help="measure nothing: report the runs saved in this peers.json")
    return p.parse_args()


async def _rounds(kubeconfig: Path, peers: list[Peer], a: argparse.Namespace) -> list[Run]:
    backlog = not a.no_backlog
    large = [p for p in peers if p.key in a.large_peers.split(",")]
    plan = [(a.objects, r) for r in range(a.runs)] + [(a.memory_objects, r) for r in range(a.memory_rounds)]
    large_rounds = a.large_rounds if backlog and large else 0
    total = len(plan) + large_rounds
    runs: list[Run] = []
    async with ApiClient(await load_kubeconfig(kubeconfig)) as client:
        for i, (n, round_no) in enumerate(plan):
            for peer in _rotated(peers, i):
                options = _options(kubeconfig, n, round_no, a)
                run = await run_once(client.rest, peer, backlog=backlog, **options)
                print(f"bench: round {i + 1}/{total}  {run.line()}", flush=True)
                runs.append(run)
        if large_rounds:
            runs += await _large_rounds(client.rest, kubeconfig, large, a, first=len(plan))
    return runs


async def _large_rounds(
    t: Transport, kubeconfig: Path, peers: list[Peer], a: argparse.Namespace, *, first: int
) -> list[Run]:
    """The backlog-only rounds of ``--large-objects``: the Items are created once, in one namespace,
    and every run starts its program with a mark of its own (so each finds all of them to write).
    The namespace is not deleted: the control plane is stopped next."""
    n, ns = a.large_objects, f"bench-large-{a.large_objects}"
    names = item_names(n)
    print(f"bench: creating {n:,} Items in {ns} for the large rounds", flush=True)
    started = time.monotonic()
    await create_namespace(t, ns)
    await _create_with_progress(t, ns, names)
    print(f"bench: created {n:,} Items in {time.monotonic() - started:.0f} s", flush=True)
    runs: list[Run] = []
    for r in range(a.large_rounds):
        for j, peer in enumerate(_rotated(peers, first + r)):
            mark = f"L{r}{j}:"  # the same length for every run: the same object size
            options = _options(kubeconfig, n, r, a)
            del options["n"]
            run = await backlog_only(t, peer, ns=ns, names=names, mark=mark, **options)
            print(f"bench: round {first + r + 1}/{first + a.large_rounds}  {run.line()}", flush=True)
            runs.append(run)
    return runs


async def _create_with_progress(t: Transport, ns: str, names: list[str], step: int = 10_000) -> None:
    for start in range(0, len(names), step):
        await create_items(t, ns, names[start : start + step])
        print(f"bench:   {min(start + step, len(names)):,} of {len(names):,} created", flush=True)


def _rotated(peers: list[Peer], i: int) -> list[Peer]:
    """The programs in the order of round ``i``: rotated each round, so noise hits all alike."""
    shift = i % len(peers)
    return peers[shift:] + peers[:shift]


def _options(kubeconfig: Path, n: int, round_no: int, a: argparse.Namespace) -> dict[str, Any]:
    return {
        "kubeconfig": kubeconfig,
        "n": n,
        "round_no": round_no,
        "concurrency": a.concurrency,
        "log_dir": LOGS,
        "timeout": 600.0 + n * 0.2,
    }


def _section(summary: dict[str, Any], a: argparse.Namespace, info: dict[str, Any]) -> str:
    m = info["machine"]
    big = a.memory_objects if a.memory_rounds else None
    lines = [
        f"Measured {info['date']} by `python -m benchmarks --runs {a.runs}` (medians of {a.runs} runs"
        + f" at {a.objects} objects"
        + (f", {a.memory_rounds} at {a.memory_objects}" if big else "")
        + f"; concurrency {a.concurrency}).",
        "",
        f"Machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['memory']} RAM, Linux {m['kernel']}, "
        f"Python {m['python']}, {m['go']}; load average {m['load_average']} at the start "
        "(other work shares this machine).",
        "",
        _report.table(summary, a.objects, big, backlog=not a.no_backlog),
        "",
        "CPU s: CPU time of the controller process from the first create to the last convergence.",
    ]
    if info.get("controller_runtime_build"):
        lines.append(
            f"Build of the Go peer (by this run or an earlier one): {info['controller_runtime_build']}."
        )
    if not a.no_backlog:
        lines += [
            "",
            f"Backlog: a fresh program started on the run's {a.objects} converged Items (and its"
            " sentinel) with another mark, so every one needs a status write again;"
            " s and objects/s from the first Item's convergence to the last (the program's start-up"
            " left out), start-up from the process's start to the first convergence, CPU s from the"
            " process's start (imports and initial list included) to the last convergence.",
        ]
    lines += [
        "",
        "Cost per object (the backlog phases: the Items exist, then the program starts): CPU µs per"
        " Item converged after the first (start-up and initial list excluded, reported beside),"
        " initial sync (spawn to the first convergence), RSS once all converged and the program is"
        " quiet, and that over the RSS of the program on an empty namespace, per Item"
        " (![cost per object](results/cost.png)):",
        "",
        _report.cost_table(summary, a.objects),
    ]
    lines += ["", "```", *(_ratio_line(k, v) for k, v in info["ratios"].items()), "```"]
    return "\n".join(lines)


def _ratio_line(name: str, value: float | None) -> str:
    return f"RATIO {name} {'nan' if value is None else f'{value:.3f}'}"


def _compile_bytecode() -> None:
    """Compile pyctrl's and the peers' bytecode, as ``pip install`` does for an installed package.

    pyctrl is installed editable (``pip install -e``), so its modules are imported from this
    checkout; with ``PYTHONDONTWRITEBYTECODE`` set (as on this machine) no ``.pyc`` is ever written
    and every start of the pyctrl peer compiled all of them from source, while the raw loop's and
    kopf's libraries come compiled from site-packages (benchmarks/README: about 0.38 G of the
    peer's 2.3 G instructions to its first reconcile)."""
    for package in ("pyctrl", "benchmarks"):
        compileall.compile_dir(REPO / package, quiet=1)
    print("bench: bytecode of pyctrl and benchmarks compiled (as an installed package has it)", flush=True)


def _measure(a: argparse.Namespace) -> tuple[dict[str, Any], dict[str, float], dict[str, str], list[Run]]:
    info: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "machine": _report.machine()}
    micro, micro_out = ({}, {}) if a.no_micro else run_micro()
    chosen = [k.strip() for k in a.peers.split(",") if k.strip()]
    peers = [PEERS[k] for k in chosen]
    _compile_bytecode()
    if "controller_runtime" in chosen:
        built, info["controller_runtime_build"] = build_controller_runtime()
        peers = [built if p.key == "controller_runtime" else p for p in peers]
    with Environment(local_node=False, crd_directory_paths=[CRD]) as env:
        print(f"bench: control plane up ({env.server_url}); logs of the programs in {LOGS}", flush=True)
        runs = asyncio.run(_rounds(env.kubeconfig_path, peers, a))
    return info, micro, micro_out, runs


def _load(a: argparse.Namespace) -> tuple[dict[str, Any], dict[str, float], dict[str, str], list[Run]]:
    data = json.loads(a.from_json.read_text())
    info = {k: data[k] for k in ("date", "machine", "controller_runtime_build") if k in data}
    micro = {k: v for k, v in data["ratios"].items() if not k.startswith("pyctrl_vs_") and v is not None}
    for key in ("runs", "objects", "memory_rounds", "memory_objects", "concurrency"):
        setattr(a, key, data["args"][key])
    a.no_backlog = data["args"].get("no_backlog", True)
    a.large_rounds = data["args"].get("large_rounds", 0)
    a.large_objects = data["args"].get("large_objects", 100_000)
    return info, micro, data.get("micro_output", {}), [Run(**r) for r in data["runs"]]


def main() -> int:
    a = _args()
    info, micro, micro_out, runs = _load(a) if a.from_json else _measure(a)
    summary = _report.summarize(runs)
    info["ratios"] = _report.ratios(summary, a.objects, micro, medium=a.memory_objects, large=a.large_objects)
    section = _section(summary, a, info)
    print("\n" + section.split("```")[0].rstrip() + "\n")
    if not a.no_write:
        data = {
            **info,
            "args": {k: v for k, v in vars(a).items() if k != "from_json"},
            "summary": summary,
            "runs": [r.as_dict() for r in runs],
        }
        data["micro_output"] = micro_out
        _report.write_json(RESULTS / "peers.json", data)
        big = a.memory_objects if a.memory_rounds else None
        _report.write_chart(RESULTS / "peers.png", summary, runs, a.objects, big)
        _report.write_cost_chart(RESULTS / "cost.png", summary, a.objects)
        _report.write_readme(REPO / "benchmarks" / "README.md", section)
        print(f"bench: wrote {RESULTS / 'peers.json'}, {RESULTS / 'peers.png'} and benchmarks/README.md")
    for name, value in info["ratios"].items():
        print(_ratio_line(name, value))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("bench: interrupted; every process it started was stopped", file=sys.stderr)
        sys.exit(130)
