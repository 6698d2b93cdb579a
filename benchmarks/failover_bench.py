"""Failover of the RedisCluster operator beside Redis Sentinel, on the same local pods and faults.

``python -m benchmarks.failover_bench [--scenario NAME ...] [--kills 5] [--down-after-ms 5000]``
starts the local control plane and node once, then runs the chosen scenarios (default: all):

- ``crash`` (``SHUTDOWN NOSAVE``), ``hang`` (``SIGSTOP``), ``kill`` (``SIGKILL``): the master's
  redis-server is faulted, ``--kills`` times per system (``--system operator|sentinel``, default
  both), the systems and the faults interleaved run by run (:mod:`benchmarks._failover_run` says
  what is measured, :mod:`benchmarks._failover_systems` how each system is set up);
- ``leader``: the operator's leader process is killed; the standby's kill → elected → first
  reconcile, with and without warm standby (:mod:`benchmarks._failover_leader`);
- ``drain``: on a control plane of its own with three nodes, the master's node drained
  (``kubectl drain``: a planned switchover) against the master crashed, the longest write pause
  of each (:mod:`benchmarks._failover_drain`);
- ``rollout``: an image change rolled by the operator (replicas, one switchover, the old master)
  against the master crashed, the longest write pause of each (:mod:`benchmarks._failover_rollout`).

``--runtime kubelet`` runs instead the operator's crash failover and a Pod's start on real nodes
(``Environment(runtime="kubelet")``) against the local node, each on a control plane of its own
(:mod:`benchmarks._failover_kubelet`): ``RATIO failover_first_write_kubelet_vs_local`` and
``RATIO pod_start_kubelet_vs_local``.

It prints one line per run, a table of medians per system and scenario, and the ``RATIO`` lines
``failover_first_write_vs_sentinel`` and ``failover_first_write_vs_down_after`` (crash fault)
``drain_pause_vs_crash_failover`` (drain scenario) and ``rollout_pause_vs_crash_failover``
(rollout scenario).
Figures are printed, never asserted. Everything started is stopped on any exit (Ctrl-C included).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import re
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._failover_drain import DRAIN_FAULTS, drain_runs, report_drain
from benchmarks._failover_kubelet import kubelet_runs, report_kubelet
from benchmarks._failover_leader import leader_runs
from benchmarks._failover_rollout import ROLLOUT_FAULTS, report_rollout, rollout_runs
from benchmarks._failover_run import FAULTS, Outcome, one_run
from benchmarks._failover_systems import OperatorSystem, SentinelSystem, System, SystemError_
from examples.rediscluster_demo.harness import ROOT, operator_process
from pyctrl.client import load_kubeconfig
from pyctrl.client.rest import Transport
from pyctrl.envtest import Environment

SYSTEMS = ("operator", "sentinel")


@dataclass
class Context:
    """What every scenario gets: the running control plane, a transport to it, the options."""

    env: Environment
    t: Transport
    args: argparse.Namespace


#: A scenario beyond the faults: runs ``ctx.args.kills`` times and returns its rows (dataclasses,
#: written to ``--json``); it prints its own lines and report.
Scenario = Callable[[Context], Awaitable[list[Any]]]


async def faults(ctx: Context, names: list[str]) -> list[Outcome]:
    """The fault scenarios in ``names``, interleaved: run k of every fault on every system."""
    args = ctx.args
    outcomes: list[Outcome] = []
    with contextlib.ExitStack() as stack:
        systems: list[System] = []
        if "operator" in args.system:
            stack.enter_context(operator_process(ctx.env, ctx.env.log_dir / "operator.log"))
            systems.append(OperatorSystem(ctx.t, args.down_after_ms))
        if "sentinel" in args.system:
            systems.append(SentinelSystem(ctx.t, args.down_after_ms, ctx.env.log_dir / "sentinel", ROOT))
        ready: list[System] = []
        try:
            for system in systems:
                try:
                    await system.setup()
                    ready.append(system)
                except (SystemError_, TimeoutError) as exc:
                    print(f"{system.name}: cannot run: {exc}", flush=True)
            for k in range(args.kills):
                for fault in names:
                    for system in ready:
                        try:
                            outcome = await one_run(system, fault)
                        except (SystemError_, TimeoutError) as exc:
                            outcome = Outcome(system.name, fault, None, None, None, 0.0, 0, 0, note=str(exc))
                        outcomes.append(outcome)
                        print(f"run {k + 1} {_line(outcome)}", flush=True)
        finally:
            for system in systems:
                with contextlib.suppress(Exception):
                    await system.close()
    operator_phases(ctx.env.log_dir / "operator.log")
    return outcomes


def operator_phases(log: Path) -> None:
    """Print the medians of the phases the operator logged for its failovers ("Failover phases")."""
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if "Failover phases" in line]
    except OSError:
        return
    phases: dict[str, list[float]] = {}
    for line in lines:
        for name, value in re.findall(r"(\w+)_s=([0-9.]+)", line):
            phases.setdefault(name, []).append(float(value))
    if phases:
        figures = ", ".join(f"{name} {statistics.median(v):.3f}s" for name, v in phases.items())
        print(f"operator failover phases, medians of {len(lines)} failovers (its log): {figures}", flush=True)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _line(o: Outcome) -> str:
    return (
        f"{o.system:8} {o.fault:6} decided {_s(o.decided_s)}, promoted {_s(o.promoted_s)}, "
        f"first acknowledged write {_s(o.first_write_s)}, longest pause {o.longest_pause_s:.2f}s, "
        f"lost {o.lost}/{o.acked}" + (f"  [{o.note}]" if o.note else "")
    )


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def report(outcomes: list[Outcome], down_after_ms: int) -> dict[tuple[str, str], dict[str, Any]]:
    """Print the table of medians per (system, scenario) and the RATIO lines; return the table."""
    table: dict[tuple[str, str], dict[str, Any]] = {}
    if not outcomes:
        return table
    for o in outcomes:
        table.setdefault((o.system, o.fault), {"runs": []})["runs"].append(o)
    print(f"\nfailover, downAfterMilliseconds={down_after_ms}, medians over the runs:")
    print(
        f"{'system':9} {'scenario':8} {'runs':>4} {'decided':>8} {'promoted':>9} {'first write':>12} "
        f"{'longest pause':>14} {'lost writes':>12} {'failed':>7}"
    )
    for (system, fault), row in sorted(table.items()):
        runs: list[Outcome] = row["runs"]
        row.update(
            decided=_median([r.decided_s for r in runs]),
            promoted=_median([r.promoted_s for r in runs]),
            first_write=_median([r.first_write_s for r in runs]),
            longest_pause=_median([r.longest_pause_s for r in runs]),
            lost=sum(r.lost for r in runs),
            acked=sum(r.acked for r in runs),
            failed=sum(bool(r.note) for r in runs),
        )
        print(
            f"{system:9} {fault:8} {len(runs):>4} {_s(row['decided']):>8} {_s(row['promoted']):>9} "
            f"{_s(row['first_write']):>12} {_s(row['longest_pause']):>14} "
            f"{row['lost']:>5}/{row['acked']:<6} {row['failed']:>7}"
        )
    op = (table.get(("operator", "crash")) or {}).get("first_write")
    sentinel = (table.get(("sentinel", "crash")) or {}).get("first_write")
    if op is not None and sentinel is not None:
        print(f"RATIO failover_first_write_vs_sentinel {op / sentinel:.2f}")
    if op is not None:
        print(f"RATIO failover_first_write_vs_down_after {op * 1000 / down_after_ms:.2f}")
    return table


#: Every scenario by name: the faults (run together, interleaved: ``None``) and the others.
SCENARIOS: dict[str, Scenario | None] = {
    **dict.fromkeys(FAULTS),
    "leader": leader_runs,
    "drain": drain_runs,
    "rollout": rollout_runs,
}


async def run(args: argparse.Namespace) -> list[Any]:
    started = time.monotonic()
    with Environment(crd_directory_paths=[ROOT / "crds"]) as env:
        t = Transport(await load_kubeconfig(env.kubeconfig_path))
        ctx = Context(env, t, args)
        outcomes: list[Any] = []
        try:
            chosen_faults = [name for name in args.scenario if name in FAULTS]
            if chosen_faults:
                outcomes += await faults(ctx, chosen_faults)
            for name in args.scenario:
                scenario = SCENARIOS[name]
                if scenario is not None:
                    print(f"\nscenario {name}", flush=True)
                    try:
                        outcomes += await scenario(ctx)
                    except (TimeoutError, SystemError_) as exc:  # reported; the others still run
                        print(f"scenario {name} could not finish: {exc}", flush=True)
        finally:
            await t.close()
    print(f"\nbenchmark took {time.monotonic() - started:.0f} s", flush=True)
    return outcomes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--scenario",
        action="append",
        choices=list(SCENARIOS),
        help="a scenario to run (repeatable; default: all)",
    )
    parser.add_argument("--kills", type=int, default=5, help="runs per scenario per system (default 5)")
    parser.add_argument("--down-after-ms", type=int, default=5000)
    parser.add_argument(
        "--system", action="append", choices=SYSTEMS, help="operator or sentinel (repeatable; default both)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every run's figures here")
    parser.add_argument(
        "--runtime",
        choices=("local", "kubelet"),
        default="local",
        help="kubelet: the operator's crash failover and a Pod's start on real nodes against the "
        "local node (no other scenario or system)",
    )
    args = parser.parse_args(argv)
    if args.runtime == "kubelet" and (args.scenario or args.system):
        parser.error(
            "--runtime kubelet runs the crash scenario of the operator only: no --scenario or --system"
        )
    if args.kills < 1:
        parser.error("--kills must be at least 1")
    if args.down_after_ms < 1000:
        parser.error("--down-after-ms must be at least 1000 (the operator's minimum)")
    args.scenario = args.scenario or list(SCENARIOS)
    args.system = args.system or list(SYSTEMS)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.runtime == "kubelet":
        started = time.monotonic()
        try:
            runs = asyncio.run(kubelet_runs(args))
        except KeyboardInterrupt:
            print("interrupted; everything started was stopped", file=sys.stderr)
            return 130
        report_kubelet(runs, args.down_after_ms)
        print(f"\nbenchmark took {time.monotonic() - started:.0f} s", flush=True)
        if args.json:
            args.json.write_text(json.dumps([dataclasses.asdict(o) for o in runs], indent=2))
        return 0
    try:
        outcomes = asyncio.run(run(args))
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130
    fault_runs = [o for o in outcomes if o.fault in FAULTS]
    if fault_runs:
        report(fault_runs, args.down_after_ms)
    leader = [o for o in outcomes if o.fault not in (*FAULTS, *DRAIN_FAULTS, *ROLLOUT_FAULTS)]
    if leader:
        from benchmarks._failover_leader import report_leader

        report_leader(leader)
    drains = [o for o in outcomes if o.fault in DRAIN_FAULTS]
    if drains:
        report_drain(drains, args.down_after_ms)
    rollouts = [o for o in outcomes if o.fault in ROLLOUT_FAULTS]
    if rollouts:
        report_rollout(rollouts, args.down_after_ms)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(o) for o in outcomes], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
