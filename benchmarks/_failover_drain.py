"""The ``drain`` scenario: a planned switchover when the master's node is drained, against a crash.

On a control plane of its own with three nodes (the RedisCluster's pods one per node), run k of
``--kills`` is, with the writer of :mod:`benchmarks._failover_run` going:

- *drain*: ``kubectl drain`` of the master's node (``--ignore-daemonsets --delete-emptydir-data``):
  the master pod's eviction makes the operator hand the master over (``FAILOVER TO``) while the
  pod's preStop hook keeps it serving; measured until the cluster is Running again with the pod
  recreated on another node, then the node is uncordoned;
- *crash*: the same cluster, the master's redis-server crashed (``SHUTDOWN NOSAVE``), measured
  as the crash scenario does (same ``--down-after-ms``).

The figure is the longest pause between two acknowledged writes in each run; the report prints
the medians and ``RATIO drain_pause_vs_crash_failover`` (median drain pause over median crash
pause; the aim is at most 0.2). Printed, never asserted.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import TYPE_CHECKING, Any

from benchmarks._failover_run import Outcome, Writer, longest_pause, lost_writes, one_run, report_pause_ratio
from benchmarks._failover_systems import NS, OperatorSystem, SystemError_, until
from examples.rediscluster_demo.harness import ROOT, operator_process
from pyctrl.client import load_kubeconfig
from pyctrl.client.rest import Transport
from pyctrl.envtest import Environment

if TYPE_CHECKING:
    from benchmarks.failover_bench import Context

__all__ = ["DRAIN_FAULTS", "drain_runs", "report_drain"]

#: the ``fault`` of this scenario's outcomes: the drain, and the crash on the same cluster
DRAIN_FAULTS = ("drain", "drain_crash")


def _kubectl(env: Environment, *args: str) -> None:
    assert env.bin_dir is not None
    out = subprocess.run(
        [str(env.bin_dir / "kubectl"), f"--kubeconfig={env.kubeconfig_path}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")


async def _node_of(t: Transport, pod: str) -> str:
    doc = await t.request_json("GET", f"/api/v1/namespaces/{NS}/pods/{pod}")
    return str(doc["spec"]["nodeName"])


async def _refresh(system: OperatorSystem) -> None:
    """Drained pods come back on other nodes with new IPs."""
    selector = {"labelSelector": f"app.kubernetes.io/instance={system.cluster}"}
    doc = await system.t.request_json("GET", f"/api/v1/namespaces/{NS}/pods", params=selector)
    system.pods = {
        p["metadata"]["name"]: p["status"]["podIP"] for p in doc["items"] if p["status"].get("podIP")
    }


async def drain_run(env: Environment, system: OperatorSystem) -> Outcome:
    await until(system.steady, 240, "operator steady before the drain")
    await _refresh(system)
    old = await system.master()
    node = await _node_of(system.t, old)
    writer = Writer(system)
    writer.start()
    decided = first = None
    try:
        await until(lambda: _true(len(writer.acked) > 50), 30, "writes flowing")
        started = time.monotonic()
        drain = asyncio.create_task(
            asyncio.to_thread(
                _kubectl,
                env,
                "drain",
                node,
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout=240s",
            )
        )
        while not drain.done() or first is None:
            if drain.done():
                await drain  # raises when kubectl failed
            if decided is None:
                decided = await system.decided(started)
            first = next((t for t, _, m in writer.acked if m != old and t > started), None)
            if time.monotonic() > started + 240:
                raise TimeoutError(f"drain of {node}: no write acknowledged by a new master")
            await asyncio.sleep(0.02)  # poll interval, bounded above
        await drain
        await until(system.steady, 240, "operator steady after the drain")
        end = time.monotonic()
        await asyncio.sleep(1.0)  # keep writing a moment in the steady state (part of the window)
    finally:
        await writer.stop()
        await asyncio.to_thread(_kubectl, env, "uncordon", node)
    await _refresh(system)
    return Outcome(
        system="operator",
        fault="drain",
        decided_s=None if decided is None else decided - started,
        promoted_s=None,
        first_write_s=None if first is None else first - started,
        longest_pause_s=longest_pause([t for t, _, _ in writer.acked], started, end),
        acked=len(writer.acked),
        lost=await lost_writes(system, writer),
    )


async def drain_runs(ctx: Context) -> list[Any]:
    """``--kills`` drain runs and as many crash runs, interleaved, on a three-node control plane."""
    outcomes: list[Outcome] = []
    with (
        Environment(crd_directory_paths=[ROOT / "crds"], nodes=3) as env,
        operator_process(env, env.log_dir / "operator.log"),
    ):
        t = Transport(await load_kubeconfig(env.kubeconfig_path))
        try:
            system = OperatorSystem(t, ctx.args.down_after_ms, name="drainbench")
            await system.setup()
            for k in range(ctx.args.kills):
                for fault in DRAIN_FAULTS:
                    try:
                        if fault == "drain":
                            outcome = await drain_run(env, system)
                        else:
                            await _refresh(system)
                            outcome = await one_run(system, "crash")
                            outcome.fault = fault
                    except (SystemError_, TimeoutError, RuntimeError) as exc:  # recorded, the rest goes on
                        outcome = Outcome("operator", fault, None, None, None, 0.0, 0, 0, note=str(exc))
                    outcomes.append(outcome)
                    print(f"run {k + 1} {fault:11}: {_line(outcome)}", flush=True)
        finally:
            await t.close()
    return outcomes


def _line(o: Outcome) -> str:
    return (
        f"longest pause {o.longest_pause_s:.3f}s, first write acknowledged by the new master "
        f"{_s(o.first_write_s)}, lost {o.lost}/{o.acked}" + (f"  [{o.note}]" if o.note else "")
    )


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


def report_drain(outcomes: list[Outcome], down_after_ms: int) -> None:
    what = (
        f"drain of the master's node vs crash of the master (downAfterMilliseconds={down_after_ms}, 3 nodes)"
    )
    report_pause_ratio(outcomes, "drain", "drain_crash", what, "drain_pause_vs_crash_failover")


async def _true(value: bool) -> bool:
    return value
