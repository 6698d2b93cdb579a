"""PYCTRL_TRACE: the guide's trace example run as the page says, and the trace lines of the queue."""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyctrl import trace
from pyctrl.workqueue import FakeClock, RateLimitingQueue

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(
    r"^pyctrl\.trace \+\s*(?P<ms>[0-9.]+) ms  (?P<stage>\S+)\s+(?P<subject>.*?) \| (?P<detail>.*)$"
)


def parse(text: str) -> list[tuple[float, str, str, str]]:
    return [
        (float(m["ms"]), m["stage"], m["subject"], m["detail"])
        for m in map(LINE.match, text.splitlines())
        if m is not None
    ]


def assert_in_order(lines: list[tuple[float, str, str, str]], expected: list[tuple[str, str]]) -> None:
    """Each (stage, detail fragment) of ``expected`` occurs after the previous one."""
    at = 0
    for stage, fragment in expected:
        for i in range(at, len(lines)):
            if lines[i][1] == stage and fragment in lines[i][3]:
                at = i + 1
                break
        else:
            shown = "\n".join(f"{s:<10} {subj} | {d}" for _, s, subj, d in lines[at:])
            pytest.fail(f"no {stage!r} line with {fragment!r} after line {at}; the rest:\n{shown}")


@pytest.mark.controlplane
def test_the_trace_example_prints_every_stage_of_one_object_in_order_and_leaves_nothing_running() -> None:
    env = {**os.environ, "PYCTRL_TRACE": "1"}
    done = subprocess.run(
        [sys.executable, "docs/examples/trace_a_reconcile.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in parse(done.stderr) if "default/traced" in line[2]]
    assert_in_order(
        lines,
        [
            # the create, from the watch to the requeue the reconciler asked for
            ("watch", "ADDED"),
            ("store", "add"),
            ("handler", "on_add"),
            ("predicate", "create event from ConfigMap: pass"),
            ("queue", "add priority=0: queued (new)"),
            ("worker", "picked"),
            ("reconcile", "requeue_after=30s"),
            ("queue", "add_after 30s"),
            ("done", "done"),
            # the data change cuts the 30 s wait short
            ("predicate", "update event from ConfigMap: pass"),
            ("queue", "was waiting for its delay: ready now"),
            ("worker", "picked"),
            ("reconcile", "requeue_after=30s"),
        ],
    )
    # the reconciler's own annotation writes come back as watch events and are filtered
    assert sum("filtered by Funcs(update_func=data_changed)" in line[3] for line in lines) >= 1
    times = [line[0] for line in lines]
    assert times == sorted(times)
    # names and versions only: the object's data ("hello", "world") is never printed
    assert "hello" not in done.stderr
    assert "world" not in done.stderr
    assert "stopped: control plane and manager" in done.stdout
    state_dir = re.search(r"control plane started in (\S+)", done.stdout)
    assert state_dir is not None, done.stdout
    survivors = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, state_dir[1])]
    assert survivors == []


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        return text in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


async def test_queue_lines_say_whether_an_add_was_deduplicated_deferred_or_delayed() -> None:
    out = io.StringIO()
    clock = FakeClock()
    with trace.tracing(out):
        q: RateLimitingQueue[str] = RateLimitingQueue(name="demo", clock=clock)
        q.add("a")
        q.add("a", priority=5)
        item = await q.get()
        q.add("a")
        q.add("a", priority=1)
        q.done(item)
        item = await q.get()
        q.done(item)
        q.add_after("b", 2.0)
        q.add_after("b", 5.0)
        clock.step(2.0)
        await asyncio.sleep(0)
        q.add_rate_limited("c")
    assert not trace.ENABLED
    details = [(stage, subject, detail) for _, stage, subject, detail in parse(out.getvalue())]
    assert details == [
        ("queue", "demo a", "add priority=0: queued (new)"),
        ("queue", "demo a", "add priority=5: deduplicated: already queued, priority raised 0 -> 5"),
        ("queue", "demo a", "add priority=0: deferred: being processed, re-queued once on done"),
        ("queue", "demo a", "add priority=1: deduplicated: re-queued on done, priority raised 0 -> 1"),
        ("done", "demo a", "done: added while processing, so queued again"),
        ("done", "demo a", "done"),
        ("queue", "demo b", "add_after 2s priority=0: waiting 2s before it is queued"),
        ("queue", "demo b", "add_after 5s priority=0: already waiting with an earlier ready time: kept"),
        ("queue", "demo b", "delay elapsed"),
        ("queue", "demo b", "add priority=0: queued (new)"),
        ("queue", "demo c", "add_after 0.005s priority=0: waiting 0.005s before it is queued"),
    ]


def test_only_a_set_pyctrl_trace_value_other_than_0_false_no_off_turns_tracing_on() -> None:
    # the example above runs with PYCTRL_TRACE=1 in a fresh interpreter: the on path end to end
    assert [trace.requested(v) for v in (None, "", " ", "0", "false", "No", "off")] == [False] * 7
    assert [trace.requested(v) for v in ("1", "true", "yes", "on", "stages")] == [True] * 5
