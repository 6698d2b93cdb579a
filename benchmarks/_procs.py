"""The benchmarked programs as child processes: start, measure (RSS, CPU), stop.

Guarantees: every child runs in its own session (a Ctrl-C at the terminal reaches only the
orchestrator, which then stops the children itself), dies with the orchestrator even when that is
killed (``PR_SET_PDEATHSIG``), and :meth:`Child.stop` returns only once the child is gone
(SIGINT — so profilers write their report — then SIGKILL after ``grace`` seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["Child", "start", "wait_quiet"]

_PR_SET_PDEATHSIG = 1
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Child:
    """A running benchmark program; its output goes to ``log``."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.name, self.proc, self.log = name, proc, log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_mib(self) -> float:
        """Resident set size now (``VmRSS``), MiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"{self.name}: no VmRSS for pid {self.pid}")

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far (all threads)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\n  | ".join(["", *text])

    def stop(self, grace: float = 15.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGINT)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait()
        # whatever the program left in its process group (e.g. kopf's executor) goes too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)


def start(
    name: str, argv: Sequence[str], log: Path, *, cwd: Path, env: dict[str, str] | None = None
) -> Child:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (called from the main thread only)
        )
    return Child(name, proc, log)


async def wait_quiet(
    child: Child,
    *,
    window: float = 1.0,
    busy: float = 0.03,
    timeout: float = 60.0,  # noqa: ASYNC109
) -> float:
    """Wait until ``child`` used less than ``busy`` CPU-seconds over ``window`` s; return the wait."""
    started = time.monotonic()
    last = child.cpu_seconds()
    while time.monotonic() - started < timeout and child.alive():
        await asyncio.sleep(window)
        now = child.cpu_seconds()
        if now - last < busy:
            break
        last = now
    return time.monotonic() - started
