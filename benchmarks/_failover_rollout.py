"""The ``rollout`` scenario: an image change rolled by the operator, against a crash of the master.

On the benchmark's control plane, one 3-pod RedisCluster; run k of ``--kills`` is, with the writer
of :mod:`benchmarks._failover_run` going (``SET`` + ``WAIT 1 500`` on the labelled master):

- *rollout*: ``spec.image`` changed (``redis:7.2.<k>``, a new pod template): the operator restarts
  the replicas one at a time, hands the master over once (``FAILOVER TO``) and restarts the old
  master (examples/rediscluster/replication/rollout.py); measured from the patch until the status reports the
  rollout complete (``currentRevision == updateRevision``, Running with 3 ready pods);
- *rollout_crash*: the same cluster, the master's redis-server crashed (``SHUTDOWN NOSAVE``),
  measured as the crash scenario does (same ``--down-after-ms``).

The figure is the longest pause between two acknowledged writes of each run; the report prints
the medians and ``RATIO rollout_pause_vs_crash_failover`` (median rollout pause over median crash
pause; the aim is at most 0.2, and a rollout pause under 1 s). Printed, never asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import orjson

from benchmarks._failover_drain import _line, _refresh
from benchmarks._failover_run import Outcome, Writer, longest_pause, lost_writes, one_run, report_pause_ratio
from benchmarks._failover_systems import OperatorSystem, SystemError_, until
from examples.rediscluster_demo.harness import operator_process

if TYPE_CHECKING:
    from benchmarks.failover_bench import Context

__all__ = ["ROLLOUT_FAULTS", "report_rollout", "rollout_runs"]

#: the ``fault`` of this scenario's outcomes: the rollout, and the crash on the same cluster
ROLLOUT_FAULTS = ("rollout", "rollout_crash")


async def _rolled(system: OperatorSystem, old_revision: str | None) -> bool:
    s = await system.status()
    return (
        s.get("updateRevision") not in (None, old_revision)
        and s.get("currentRevision") == s.get("updateRevision")
        and await system.steady()
    )


async def _follow_pods(system: OperatorSystem, stop: asyncio.Event) -> None:
    """Keep ``system.pods`` (the writer's pod -> IP map) current while pods are recreated."""
    while not stop.is_set():
        with contextlib.suppress(Exception):
            await _refresh(system)
        await asyncio.sleep(0.1)  # refresh interval


async def rollout_run(system: OperatorSystem, image: str) -> Outcome:
    await until(system.steady, 240, "operator steady before the rollout")
    await _refresh(system)
    old = await system.master()
    old_revision = (await system.status()).get("updateRevision")
    writer = Writer(system)
    stop = asyncio.Event()
    follower = asyncio.create_task(_follow_pods(system, stop))
    writer.start()
    try:
        await until(lambda: _true(len(writer.acked) > 50), 30, "writes flowing")
        started = time.monotonic()
        patch = orjson.dumps({"spec": {"image": image}})
        await system.t.request(
            "PATCH",
            f"{system.base}/{system.cluster}",
            body=patch,
            content_type="application/merge-patch+json",
        )
        await until(lambda: _rolled(system, old_revision), 300, f"the rollout to {image}")
        end = time.monotonic()
        await asyncio.sleep(1.0)  # keep writing a moment in the steady state (part of the window)
    finally:
        await writer.stop()
        stop.set()
        await follower
    await _refresh(system)
    first = next((t for t, _, m in writer.acked if m != old and t > started), None)
    return Outcome(
        system="operator",
        fault="rollout",
        decided_s=None,
        promoted_s=None,
        first_write_s=None if first is None else first - started,
        longest_pause_s=longest_pause([t for t, _, _ in writer.acked], started, end),
        acked=len(writer.acked),
        lost=await lost_writes(system, writer),
    )


async def rollout_runs(ctx: Context) -> list[Any]:
    """``--kills`` rollouts and as many crash runs, interleaved, on one 3-pod cluster."""
    outcomes: list[Outcome] = []
    with operator_process(ctx.env, ctx.env.log_dir / "operator-rollout.log"):
        system = OperatorSystem(ctx.t, ctx.args.down_after_ms, name="rolloutbench")
        try:
            await system.setup()
            for k in range(ctx.args.kills):
                for fault in ROLLOUT_FAULTS:
                    try:
                        if fault == "rollout":
                            outcome = await rollout_run(system, f"redis:7.2.{k + 1}")
                        else:
                            await _refresh(system)
                            outcome = await one_run(system, "crash")
                            outcome.fault = fault
                    except (SystemError_, TimeoutError) as exc:  # recorded, the rest goes on
                        outcome = Outcome("operator", fault, None, None, None, 0.0, 0, 0, note=str(exc))
                    outcomes.append(outcome)
                    print(f"run {k + 1} {fault:13}: {_line(outcome)}", flush=True)
        finally:
            with contextlib.suppress(Exception):
                await system.close()
    return outcomes


def report_rollout(outcomes: list[Outcome], down_after_ms: int) -> None:
    what = f"image rollout of 3 pods vs crash of the master (downAfterMilliseconds={down_after_ms})"
    report_pause_ratio(outcomes, "rollout", "rollout_crash", what, "rollout_pause_vs_crash_failover")


async def _true(value: bool) -> bool:
    return value
