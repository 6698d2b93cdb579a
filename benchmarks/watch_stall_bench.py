"""``python -m benchmarks.watch_stall_bench``: how fast a frozen watch is noticed, pyctrl vs client-go.

Starts its own control plane (etcd + kube-apiserver + kube-controller-manager, no node) unless
``--kubeconfig`` is given, builds the client-go peer (``peers/client-go-watch/build.sh``, through
the Go module proxy, into the cache directory), and runs both programs on one namespace, each
through the same :class:`~pyctrl.testing.FaultProxy`:

- ``peers/watch_stall_pyctrl.py``: a pyctrl informer cache on ConfigMaps (defaults:
  ``watch_stall_timeout`` 30 s);
- ``peers/client-go-watch``: a client-go shared informer on ConfigMaps (defaults: HTTP/2 with its
  connection health check, a ping after 30 s without a frame and the connection dropped 15 s
  later without an answer).

Each of ``--trials`` rounds waits a random 0-``--spread`` s (so the freeze falls anywhere in the
programs' watch and ping cycles: both restarted theirs at the previous trial's end; the waits are
stratified, one in each ``1/trials`` of the spread, in random order, so five trials cover the
cycles evenly instead of by luck), freezes every open connection of the proxy (they stay open, carry
nothing: a half-open connection), then updates a ConfigMap straight on the apiserver, and times
from the freeze to the arrival of that update at each program (the line it prints, timestamped
here as it is read). Connections made after the freeze flow, so a program that notices the freeze
and opens a new watch gets the update.

Nothing is asserted. Prints each trial, the medians, and last
``RATIO watch_stall_detect_vs_client_go <pyctrl median / client-go median>`` (lower is better).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from benchmarks._peers import REPO
from benchmarks._procs import _die_with_parent
from pyctrl.client import (
    AlreadyExists,
    ApiClient,
    ConfigMap,
    Namespace,
    NotFound,
    ObjectMeta,
    load_kubeconfig,
)
from pyctrl.testing import FaultProxy

_BUILD = REPO / "benchmarks" / "peers" / "client-go-watch" / "build.sh"
LOGS = Path.home() / ".cache" / "pyctrl" / "bench" / "logs"
NAMESPACE = "watch-stall-bench"


class Program:
    """A peer as a child process whose stdout lines are JSON events, timestamped as read."""

    def __init__(self, label: str, proc: asyncio.subprocess.Process) -> None:
        self.label, self.proc = label, proc
        self.synced = asyncio.Event()
        #: (arrival time, event) of every line.
        self.events: list[tuple[float, dict[str, str]]] = []
        self.changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, label: str, argv: list[str], log: Path) -> Program:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        return cls(label, proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            at = time.monotonic()
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == "synced":
                self.synced.set()
            async with self.changed:
                self.events.append((at, event))
                self.changed.notify_all()

    async def arrival(self, name: str, value: str, after: float) -> float:
        """When the update of ``name`` to ``value`` arrived (waits for it)."""

        def found() -> float | None:
            for at, e in self.events:
                if at >= after and e.get("name") == name and e.get("v") == value:
                    return at
            return None

        async with self.changed:
            await self.changed.wait_for(lambda: found() is not None or self.proc.returncode is not None)
        at = found()
        if at is None:
            raise RuntimeError(f"{self.label} exited (code {self.proc.returncode}) before the update came")
        return at

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


def build_client_go() -> Path:
    """Build (or find) the client-go peer; its binary."""
    print(f"watch-stall: building the client-go peer ({_BUILD.relative_to(REPO)})", flush=True)
    done = subprocess.run([str(_BUILD)], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{_BUILD} failed (exit {done.returncode}); its log is named above")
    return Path(done.stdout.strip().splitlines()[-1])


async def run(kubeconfig: Path, client_go: Path, a: argparse.Namespace) -> tuple[list[float], list[float]]:
    config = await load_kubeconfig(kubeconfig)
    server = urlsplit(config.host)
    assert server.hostname
    assert server.port
    async with ApiClient(config) as direct, FaultProxy(server.hostname, server.port) as proxy:
        with contextlib.suppress(AlreadyExists):  # left by an earlier run on a given cluster: reused
            await direct.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))
        try:
            probe = await direct.get(ConfigMap, "probe", namespace=NAMESPACE)
        except NotFound:
            probe = await direct.create(
                ConfigMap(metadata=ObjectMeta(name="probe", namespace=NAMESPACE), data={"v": "start"})
            )
        url = proxy.url("https")
        common = ["--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE]
        programs = [
            await Program.start(
                "pyctrl",
                [sys.executable, "-m", "benchmarks.peers.watch_stall_pyctrl", *common, "--server", url],
                LOGS / "watch-stall-pyctrl.log",
            ),
            await Program.start(
                "client-go",
                [str(client_go), "-kubeconfig", str(kubeconfig), "-namespace", NAMESPACE, "-server", url],
                LOGS / "watch-stall-client-go.log",
            ),
        ]
        times: dict[str, list[float]] = {p.label: [] for p in programs}
        try:
            await asyncio.wait_for(asyncio.gather(*(p.synced.wait() for p in programs)), 120)
            print(f"watch-stall: both programs synced through the proxy (logs in {LOGS})", flush=True)
            rng = random.Random(a.seed)
            slots = rng.sample(range(a.trials), a.trials)  # stratified: one wait in each slot
            for trial, slot in enumerate(slots, 1):
                await asyncio.sleep((slot + rng.random()) * a.spread / a.trials)  # a random phase
                frozen = proxy.freeze()
                frozen_at = time.monotonic()
                value = f"trial-{trial}-{time.time_ns()}"
                probe = await direct.get(ConfigMap, "probe", namespace=NAMESPACE)
                probe.data = {"v": value}
                await direct.update(probe)
                arrivals = await asyncio.wait_for(
                    asyncio.gather(*(p.arrival("probe", value, frozen_at) for p in programs)), a.timeout
                )
                figures = []
                for p, at in zip(programs, arrivals, strict=True):
                    times[p.label].append(at - frozen_at)
                    figures.append(f"{p.label} {at - frozen_at:5.1f} s")
                print(
                    f"watch-stall: trial {trial}/{a.trials} ({frozen} connections frozen): "
                    + ", ".join(figures),
                    flush=True,
                )
        finally:
            for p in programs:
                await p.stop()
            with contextlib.suppress(NotFound):
                await direct.delete(probe)
    return times["pyctrl"], times["client-go"]


def main() -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.watch_stall_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--kubeconfig", type=Path, help="a running control plane (default: start one)")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--spread", type=float, default=30.0, help="random wait before each freeze, 0-N s")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds a trial may take at most")
    p.add_argument("--seed", type=int, default=None)
    a = p.parse_args()
    if a.trials < 1:
        p.error("--trials must be at least 1")
    client_go = build_client_go()
    if a.kubeconfig is not None:
        pyctrl, client_go_times = asyncio.run(run(a.kubeconfig, client_go, a))
    else:
        from pyctrl.envtest import Environment

        print("watch-stall: starting a control plane", flush=True)
        with Environment(local_node=False) as env:
            pyctrl, client_go_times = asyncio.run(run(env.kubeconfig_path, client_go, a))
    med_py, med_go = statistics.median(pyctrl), statistics.median(client_go_times)
    print(f"watch-stall: freeze → first event after it, median of {a.trials}:")
    print(f"  pyctrl (watch_stall_timeout 30 s)           {med_py:5.1f} s   {[round(t, 1) for t in pyctrl]}")
    rounded = [round(t, 1) for t in client_go_times]
    print(f"  client-go (HTTP/2 health check 30 s + 15 s) {med_go:5.1f} s   {rounded}")
    print(f"RATIO watch_stall_detect_vs_client_go {med_py / med_go:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
