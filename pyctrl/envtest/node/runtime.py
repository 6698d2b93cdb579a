"""Container processes (the local node's container runtime, in the role of CRI/containerd).

Guarantees:
- ``start_container`` returns only once the container's executable is running (``execve``
  succeeded inside the sandbox, see ``sandbox.py``), or raises ``StartError`` with the reason;
- every container process dies with the node: ``PR_SET_PDEATHSIG=SIGKILL`` is set in the process
  itself before it becomes the container, so even a SIGKILLed node leaves no container behind;
- a container is its own process group (new session); signals go to the whole group, so the
  children it forks (redis' background save, a shell's pipeline) are stopped with it;
- ``ContainerProcess.stop(grace)``: SIGTERM to the group, up to ``grace`` seconds, then SIGKILL;
  returns the exit code once the process is gone (128 + signal number when killed by a signal);
- stdout and stderr go, appended, to the container's log file;
- the container runs as ``Launch.user`` (``identity.Credentials``: uid, gid, supplementary
  groups; see ``identity.py``), applied by the sandbox just before ``execve``;
- ``exec_in`` runs a command inside a running container (its mount and UTS namespaces, root and
  working directory, via ``nsenter``) with the container's environment and ids (``setpriv``
  inside it), and kills it (whole group) when it exceeds its time limit; ``spawn_in`` starts one
  with its streams piped (``kubectl exec``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pyctrl.envtest.node import sandbox
from pyctrl.envtest.node.identity import Credentials
from pyctrl.envtest.node.images import StartError

__all__ = [
    "ContainerProcess",
    "Launch",
    "Mount",
    "exec_in",
    "exit_code",
    "kill_group",
    "spawn_in",
    "start_container",
]

_SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
_NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"
_SETSID = shutil.which("setsid") or "/usr/bin/setsid"
_HOST_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    readonly: bool = False


@dataclass
class Launch:
    """Everything needed to start one container."""

    executable: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    root: Path  # an empty directory of the pod, where the sandbox mounts its view of /
    spec_path: Path  # where the sandbox's JSON spec is written
    mounts: list[Mount] = field(default_factory=list)
    workdir: str | None = None
    hostname: str = ""
    # host side of the container's terminationMessagePath (bind-mounted there, read after exit)
    termination_log: Path | None = None
    read_only_root: bool = False  # securityContext.readOnlyRootFilesystem
    no_new_privs: bool = False  # securityContext.allowPrivilegeEscalation: false
    user: Credentials | None = None  # runAsUser/runAsGroup/fsGroup/supplementalGroups; None: root


def exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _killpg(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _read_all(fd: int) -> bytes:
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class ContainerProcess:
    """A running container: pid, wait, signal, stop."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.pid = proc.pid

    @property
    def returncode(self) -> int | None:
        rc = self._proc.returncode
        return None if rc is None else exit_code(rc)

    async def wait(self) -> int:
        """Wait for the container's main process to exit; its exit code (128 + signal if killed)."""
        return exit_code(await self._proc.wait())

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the container's process group."""
        _killpg(self.pid, sig)

    async def stop(self, grace: float) -> int:
        """SIGTERM, wait up to ``grace`` seconds, SIGKILL; the exit code once it is gone."""
        if self._proc.returncode is None:
            self.signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._proc.wait()), max(grace, 0.0))
        # The group may hold children of a process that already exited: SIGKILL it regardless.
        self.signal(signal.SIGKILL)
        return await self.wait()


async def start_container(launch: Launch) -> ContainerProcess:
    """Start ``launch`` in its sandbox; raise ``StartError`` when it cannot be started."""
    launch.log_path.parent.mkdir(parents=True, exist_ok=True)
    launch.root.mkdir(parents=True, exist_ok=True)
    read_fd, write_fd = os.pipe()
    spec = {
        "parent_pid": os.getpid(),
        "status_fd": write_fd,
        "hostname": launch.hostname,
        "root": str(launch.root),
        "mounts": [{"source": m.source, "target": m.target, "readonly": m.readonly} for m in launch.mounts],
        "workdir": launch.workdir,
        "executable": launch.executable,
        "argv": launch.argv,
        "env": launch.env,
        "read_only_root": launch.read_only_root,
        "no_new_privs": launch.no_new_privs,
        "user": None
        if launch.user is None
        else {"uid": launch.user.uid, "gid": launch.user.gid, "groups": list(launch.user.groups)},
    }
    launch.spec_path.write_text(json.dumps(spec))
    try:
        with launch.log_path.open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                sandbox.__file__,
                str(launch.spec_path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(write_fd,),
                env=_HOST_ENV,
            )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    failure = (await asyncio.to_thread(_read_all, read_fd)).decode(errors="replace")
    launch.spec_path.unlink(missing_ok=True)  # it holds the environment, secrets included
    if failure:
        _killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise StartError(failure)
    return ContainerProcess(proc)


async def spawn_in(
    pid: int,
    argv: list[str],
    env: dict[str, str],
    *,
    stdin: bool,
    merge_stderr: bool,
    terminal: int | None = None,
    user: Credentials | None = None,
) -> asyncio.subprocess.Process:
    """Start ``argv`` inside container ``pid`` (its own process group, dying with the node), with
    stdout and stderr piped (``merge_stderr``: both into stdout) and stdin piped or empty; or, with
    ``terminal`` (a pty's follower end), all three on that terminal, its controlling one. The
    command runs as ``user`` (the container's ids) when given."""
    argv = argv if user is None else [_SETPRIV, *user.setpriv_args(), "--", *argv]
    if terminal is not None:
        # setsid(1) -c: a new session (not being a group leader, it does not fork) whose
        # controlling terminal is its stdin, the pty; its pid is the group's, as kill_group wants.
        return await asyncio.create_subprocess_exec(
            _SETSID,
            "--ctty",
            *_in_container(pid, argv),
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env=env,
        )
    return await asyncio.create_subprocess_exec(
        *_in_container(pid, argv),
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
        start_new_session=True,
        env=env,
    )


def _in_container(pid: int, argv: list[str]) -> list[str]:
    return [
        _SETPRIV,
        "--pdeathsig",
        "KILL",
        "--",
        _NSENTER,
        f"--target={pid}",
        "--mount",
        "--uts",
        "--root",
        "--wd",
        "--",
        *argv,
    ]


def kill_group(pid: int) -> None:
    """SIGKILL process group ``pid`` (a container, or a command run in one)."""
    _killpg(pid, signal.SIGKILL)


async def exec_in(
    pid: int, argv: list[str], env: dict[str, str], seconds: float, user: Credentials | None = None
) -> tuple[int, str]:
    """Run ``argv`` inside container ``pid`` as ``user``; (exit code, output). TimeoutError after
    ``seconds``."""
    proc = await spawn_in(pid, argv, env, stdin=False, merge_stderr=True, user=user)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), seconds)
    except BaseException:
        _killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()
        raise
    return exit_code(proc.returncode or 0), out.decode(errors="replace")
