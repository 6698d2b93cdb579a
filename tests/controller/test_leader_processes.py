"""Two leader-elected manager processes (tests/controller/leader_process.py) on the real control
plane: one leader at a time, takeover after SIGKILL, SIGTERM with release_on_cancel, and a leader
cut off from the apiserver stopping before its lease can be taken.

Short timings (lease duration 4 s, renew deadline 3 s, retry period 1 s) instead of 15/10/2.
Deadlines are the semantic bounds plus a margin of MARGIN seconds for the winner's acquire request,
its informer sync and its first reconcile; measured takeover times are printed (``-s``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pyctrl.envtest import Environment, poll_until
from pyctrl.envtest._process import pid_alive

pytestmark = pytest.mark.controlplane

# Shorter than the defaults (15/10/2 s) to keep the tests quick, with LEASE well above the
# SIGTERM bound (JITTER * RETRY + MARGIN = 3.2 s): a standby that took over without the release
# would need the lease to expire first, at least LEASE - RETRY = 7 s after the last renewal.
# MARGIN covers a loaded CI machine (process start-up of the reconcile, scheduling).
LEASE, RENEW, RETRY = 8.0, 6.0, 1.0
JITTER = 1.2  # candidates retry every RETRY * [1, 1.2)
MARGIN = 2.0
REPO = Path(__file__).parents[2]


@dataclass
class Candidate:
    name: str
    proc: subprocess.Popen[bytes]
    out: Path

    def facts(self, fact: str) -> list[float]:
        if not self.out.exists():
            return []
        return [
            float(line.split()[1]) for line in self.out.read_text().splitlines() if line.split()[0] == fact
        ]

    def detail(self, fact: str) -> list[str]:
        lines = self.out.read_text().splitlines() if self.out.exists() else []
        return [" ".join(line.split()[2:]) for line in lines if line.split()[0] == fact]

    def log(self) -> str:
        return (self.out.parent / f"{self.name}.log").read_text(errors="replace")[-3000:]


@pytest.fixture
def spawn(kubeconfig: Path, namespace: str, tmp_path: Path) -> Iterator[Callable[..., Candidate]]:
    """Start leader_process.py instances; every one is killed and reaped in teardown, checked by pid."""
    started: list[Candidate] = []

    def start(name: str, *extra: str) -> Candidate:
        out, log = tmp_path / f"{name}.facts", (tmp_path / f"{name}.log").open("wb")
        argv = [sys.executable, "-m", "tests.controller.leader_process", "--kubeconfig", str(kubeconfig)]
        argv += ["--namespace", namespace, "--lease", "leader-test", "--out", str(out)]
        argv += ["--timings", f"{LEASE},{RENEW},{RETRY}", *extra]
        proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        started.append(Candidate(name, proc, out))
        return started[-1]

    try:
        yield start
    finally:
        for c in started:
            if c.proc.poll() is None:
                c.proc.kill()
            c.proc.wait(timeout=30)
        alive = [c.proc.pid for c in started if pid_alive(c.proc.pid)]
        assert not alive, f"leader processes left running: {alive}"


@pytest.fixture
def configmap(envtest: Environment, namespace: str) -> None:
    envtest.http.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "work"}})


def wait_for_leader(a: Candidate, b: Candidate, reconciles: int = 5) -> tuple[Candidate, Candidate]:
    def someone_leads() -> bool:
        for c in (a, b):
            assert c.proc.poll() is None, f"{c.name} exited: {c.log()}"
        return max(len(a.facts("reconcile")), len(b.facts("reconcile"))) >= reconciles

    poll_until("a leader reconciling", someone_leads, 60, interval=0.05)
    return (a, b) if len(a.facts("reconcile")) >= reconciles else (b, a)


def first_after(c: Candidate, fact: str, after: float, timeout: float) -> float:
    def happened() -> bool:
        return any(t > after for t in c.facts(fact))

    poll_until(f"{c.name} {fact}", happened, timeout, interval=0.02, on_timeout=c.log)
    return min(t for t in c.facts(fact) if t > after)


@pytest.mark.usefixtures("configmap")
def test_only_one_manager_reconciles_and_a_killed_leaders_lease_is_taken_within_lease_duration_plus_retry(
    spawn: Callable[..., Candidate],
) -> None:
    leader, standby = wait_for_leader(spawn("a"), spawn("b"))
    assert standby.facts("reconcile") == []
    assert standby.facts("leading") == []
    killed_at = time.monotonic()
    leader.proc.send_signal(signal.SIGKILL)
    leader.proc.wait(timeout=30)
    first = first_after(standby, "reconcile", killed_at, LEASE + JITTER * RETRY + MARGIN)
    print(f"\ntakeover after SIGKILL: {first - killed_at:.2f}s")
    assert standby.facts("leading")[0] > killed_at


@pytest.mark.usefixtures("configmap")
def test_a_leader_stopped_by_sigterm_releases_the_lease_and_the_standby_takes_over_within_a_retry_period(
    spawn: Callable[..., Candidate],
) -> None:
    leader, standby = wait_for_leader(spawn("a", "--release-on-cancel"), spawn("b", "--release-on-cancel"))
    terminated_at = time.monotonic()
    leader.proc.send_signal(signal.SIGTERM)
    first = first_after(standby, "reconcile", terminated_at, JITTER * RETRY + MARGIN)
    print(f"\ntakeover after SIGTERM with release_on_cancel: {first - terminated_at:.2f}s")
    assert leader.proc.wait(timeout=30) == 0
    assert leader.detail("exit") == ["clean"]
    assert max(leader.facts("reconcile")) < first


@pytest.mark.usefixtures("configmap")
def test_a_leader_cut_off_from_the_apiserver_stops_acting_before_another_takes_the_lease(
    spawn: Callable[..., Candidate],
) -> None:
    leader, standby = wait_for_leader(spawn("a"), spawn("b"))
    cut_at = time.monotonic()
    os.kill(leader.proc.pid, signal.SIGUSR1)
    first = first_after(standby, "reconcile", cut_at, LEASE + JITTER * RETRY + MARGIN)
    print(f"\ntakeover after cutting the leader off: {first - cut_at:.2f}s")
    assert leader.proc.wait(timeout=30) != 0  # exits non-zero on lost leadership, by default
    assert leader.detail("exit") == ["LeaderElectionLost"]
    (stopped,) = leader.facts("stopped-leading")
    (took_over,) = standby.facts("leading")
    assert any(t > leader.facts("cut")[0] for t in leader.facts("reconcile"))  # it did act while cut off
    assert max(leader.facts("reconcile")) < stopped < took_over < first  # never two leaders acting
    print(f"cut-off leader stopped {took_over - stopped:.2f}s before the standby started leading")
