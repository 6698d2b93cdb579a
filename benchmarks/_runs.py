"""One measured run of one program: start it, load it, measure it, stop it, clean up.

A run, in a namespace of its own, with two marks (each program writes its ``--mark`` before
``spec.value`` into ``status.observed``, so Items converged under one mark are unconverged under
the other: one set of Items serves every phase, created once):

1. start the program (mark 1); create a ``sentinel`` Item and wait until it converged (the program
   is up and synced): *start-up*; wait until the program is quiet (CPU) and read its RSS: *RSS at
   start*;
2. create ``n`` Items (32 requests in flight) and wait until every status converged: the time from
   the first create to the last convergence gives *objects/s*; the program's CPU seconds over that
   span and its RSS right then (*RSS after the run*) are recorded; stop it;
3. *backlog* (when asked): start a fresh process with mark 2 on the same namespace, whose ``n`` + 1
   Items all need a status write again, and wait until every Item converged. Three instants are
   kept: the program's start (just before its process is spawned), the first Item's convergence
   (the program is up, has listed the Items and done its first reconcile) and the last one's.
   *Backlog objects/s* is Items over first-to-last (the program's own processing rate, its start-up
   left out); the start-up (start to first convergence), the CPU time the process used by the
   first convergence and by the last, and its RSS once quiet are recorded beside it; stop it;
4. start a fresh process with the last mark used, on the converged Items; once a second sentinel
   converged and the process is quiet, its RSS is *RSS idle with n objects*;
5. stop it and delete the namespace, waiting until it is gone.

:func:`backlog_only` is step 3 alone on Items created once by the caller (the large rounds: one
namespace of 100,000 Items serves every program, each with a mark of its own).

Nothing here asserts a figure: a failed or timed-out run is recorded with its error and the
benchmark goes on.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import _procs
from benchmarks._cluster import Convergence, create_items, create_namespace, delete_namespace, item_names
from benchmarks._peers import REPO, Peer
from pyctrl.client.rest import Transport

__all__ = ["Run", "run_once"]

_START_TIMEOUT = 180.0


@dataclass
class Run:
    peer: str
    round: int
    n: int
    seconds: float | None = None
    objects_per_s: float | None = None
    create_seconds: float | None = None
    cpu_seconds: float | None = None
    rss_start_mib: float | None = None
    rss_after_mib: float | None = None
    rss_idle_mib: float | None = None
    error: str | None = None
    #: backlog phase: first to last convergence, n over that, start to first convergence, CPU
    #: seconds of the process from its start to the last convergence; its own error
    backlog_seconds: float | None = None
    backlog_objects_per_s: float | None = None
    backlog_startup_seconds: float | None = None
    backlog_cpu_seconds: float | None = None
    backlog_error: str | None = None
    #: start-up: spawn to the first Item's convergence on an empty namespace (the sentinel), and
    #: the CPU seconds used by then
    startup_seconds: float | None = None
    startup_cpu_seconds: float | None = None
    #: backlog phase, per object: CPU seconds used by the first convergence (start-up and initial
    #: list), CPU µs per Item converged after it, RSS once all converged and the program is quiet
    backlog_startup_cpu_seconds: float | None = None
    backlog_cpu_per_object_us: float | None = None
    backlog_rss_mib: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        if self.error:
            return f"{self.peer:<19} n={self.n:<6} FAILED: {self.error}"
        if self.seconds is None:  # a backlog-only run (the large rounds)
            return f"{self.peer:<19} n={self.n:<6} backlog only" + self._backlog_line()
        return (
            f"{self.peer:<19} n={self.n:<6} {self.seconds:7.2f} s {self.objects_per_s:8.1f} obj/s"
            f" (creates {self.create_seconds:.2f} s)"
            f"  cpu {self.cpu_seconds:6.2f} s  RSS start {self.rss_start_mib:6.1f}"
            f"  after {self.rss_after_mib:6.1f}  idle {_fmt(self.rss_idle_mib)} MiB" + self._backlog_line()
        )

    def _backlog_line(self) -> str:
        if self.backlog_error:
            return f"\n{'':<19} backlog FAILED: {self.backlog_error}"
        if self.backlog_objects_per_s is None:
            return ""
        return (
            f"\n{'':<19} backlog {self.backlog_seconds:7.2f} s {self.backlog_objects_per_s:8.1f} obj/s"
            f" (start-up {self.backlog_startup_seconds:.2f} s)  cpu {self.backlog_cpu_seconds:6.2f} s"
            f"  {_fmt(self.backlog_cpu_per_object_us)} µs/object after the first"
            f"  RSS {_fmt(self.backlog_rss_mib)} MiB"
        )


def _fmt(value: float | None) -> str:
    return "   n/a" if value is None else f"{value:6.1f}"


async def _start_synced(
    t: Transport,
    watch: Convergence,
    peer: Peer,
    argv: list[str],
    *,
    ns: str,
    tag: str,
    log: Path,
    run: Run | None = None,
) -> _procs.Child:
    """Start the program, create Item ``tag``, wait until it converged and the program is quiet;
    ``run`` gets the start-up figures (spawn to ``tag``'s convergence, CPU by then)."""
    await create_items(t, ns, [tag], parallel=1)
    started = time.perf_counter()
    child = _procs.start(peer.key, argv, log, cwd=REPO)
    try:
        converged = await watch.wait([tag], _START_TIMEOUT, alive=child.alive)
        if run is not None:
            run.startup_cpu_seconds = child.cpu_seconds()
            run.startup_seconds = converged - started
        await _procs.wait_quiet(child)
    except BaseException:
        child.stop()
        raise
    return child


async def run_once(
    t: Transport,
    peer: Peer,
    *,
    kubeconfig: Path,
    n: int,
    round_no: int,
    concurrency: int,
    log_dir: Path,
    timeout: float,  # noqa: ASYNC109
    backlog: bool = False,
) -> Run:
    """One run of ``peer`` with ``n`` Items (steps 1-5; step 3 only with ``backlog``)."""
    run = Run(peer.key, round_no, n)
    ns = f"bench-{peer.key.replace('_', '-')}-{n}-r{round_no}"
    first_mark, second_mark = "m1:", "m2:"

    def argv(mark: str) -> list[str]:
        return peer.argv(kubeconfig, ns, concurrency, mark)

    child: _procs.Child | None = None
    await create_namespace(t, ns)
    try:
        async with Convergence(t, ns, first_mark) as watch:
            child = await _start_synced(
                t, watch, peer, argv(first_mark), ns=ns, tag="sentinel", log=log_dir / f"{ns}.log", run=run
            )
            run.rss_start_mib = child.rss_mib()
            cpu0 = child.cpu_seconds()
            names = item_names(n)
            t0 = time.perf_counter()
            await create_items(t, ns, names)
            run.create_seconds = time.perf_counter() - t0
            t1 = await watch.wait(names, timeout, alive=child.alive)
            run.rss_after_mib = child.rss_mib()
            run.cpu_seconds = child.cpu_seconds() - cpu0
            run.seconds = t1 - t0
            run.objects_per_s = n / run.seconds
            child.stop()
            child = None
            if backlog:
                log, items, mark = log_dir / f"{ns}-backlog.log", [*names, "sentinel"], second_mark
                await _backlog(watch, run, items, argv=argv(mark), mark=mark, log=log, timeout=timeout)
            last_mark = second_mark if backlog else first_mark  # the Items are converged under it
            child = await _start_synced(
                t, watch, peer, argv(last_mark), ns=ns, tag="sentinel-2", log=log_dir / f"{ns}-idle.log"
            )
            run.rss_idle_mib = child.rss_mib()
    except Exception as exc:
        run.error = f"{type(exc).__name__}: {exc}" + (child.tail(8) if child is not None else "")
    finally:
        if child is not None:
            child.stop()
        await delete_namespace(t, ns)
    return run


async def backlog_only(
    t: Transport,
    peer: Peer,
    *,
    kubeconfig: Path,
    ns: str,
    names: list[str],
    mark: str,
    round_no: int,
    concurrency: int,
    log_dir: Path,
    timeout: float,  # noqa: ASYNC109
) -> Run:
    """Step 3 alone: ``peer`` started with ``mark`` on the Items ``names`` of ``ns`` (created, and
    converged under other marks or none, by the caller). The namespace is left as it is."""
    run = Run(peer.key, round_no, len(names))
    async with Convergence(t, ns, mark) as watch:
        argv = peer.argv(kubeconfig, ns, concurrency, mark)
        log = log_dir / f"{ns}-{mark.rstrip(':')}.log"
        await _backlog(watch, run, names, argv=argv, mark=mark, log=log, timeout=timeout)
    return run


async def _backlog(
    watch: Convergence,
    run: Run,
    names: list[str],
    *,
    argv: list[str],
    mark: str,
    log: Path,
    timeout: float,  # noqa: ASYNC109
) -> None:
    """Step 3: start ``argv`` (the program with ``mark``, under which no Item of ``names`` is
    converged yet) and time it until every one is."""
    child: _procs.Child | None = None
    try:
        await asyncio.sleep(1.0)  # let the apiserver and etcd settle after the writes before
        watch.expect(mark)
        if watch.converged_at.keys() & set(names):
            raise RuntimeError(f"Items of this run are already converged under the mark {mark!r}")
        started = time.perf_counter()
        child = _procs.start(run.peer, argv, log, cwd=REPO)
        await watch.wait(names, timeout + _START_TIMEOUT, alive=child.alive, at_least=1)
        startup_cpu = child.cpu_seconds()
        head = len(watch.converged_at.keys() & set(names))  # converged by the CPU reading
        last = await watch.wait(names, timeout + _START_TIMEOUT, alive=child.alive)
        cpu = child.cpu_seconds()
        first = min(watch.converged_at[name] for name in names)
        await _procs.wait_quiet(child)
        run.backlog_rss_mib = child.rss_mib()
        run.backlog_seconds = last - first
        run.backlog_objects_per_s = len(names) / run.backlog_seconds if run.backlog_seconds > 0 else None
        run.backlog_startup_seconds = first - started
        run.backlog_cpu_seconds = cpu
        run.backlog_startup_cpu_seconds = startup_cpu
        if len(names) > head:
            run.backlog_cpu_per_object_us = (cpu - startup_cpu) / (len(names) - head) * 1e6
    except Exception as exc:
        run.backlog_error = f"{type(exc).__name__}: {exc}" + (child.tail(8) if child is not None else "")
    finally:
        if child is not None:
            child.stop()
