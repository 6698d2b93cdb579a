"""Shared fixtures: the real local control plane (see pyctrl.envtest.pytest_plugin)."""

from __future__ import annotations

import os

import pytest

from pyctrl.envtest._process import pid_alive

pytest_plugins = ["pyctrl.envtest.pytest_plugin"]

# Real nodes (kubelet, containerd, kube-proxy; minutes), three sharded operator replicas over
# 20 RedisClusters (40 redis-servers; minutes), and the HorizontalPodAutoscaler test (it needs
# metrics-server, a long cold build): `make e2e` only, which sets PYCTRL_E2E=1.
E2E_ONLY = ["realnode", "operator/test_sharded_operators.py", "operator/test_autoscaling.py"]
collect_ignore = [] if os.environ.get("PYCTRL_E2E") == "1" else E2E_ONLY


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a control-plane process of the session outlives it."""
    from pyctrl.envtest.pytest_plugin import session_pids

    left = {name: pid for name, pid in session_pids(session.config).items() if pid_alive(pid)}
    if left:
        print(f"\nERROR: control-plane processes left running after the session: {left}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
