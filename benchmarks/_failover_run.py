"""One failover run against a system: the writer, the fault, and what is measured.

The writer is the same for both systems: ``SET k<i>`` then ``WAIT 1 500`` in a loop on whichever pod
the system names master (``System.discover``), keeping every write a replica acknowledged. A run:
wait until steady, write for a moment, inject the fault into the master's redis-server, then
measure from the fault

- *decided*: the system's failover decision (operator: new epoch in status; Sentinel: ``+odown``);
- *promoted*: another pod answers ``ROLE`` as master (asked directly every 20 ms);
- *first write*: the first write acknowledged (``WAIT 1`` ≥ 1) by the new master;
- *longest pause*: the longest gap between two acknowledged writes from the fault to the end;
- *lost*: acknowledged writes missing from the master once the system is steady again.

A system that does not promote within ``deadline`` seconds is reported (``promoted`` is None), never
waited on for ever. The faulted process is always resumed/restored before the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import statistics
import time
import uuid
from dataclasses import dataclass

from benchmarks._failover_systems import System, redis_client, redis_info, until

__all__ = ["FAULTS", "Outcome", "Writer", "longest_pause", "lost_writes", "one_run", "report_pause_ratio"]

#: Scenario name -> how the master's redis-server is faulted.
FAULTS = {"crash": "SHUTDOWN NOSAVE", "hang": "SIGSTOP", "kill": "SIGKILL"}


@dataclass
class Outcome:
    system: str
    fault: str
    decided_s: float | None
    promoted_s: float | None
    first_write_s: float | None
    longest_pause_s: float
    acked: int
    lost: int
    note: str = ""


async def _role(ip: str) -> str:
    client = redis_client(ip, 0.3)
    try:
        reply = await client.execute_command("ROLE")  # type: ignore[no-untyped-call]
        return bytes(reply[0]).decode()
    except Exception:
        return "down"
    finally:
        await client.aclose()


class Writer:
    """SET + WAIT 1 on the master the system names; ``acked`` holds (time, i, pod)."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.acked: list[tuple[float, int, str]] = []
        self.prefix = uuid.uuid4().hex[:8]  # keys of earlier runs never count as kept
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            pod = await self.system.discover()
            if pod is None:
                await asyncio.sleep(0.02)  # poll interval until a master is named again
                continue
            client = redis_client(self.system.pods[pod])
            try:
                while not self._stop.is_set():
                    await client.set(f"{self.prefix}:{i}", i)
                    if await client.wait(1, 500) >= 1:
                        self.acked.append((time.monotonic(), i, pod))
                    i += 1
            except Exception:
                await asyncio.sleep(0.02)  # the master failed or is no longer master: look again
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()


async def _inject(fault: str, ip: str) -> int:
    """Fault the redis-server at ``ip``; return its pid."""
    pid = int((await redis_info(ip, "server"))["process_id"])
    if fault == "crash":
        client = redis_client(ip, 1)
        with contextlib.suppress(Exception):
            await client.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
        with contextlib.suppress(Exception):
            await client.aclose()
    else:
        os.kill(pid, signal.SIGSTOP if fault == "hang" else signal.SIGKILL)
    return pid


def longest_pause(times: list[float], start: float, end: float) -> float:
    """The longest gap between acknowledged writes in ``[start, end]`` (its ends count as writes)."""
    points = [start, *(t for t in times if start < t < end), end]
    return max(b - a for a, b in itertools.pairwise(points))


async def lost_writes(system: System, writer: Writer) -> int:
    """Acknowledged writes the system's master does not hold (all of them when none is named)."""
    master = await system.discover()
    if master is None:
        return len(writer.acked)
    client = redis_client(system.pods[master], 5)
    try:
        keys = [f"{writer.prefix}:{i}" for _, i, _ in writer.acked]
        values = await client.mget(keys) if keys else []
        return sum(v != str(i).encode() for (_, i, _), v in zip(writer.acked, values, strict=True))
    finally:
        await client.aclose()


async def one_run(system: System, fault: str, deadline: float = 60.0) -> Outcome:
    await until(system.steady, 240, f"{system.name} steady before the run")
    old = await system.master()
    writer = Writer(system)
    writer.start()
    pid: int | None = None
    decided = promoted = first = None
    note = ""
    try:
        await until(lambda: _true(len(writer.acked) > 50), 30, "writes flowing")
        faulted = time.monotonic()
        pid = await _inject(fault, system.pods[old])
        others = {p: ip for p, ip in system.pods.items() if p != old}
        while time.monotonic() < faulted + deadline:
            if decided is None:
                decided = await system.decided(faulted)
            if promoted is None:
                roles = await asyncio.gather(*(_role(ip) for ip in others.values()))
                if "master" in roles:
                    promoted = time.monotonic()
            first = next((t for t, _, m in writer.acked if m != old and t > faulted), None)
            if promoted is not None and first is not None:
                break
            await asyncio.sleep(0.02)  # poll interval, bounded by the deadline
        else:
            note = f"no {'promotion' if promoted is None else 'acknowledged write'} within {deadline:.0f} s"
        if fault == "hang" and pid is not None:
            os.kill(pid, signal.SIGCONT)
            pid = None
        await system.restore(old)
        await until(system.steady, 240, f"{system.name} steady after the run")
        end = time.monotonic()
        await asyncio.sleep(1.0)  # keep writing a moment in the steady state (part of the window)
    finally:
        if pid is not None and fault == "hang":
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        await writer.stop()
    lost = await lost_writes(system, writer)
    return Outcome(
        system=system.name,
        fault=fault,
        decided_s=None if decided is None else decided - faulted,
        promoted_s=None if promoted is None else promoted - faulted,
        first_write_s=None if first is None else first - faulted,
        longest_pause_s=longest_pause([t for t, _, _ in writer.acked], faulted, end),
        acked=len(writer.acked),
        lost=lost,
        note=note,
    )


def report_pause_ratio(outcomes: list[Outcome], planned: str, crash: str, what: str, ratio: str) -> None:
    """Print the median longest write pause of the ``planned`` runs against the ``crash`` runs and
    ``RATIO <ratio>`` (planned over crash); ``what`` describes the comparison."""
    planned_pauses = [o.longest_pause_s for o in outcomes if o.fault == planned and not o.note]
    crashes = [o.longest_pause_s for o in outcomes if o.fault == crash and not o.note]
    if not planned_pauses or not crashes:
        print(f"{planned}: not enough successful runs for a ratio")
        return
    p, c = statistics.median(planned_pauses), statistics.median(crashes)
    lost = sum(o.lost for o in outcomes)
    print(
        f"\n{what}: median longest write pause {p:.3f}s over {len(planned_pauses)} {planned}s, "
        f"{c:.3f}s over {len(crashes)} crashes; acknowledged writes lost {lost}"
    )
    print(f"RATIO {ratio} {p / c:.3f}")


async def _true(value: bool) -> bool:
    return value
