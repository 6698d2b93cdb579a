"""Real ``redis-server`` processes on free loopback ports, for the redis_admin / prober tests.

Each server runs in the foreground (``--daemonize no``) with persistence off (``--save ''
--appendonly no``), full syncs starting at once (``--repl-diskless-sync-delay 0``) and its dir
under the test's ``tmp_path``; it gets ``PR_SET_PDEATHSIG=SIGKILL`` so
it dies with the test process even if that is killed. ``RedisServers.close`` (the fixture's
teardown) resumes stopped servers, terminates every process and checks each pid is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from examples.rediscluster.shared.redis_admin import DEFAULT_IO_TIMEOUT, RedisConnection
from pyctrl.envtest import poll_until

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise RuntimeError(
            "redis-server not found: apt-get update && apt-get install -y redis-server redis-tools"
        )
    return found


@dataclass
class RedisServer:
    """One redis-server process; ``start`` again after ``kill``/``shutdown`` is an empty restart."""

    name: str
    dir: Path
    password: str | None = None
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    extra: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    pids: list[int] = field(default_factory=list)  # every process this server ever ran
    stopped: bool = False  # SIGSTOPped

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def admin(self, io_timeout: float = DEFAULT_IO_TIMEOUT) -> RedisConnection:
        """This server as the operator addresses it (``redis_admin``), with its password."""
        return RedisConnection(self.host, self.port, self.password, io_timeout)

    def start(self, *, port: int | None = None) -> None:
        """Start (again) empty, optionally on a new port (a restarted pod with a new IP)."""
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is running"
        if port is not None:
            self.port = port
        self.dir.mkdir(parents=True, exist_ok=True)
        args = [redis_server_binary(), "--port", str(self.port), "--bind", self.host, "--save", ""]
        args += ["--appendonly", "no", "--daemonize", "no", "--dir", str(self.dir)]
        args += ["--logfile", str(self.dir / "redis.log"), "--protected-mode", "no"]
        args += ["--repl-diskless-sync-delay", "0"]  # default 5 s: replicas would sync 5 s late
        if self.password is not None:
            args += ["--requirepass", self.password, "--masterauth", self.password]
        self.proc = subprocess.Popen(
            [*args, *self.extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads touch this before exec
        )
        self.pids.append(self.proc.pid)
        poll_until(f"{self.name} ({self.host}:{self.port}) to answer PING", self._answers, 10, interval=0.02)

    def client(self) -> redis.Redis:
        """A plain synchronous client for test set-up and checks."""
        return redis.Redis(
            self.host,
            self.port,
            password=self.password,
            socket_timeout=5,
            decode_responses=True,
            retry=Retry(NoBackoff(), 0),  # no silent re-sends (a SHUTDOWN would be retried for seconds)
        )

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.proc.returncode}; see {self.dir / 'redis.log'}"
            )
        try:
            with self.client() as c:
                return bool(c.ping())
        except redis.RedisError:
            return False

    def shutdown_nosave(self) -> None:
        """``SHUTDOWN NOSAVE NOW`` (a crash without persistence: no wait for lagging replicas)."""
        with self.client() as c, contextlib.suppress(redis.ConnectionError):
            c.shutdown(nosave=True, now=True)
        self.wait_exit()

    def wait_exit(self, timeout: float = 10) -> None:
        assert self.proc is not None
        self.proc.wait(timeout)

    def sigstop(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.stopped = True

    def sigcont(self) -> None:
        if self.proc is not None and self.stopped and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.stopped = False

    def terminate(self) -> None:
        self.sigcont()
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def pid_running(pid: int) -> bool:
    """True while ``pid`` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state != "Z"


class RedisServers:
    """Factory behind the ``redis_servers`` fixture."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.servers: list[RedisServer] = []

    def start(self, n: int, *, password: str | None = None, extra: tuple[str, ...] = ()) -> list[RedisServer]:
        started = []
        for _ in range(n):
            server = RedisServer(
                f"redis-{len(self.servers)}", self.base / f"redis-{len(self.servers)}", password
            )
            server.extra = extra
            self.servers.append(server)
            server.start()
            started.append(server)
        return started

    def close(self) -> None:
        errors = []
        for server in self.servers:
            try:
                server.terminate()
            except Exception as exc:  # keep stopping the others
                errors.append(f"{server.name}: {exc!r}")
        deadline = time.monotonic() + 5
        left = [pid for s in self.servers for pid in s.pids if pid_running(pid)]
        while left and time.monotonic() < deadline:
            time.sleep(0.05)  # poll interval (deadline above)
            left = [pid for pid in left if pid_running(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        if errors or left:
            raise AssertionError(f"redis-server teardown: errors {errors}, pids left running {left}")
