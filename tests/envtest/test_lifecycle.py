"""Starting, stopping and recovering the control plane; clear errors on bad input."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyctrl.envtest import AlreadyRunning, Environment, NodeError
from pyctrl.envtest._http import poll_until
from pyctrl.envtest._process import pid_alive

pytestmark = pytest.mark.controlplane

REPO = Path(__file__).resolve().parents[2]
BUILD_SH = REPO / "tools" / "controlplane" / "build.sh"


def envtest_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyctrl.envtest", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state dir whose control plane is stopped after the test whatever happened."""
    directory = tmp_path / "cp"
    try:
        yield directory
    finally:
        env = Environment.attach(directory)
        if env.processes:
            env.stop()


def test_stop_leaves_no_process_running() -> None:
    env = Environment(local_node=False).start()
    pids = env.pids()
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
    assert all(pid_alive(pid) for pid in pids.values())
    state_dir = env.state_dir
    env.stop()
    assert [name for name, pid in pids.items() if pid_alive(pid)] == []
    assert not state_dir.exists()


def test_a_taken_preferred_port_is_replaced_by_a_free_one() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with Environment(local_node=False, api_port=port) as env:
            assert env.ports["apiserver"] != port
            assert env.http.get("/version")["gitVersion"].startswith("v1.")


def test_cli_start_status_node_stop_start_and_stop_round_trip(state_dir: Path) -> None:
    zero = envtest_cli("start", "--state-dir", str(state_dir), "--nodes", "0")
    assert zero.returncode == 2
    assert "--nodes: must be at least 1, got 0" in zero.stderr
    assert not state_dir.exists()  # refused before anything started

    started = envtest_cli("start", "--state-dir", str(state_dir), "--nodes", "2")
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == str(state_dir / "kubeconfig")
    env = Environment.attach(state_dir)
    assert env.node_names == ["local-node-1", "local-node-2"]
    pids = env.pids()
    assert all(pid_alive(pid) for pid in pids.values())

    again = envtest_cli("start", "--state-dir", str(state_dir), "--nodes", "2")
    assert again.returncode == 0
    assert "already running" in again.stderr
    assert Environment.attach(state_dir).pids() == pids

    status = envtest_cli("status", "--state-dir", str(state_dir))
    assert status.returncode == 0
    assert status.stdout.count("running") == 6  # four components and two nodes

    def node(*args: str) -> subprocess.CompletedProcess[str]:
        return envtest_cli("node", *args, "--state-dir", str(state_dir))

    unknown = node("stop", "local-node-9")
    assert unknown.returncode == 2
    assert (
        "no node 'local-node-9' in this environment; its nodes: local-node-1, local-node-2" in unknown.stderr
    )
    node_pid = pids["local-node-2"]
    running = node("start", "local-node-2")
    assert running.returncode == 2
    assert f"node 'local-node-2' is already running (pid {node_pid})" in running.stderr

    off = node("stop", "local-node-2")
    assert off.returncode == 0, off.stderr
    assert not pid_alive(node_pid)
    status = envtest_cli("status", "--state-dir", str(state_dir))
    assert status.returncode == 0  # a node stopped on purpose is not a failure
    assert "local-node-2\t-\tstopped" in status.stdout
    twice = node("stop", "local-node-2")
    assert twice.returncode == 2
    assert "node 'local-node-2' is already stopped" in twice.stderr

    on = node("start", "local-node-2")
    assert on.returncode == 0, on.stderr
    restarted = Environment.attach(state_dir).pids()
    assert pid_alive(restarted["local-node-2"])
    ready = env.http.get("/api/v1/nodes/local-node-2")["status"]["conditions"]
    assert {"type": "Ready", "status": "True"}.items() <= next(
        c for c in ready if c["type"] == "Ready"
    ).items()

    stopped = envtest_cli("stop", "--state-dir", str(state_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert [pid for pid in {**pids, **restarted}.values() if pid_alive(pid)] == []


def test_an_environment_without_nodes_names_none(tmp_path: Path) -> None:
    env = Environment(state_dir=tmp_path, local_node=False)
    assert env.node_names == []
    with pytest.raises(NodeError, match=r"no node 'local-node' in this environment; its nodes: none"):
        env.stop_node("local-node")
    with pytest.raises(ValueError, match="nodes must be at least 1, got 0"):
        Environment(state_dir=tmp_path, nodes=0)


def test_start_recovers_a_stale_state_dir_from_a_killed_run(state_dir: Path) -> None:
    assert envtest_cli("start", "--state-dir", str(state_dir), "--no-local-node").returncode == 0
    old = Environment.attach(state_dir)
    killed = old.pids()["kube-apiserver"]
    os.kill(killed, signal.SIGKILL)  # a crashed run: the rest survive
    # SIGKILL is delivered asynchronously: a Go process with many threads takes a moment to exit.
    poll_until("the killed kube-apiserver to exit", lambda: not pid_alive(killed), 30)
    survivors = [old.pids()[name] for name in ("etcd", "kube-controller-manager", "kube-scheduler")]

    env = Environment(state_dir=state_dir, local_node=False, attached=False)
    env.start()
    assert env.running()
    assert [pid for pid in survivors if pid_alive(pid)] == []
    assert env.http.get("/version")["gitVersion"].startswith("v1.")
    with pytest.raises(AlreadyRunning, match="already running"):
        Environment(state_dir=state_dir, local_node=False, attached=False).start()


def test_cli_bin_dir_prints_the_five_binaries() -> None:
    out = envtest_cli("bin-dir")
    assert out.returncode == 0, out.stderr
    directory = Path(out.stdout.strip())
    assert sorted(p.name for p in directory.iterdir() if not p.name.startswith(".")) == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubectl",
    ]


def _run_build(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYCTRL_CACHE_DIR": str(tmp_path / "cache"), **env}
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(BUILD_SH)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        check=False,
    )


def test_build_without_go_names_the_missing_toolchain(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("awk", "cat", "sha256sum", "cut", "head", "dirname", "date", "mkdir"):
        found = shutil.which(tool)
        assert found is not None
        (bindir / tool).symlink_to(found)
    result = _run_build(tmp_path, PATH=str(bindir))
    assert result.returncode != 0
    assert "step 'check toolchain'" in result.stderr
    assert "no 'go' command" in result.stderr


def test_a_failing_build_names_the_step_and_the_log(tmp_path: Path) -> None:
    result = _run_build(tmp_path, GOOS="no-such-os")
    assert result.returncode != 0
    assert "step 'go" in result.stderr
    log = tmp_path / "cache" / "controlplane" / "v1.36.3" / "build.log"
    assert f"see {log}" in result.stderr
    assert log.exists()


def test_an_apiserver_restarted_through_attach_is_still_stopped_by_the_cli(state_dir: Path) -> None:
    assert envtest_cli("start", "--state-dir", str(state_dir), "--no-local-node").returncode == 0
    env = Environment.attach(state_dir)
    old = env.pids()["kube-apiserver"]
    env.stop_apiserver()
    env.start_apiserver()
    new = Environment.attach(state_dir).pids()["kube-apiserver"]
    assert new != old
    assert pid_alive(new)
    assert env.http.get("/version")["gitVersion"].startswith("v1.")
    assert envtest_cli("stop", "--state-dir", str(state_dir)).returncode == 0
    assert not pid_alive(new)
