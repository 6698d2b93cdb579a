"""Child processes of the local control plane (controller-runtime ``pkg/internal/testing/process``).

Guarantees:
- every process is started in its own session with stdout/stderr going to a log file;
- an *attached* process (the default, used by tests) started from the main thread gets
  ``PR_SET_PDEATHSIG=SIGKILL``, so it dies with the Python process that started it even if that
  process is killed with SIGKILL (from other threads it is not set: it would fire when that thread
  ends);
- ``stop`` sends SIGTERM to the process group, waits up to ``grace`` seconds, then SIGKILLs it,
  and returns only once the process is gone;
- a pid recorded in a state file is only trusted while ``/proc/<pid>/cmdline`` still names the same
  executable, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ManagedProcess", "free_port", "pid_alive", "port_free", "start_process"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and it can be bound.

    ``SO_REUSEADDR`` as Go's listeners use it: connections of a stopped server lingering in
    TIME_WAIT do not make its port busy.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(preferred: int | None = None, host: str = "127.0.0.1", avoid: set[int] | None = None) -> int:
    """``preferred`` when it is free, else a port the kernel hands out that is not in ``avoid``."""
    avoid = avoid or set()
    if preferred and preferred not in avoid and port_free(preferred, host):
        return preferred
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port


def pid_alive(pid: int, executable: str | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if given, its argv[0] is ``executable``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return executable is None or (bool(cmdline) and cmdline[0].decode(errors="replace") == executable)


@dataclass
class ManagedProcess:
    """One started process: its name (for messages), argv, log file and pid."""

    name: str
    argv: list[str]
    log_path: Path
    pid: int
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid, self.argv[0])

    def exit_code(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def terminate(self) -> None:
        """SIGTERM the process group (``stop`` then waits for it)."""
        if self.alive():
            self._signal(signal.SIGTERM)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL after ``grace`` seconds; return once it is gone."""
        if not self.alive():
            self._reap()
            return
        self._signal(signal.SIGTERM)
        if not self._wait_gone(grace):
            self._signal(signal.SIGKILL)
            if not self._wait_gone(10.0):
                raise RuntimeError(f"{self.name} (pid {self.pid}) survived SIGKILL")
        self._reap()

    def _signal(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def _wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen is not None:
                try:
                    self.popen.wait(timeout=0.05)
                    return True
                except subprocess.TimeoutExpired:
                    continue
            if not self.alive():
                return True
            time.sleep(0.05)  # polling a foreign pid: there is no wait() for non-children
        return not self.alive()

    def _reap(self) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=1)


def start_process(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    *,
    attached: bool,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    pass_fds: Sequence[int] = (),
) -> ManagedProcess:
    """Start ``argv`` in a new session, appending its output to ``log_path``; ``pass_fds`` stay
    open in it (a lock the process then holds as long as it lives)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits: only the main thread lives as
    # long as the process. From another thread (asyncio.to_thread, say) the child would die with
    # that thread, so it is not set there; Environment.stop (and its atexit hook) still stop it.
    on_main = threading.current_thread() is threading.main_thread()
    preexec: Callable[[], None] | None = _die_with_parent if attached and on_main else None
    with log_path.open("ab") as log:
        try:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # prctl must run in the child; pyctrl starts these from one thread only.
                preexec_fn=preexec,  # noqa: PLW1509
                env=env,
                cwd=cwd,
                pass_fds=tuple(pass_fds),
            )
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EACCES):
                raise RuntimeError(f"cannot start {name}: {argv[0]}: {exc.strerror}") from exc
            raise
    return ManagedProcess(name=name, argv=list(argv), log_path=log_path, pid=popen.pid, popen=popen)
