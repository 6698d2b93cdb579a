"""One measured run of one program: start it, load it, measure it, stop it, clean up.

A run, in a namespace of its own:

1. start the program; create a ``sentinel`` Item and wait until it converged (the program is up
   and synced); wait until the program is quiet (CPU) and read its RSS: *RSS at start*;
2. create ``n`` Items (32 requests in flight) and wait until every status converged: the time from
   the first create to the last convergence gives *objects/s*; the program's CPU seconds over that
   span and its RSS right then (*RSS after the run*) are recorded;
3. stop it and start a fresh process on the same namespace (``n`` converged Items); once a second
   sentinel converged and the process is quiet, its RSS is *RSS idle with n objects*;
4. stop it and delete the namespace, waiting until it is gone;
5. *backlog* (when asked): in a second, fresh namespace, create ``n`` Items while no program runs,
   open the convergence watch, then start the program and wait until every Item converged. Three
   instants are kept: the program's start (just before its process is spawned), the first Item's
   convergence (the program is up, has listed the Items and done its first reconcile) and the last
   one's. *Backlog objects/s* is ``n`` over first-to-last (the program's own processing rate, its
   start-up left out); the start-up (start to first convergence) and the CPU time the process used
   from its start to the last convergence are recorded beside it.

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
    only_backlog: bool = False,
) -> Run:
    """One run of ``peer`` with ``n`` Items; with ``backlog``, its backlog phase (step 5) too;
    with ``only_backlog``, nothing else (the large rounds, where steps 1-4 would not fit)."""
    run = Run(peer.key, round_no, n)
    if only_backlog:
        await _backlog(
            t, peer, run, kubeconfig=kubeconfig, concurrency=concurrency, log_dir=log_dir, timeout=timeout
        )
        return run
    ns = f"bench-{peer.key.replace('_', '-')}-{n}-r{round_no}"
    argv = peer.argv(kubeconfig, ns, concurrency)
    child: _procs.Child | None = None
    await create_namespace(t, ns)
    try:
        async with Convergence(t, ns) as watch:
            child = await _start_synced(
                t, watch, peer, argv, ns=ns, tag="sentinel", log=log_dir / f"{ns}.log", run=run
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
            child = await _start_synced(
                t, watch, peer, argv, ns=ns, tag="sentinel-2", log=log_dir / f"{ns}-idle.log"
            )
            run.rss_idle_mib = child.rss_mib()
    except Exception as exc:
        run.error = f"{type(exc).__name__}: {exc}" + (child.tail(8) if child is not None else "")
    finally:
        if child is not None:
            child.stop()
        await delete_namespace(t, ns)
    if backlog:
        await _backlog(
            t, peer, run, kubeconfig=kubeconfig, concurrency=concurrency, log_dir=log_dir, timeout=timeout
        )
    return run


async def _backlog(
    t: Transport,
    peer: Peer,
    run: Run,
    *,
    kubeconfig: Path,
    concurrency: int,
    log_dir: Path,
    timeout: float,  # noqa: ASYNC109
) -> None:
    """Step 5: ``run.n`` Items created with no program running, then the program started."""
    ns = f"bench-{peer.key.replace('_', '-')}-{run.n}-r{run.round}-backlog"
    child: _procs.Child | None = None
    await create_namespace(t, ns)
    try:
        names = item_names(run.n)
        await create_items(t, ns, names)
        await asyncio.sleep(1.0)  # let the apiserver and etcd settle after the creates
        async with Convergence(t, ns) as watch:
            started = time.perf_counter()
            child = _procs.start(
                peer.key, peer.argv(kubeconfig, ns, concurrency), log_dir / f"{ns}.log", cwd=REPO
            )
            await watch.wait(names, timeout + _START_TIMEOUT, alive=child.alive, at_least=1)
            startup_cpu = child.cpu_seconds()
            head = len(watch.converged_at.keys() & set(names))  # converged by the CPU reading
            last = await watch.wait(names, timeout + _START_TIMEOUT, alive=child.alive)
            cpu = child.cpu_seconds()
            first = min(watch.converged_at[name] for name in names)
            await _procs.wait_quiet(child)
            run.backlog_rss_mib = child.rss_mib()
        run.backlog_seconds = last - first
        run.backlog_objects_per_s = run.n / run.backlog_seconds if run.backlog_seconds > 0 else None
        run.backlog_startup_seconds = first - started
        run.backlog_cpu_seconds = cpu
        run.backlog_startup_cpu_seconds = startup_cpu
        if run.n > head:
            run.backlog_cpu_per_object_us = (cpu - startup_cpu) / (run.n - head) * 1e6
    except Exception as exc:
        run.backlog_error = f"{type(exc).__name__}: {exc}" + (child.tail(8) if child is not None else "")
    finally:
        if child is not None:
            child.stop()
        await delete_namespace(t, ns)
