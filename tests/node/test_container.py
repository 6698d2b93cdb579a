"""A container over time with real processes: restarts per policy, crash-loop back-off, startup,
readiness and liveness probes, and the status flush on exit (no control plane needed)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest.node.container import Backoff, Container
from pyctrl.envtest.node.runtime import Launch
from pyctrl.testing import eventually

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


class FakePod:
    """The ContainerHost side: launches straight from ``command``, records status flushes."""

    pod_ip = "127.0.0.1"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.container: Container | None = None
        self.flushed: list[dict[str, Any]] = []

    async def launch_for(self, spec: Mapping[str, Any]) -> Launch:
        command = list(spec["command"])
        executable = shutil.which(command[0], path=ENV["PATH"])
        assert executable is not None
        d = self.directory
        return Launch(executable, command, dict(ENV), d / "c.log", d / "rootfs", d / "spec.json")

    def status_changed(self) -> None:
        pass

    async def flush_status(self) -> None:
        assert self.container is not None
        self.flushed.append(self.container.status())

    def grace_period(self) -> float:
        return 1.0


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., tuple[Container, FakePod]]]:
    made: list[Container] = []

    def factory(
        spec: dict[str, Any], policy: str = "Always", backoff: float = 0.2
    ) -> tuple[Container, FakePod]:
        pod = FakePod(tmp_path)
        container = Container(
            dict(spec, name="c", image="redis"),
            pod,
            restart_policy=policy,
            backoff=Backoff(backoff, backoff * 2),
        )
        pod.container = container
        made.append(container)
        return container, pod

    yield factory
    for container in made:
        await container.stop(0, pre_stop=False)
        assert container.process is None or container.process.returncode is not None


async def test_a_crashing_container_restarts_at_once_then_waits_in_crash_loop_back_off(
    make: Callable[..., tuple[Container, FakePod]],
) -> None:
    container, pod = make({"command": ["sh", "-c", "exit 3"]})
    container.start()
    await eventually(
        lambda: container.state.get("waiting", {}).get("reason") == "CrashLoopBackOff",
        within=10,
        what="CrashLoopBackOff",
        interval=0.02,
    )
    assert container.restart_count == 1  # the first restart happened at once
    assert container.last_state["terminated"]["exitCode"] == 3
    assert container.last_state["terminated"]["reason"] == "Error"
    assert pod.flushed[0]["state"]["terminated"]["exitCode"] == 3
    assert not pod.flushed[0]["ready"]
    await eventually(
        lambda: container.restart_count >= 3, within=10, what="a restart after the back-off", interval=0.02
    )


async def test_on_failure_stops_after_success_and_never_does_not_restart(
    make: Callable[..., tuple[Container, FakePod]],
) -> None:
    on_failure, _ = make({"command": ["sh", "-c", "exit 0"]}, policy="OnFailure")
    never, _ = make({"command": ["sh", "-c", "exit 5"]}, policy="Never")
    assert await asyncio.wait_for(on_failure.start(), 10) == 0
    assert await asyncio.wait_for(never.start(), 10) == 5
    assert (on_failure.restart_count, never.restart_count) == (0, 0)
    assert on_failure.state["terminated"]["reason"] == "Completed"
    assert never.state["terminated"]["exitCode"] == 5


async def test_without_probes_a_running_container_is_started_and_ready(
    make: Callable[..., tuple[Container, FakePod]],
) -> None:
    container, _ = make({"command": ["sleep", "60"]})
    container.start()
    await eventually(lambda: container.ready, within=10, what="ready", interval=0.02)
    assert container.started
    assert "running" in container.state
    assert (
        container.status()["containerID"] == f"pyctrl://{container.process.pid if container.process else 0}"
    )


def attempts(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


async def test_the_startup_probe_holds_started_and_ready_until_it_succeeds(
    make: Callable[..., tuple[Container, FakePod]], tmp_path: Path
) -> None:
    mark, tries = tmp_path / "up", tmp_path / "tries"
    check = f"echo x >> {tries}; test -f {mark}"
    probe = {"exec": {"command": ["sh", "-c", check]}, "periodSeconds": 0.05, "failureThreshold": 1000}
    container, _ = make({"command": ["sleep", "60"], "startupProbe": probe})
    container.start()
    await eventually(
        lambda: attempts(tries) >= 3, within=10, what="three failed startup probes", interval=0.02
    )
    assert "running" in container.state
    assert (container.started, container.ready) == (False, False)
    mark.touch()
    await eventually(
        lambda: container.started and container.ready, within=10, what="started and ready", interval=0.02
    )


async def test_a_failing_readiness_probe_keeps_a_running_container_unready(
    make: Callable[..., tuple[Container, FakePod]], tmp_path: Path
) -> None:
    tries = tmp_path / "tries"
    probe = {"exec": {"command": ["sh", "-c", f"echo x >> {tries}; exit 1"]}, "periodSeconds": 0.05}
    container, _ = make({"command": ["sleep", "60"], "readinessProbe": probe})
    container.start()
    await eventually(
        lambda: attempts(tries) >= 3, within=10, what="three failed readiness probes", interval=0.02
    )
    assert container.started
    assert "running" in container.state
    assert not container.ready


async def test_a_failing_liveness_probe_kills_and_restarts_the_container(
    make: Callable[..., tuple[Container, FakePod]],
) -> None:
    probe = {"tcpSocket": {"port": 9}, "periodSeconds": 0.05, "failureThreshold": 2}
    container, _ = make({"command": ["sleep", "60"], "livenessProbe": probe})
    container.start()
    await eventually(lambda: container.restart_count >= 1, within=10, what="a restart", interval=0.02)
    assert container.last_state["terminated"]["exitCode"] == 143
