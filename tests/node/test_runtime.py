"""Container processes: private mount namespace with volumes at their mountPaths, the host left
untouched, exec inside, SIGTERM/SIGKILL of the whole group, and death with the node."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pyctrl.envtest.node.images import StartError
from pyctrl.envtest.node.runtime import ContainerProcess, Launch, Mount, exec_in, start_container

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def launch(tmp_path: Path, script: str, mounts: list[Mount] | None = None, **kw: object) -> Launch:
    return Launch(
        executable="/bin/sh",
        argv=["sh", "-c", script],
        env=dict(ENV, **kw.pop("env", {})),  # type: ignore[arg-type]
        log_path=tmp_path / "c.log",
        root=tmp_path / "rootfs",
        spec_path=tmp_path / "spec.json",
        mounts=mounts or [],
        **kw,  # type: ignore[arg-type]
    )


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def directory(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir()
    for name, text in (files or {}).items():
        (path / name).write_text(text)
    return path


def exists(path: Path) -> bool:
    return path.exists()


async def wait_for_log(path: Path, text: str, seconds: float = 10) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in (content := read(path)):
            return content
        await asyncio.sleep(0.02)  # poll interval (deadline above)
    raise AssertionError(f"{text!r} not in {path}: {read(path)!r}")


@pytest.fixture
async def processes() -> AsyncIterator[list[ContainerProcess]]:
    """Every container started through it is SIGKILLed after the test, whatever happened."""
    started: list[ContainerProcess] = []
    yield started
    for proc in started:
        await proc.stop(0)
    assert [p.pid for p in started if alive(p.pid)] == []


async def test_volumes_appear_at_their_mount_paths_and_the_host_is_not_touched(
    tmp_path: Path, processes: list[ContainerProcess]
) -> None:
    data = directory(tmp_path / "data")
    config = directory(tmp_path / "config", {"app.conf": "color=blue\n"})
    missing = Path("/pyctrl-node-test-mountpoint")
    assert not exists(missing)
    script = (
        f"cat /etc/app-config/app.conf; echo hello > {missing}/file; echo cwd=$(pwd); hostname; exec sleep 60"
    )
    mounts = [Mount(str(data), str(missing)), Mount(str(config), "/etc/app-config", readonly=True)]
    proc = await start_container(
        launch(tmp_path, script, mounts, workdir="/var/lib/pyctrl-wd", hostname="web-0")
    )
    processes.append(proc)
    log = await wait_for_log(tmp_path / "c.log", "web-0")
    assert "color=blue" in log
    assert "cwd=/var/lib/pyctrl-wd" in log
    assert read(data / "file") == "hello\n"
    assert not exists(missing)
    assert not exists(Path("/etc/app-config"))
    assert not exists(Path("/var/lib/pyctrl-wd"))
    code, out = await exec_in(proc.pid, ["sh", "-c", "hostname; touch /etc/app-config/x"], ENV, seconds=5)
    assert code != 0
    assert "web-0" in out
    assert "Read-only file system" in out


async def test_exec_in_runs_inside_the_container_and_is_killed_on_timeout(
    tmp_path: Path, processes: list[ContainerProcess]
) -> None:
    vol = directory(tmp_path / "vol")
    proc = await start_container(launch(tmp_path, "exec sleep 60", [Mount(str(vol), "/pyctrl-exec-vol")]))
    processes.append(proc)
    code, out = await exec_in(
        proc.pid, ["sh", "-c", "echo $GREETING > /pyctrl-exec-vol/f; echo done"], dict(ENV, GREETING="hi"), 5
    )
    assert (code, out) == (0, "done\n")
    assert read(vol / "f") == "hi\n"
    with pytest.raises(TimeoutError):
        await exec_in(proc.pid, ["sh", "-c", "echo $$ > /pyctrl-exec-vol/pid; exec sleep 60"], ENV, 0.5)
    stuck = int(read(vol / "pid"))
    assert not alive(stuck)


async def test_stop_sends_sigterm_to_the_whole_group_and_sigkills_after_the_grace_period(
    tmp_path: Path, processes: list[ContainerProcess]
) -> None:
    script = "sleep 60 & echo child=$!; trap 'echo got TERM' TERM; while true; do sleep 0.05; done"
    proc = await start_container(launch(tmp_path, script))
    processes.append(proc)
    log = await wait_for_log(tmp_path / "c.log", "child=")
    child = int(log.split("child=")[1].split()[0])
    start = time.monotonic()
    code = await proc.stop(grace=0.5)
    elapsed = time.monotonic() - start
    assert code == 128 + signal.SIGKILL
    assert 0.5 <= elapsed < 5
    assert "got TERM" in read(tmp_path / "c.log")
    assert not alive(proc.pid)
    assert not alive(child)


async def test_a_process_that_exits_on_sigterm_reports_its_own_exit_code(
    tmp_path: Path, processes: list[ContainerProcess]
) -> None:
    proc = await start_container(
        launch(tmp_path, "trap 'exit 7' TERM; echo up; while true; do sleep 0.05; done")
    )
    processes.append(proc)
    await wait_for_log(tmp_path / "c.log", "up")
    assert await proc.stop(grace=10) == 7


async def test_a_missing_executable_is_a_start_error(tmp_path: Path) -> None:
    bad = launch(tmp_path, "")
    bad.executable = str(tmp_path / "no-such-program")
    with pytest.raises(StartError, match=r"no-such-program.*No such file"):
        await start_container(bad)


def test_container_processes_die_when_the_node_is_killed(tmp_path: Path) -> None:
    """A 'node' process starts a container, then is SIGKILLed: the container dies with it."""
    node = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from pyctrl.envtest.node.runtime import Launch, start_container
        async def main():
            d = Path({str(tmp_path)!r})
            spec = Launch("/bin/sleep", ["sleep", "120"], {{}}, d / "c.log", d / "root", d / "s.json")
            p = await start_container(spec)
            print(p.pid, flush=True)
            await asyncio.sleep(120)  # the child idles until killed (not a poll, no deadline needed)
        asyncio.run(main())
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", node], stdout=subprocess.PIPE, text=True)
    container = 0
    try:
        assert proc.stdout is not None
        container = int(proc.stdout.readline())
        assert alive(container)
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 10
        while alive(container) and time.monotonic() < deadline:
            time.sleep(0.02)  # poll interval (deadline above)
        assert not alive(container)
    finally:
        proc.kill()
        proc.wait(10)
        if container and alive(container):
            os.kill(container, signal.SIGKILL)
