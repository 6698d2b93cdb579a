"""The real-node environment every test of tests/realnode shares (``make e2e``).

``PYCTRL_E2E_STATE_DIR=DIR`` runs the tests on an environment already started with
``python -m pyctrl.envtest start --runtime kubelet --nodes 2 --state-dir DIR`` (attached to, and
left running: its teardown is the user's ``stop``), which saves its start while working on a test.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from pyctrl.envtest import Environment
from pyctrl.envtest._process import pid_alive
from pyctrl.envtest.realnode import host


def _links() -> str:
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="session")
def env() -> Iterator[Environment]:
    """Two real nodes and CoreDNS; its teardown checks that nothing of it is left on the machine."""
    if state_dir := os.environ.get("PYCTRL_E2E_STATE_DIR"):
        attached = Environment.attach(state_dir)
        assert attached.running(), f"no environment runs in {state_dir}"
        assert attached.real is not None, f"the environment in {state_dir} has no real nodes"
        assert len(attached.node_names) == 2, attached.node_names
        yield attached
        return
    environment = Environment(runtime="kubelet", nodes=2)
    environment.start()
    assert environment.real is not None
    assert environment.real.plan is not None
    plan = environment.real.plan
    try:
        yield environment
    finally:
        pids = list(environment.pids().values())  # nodes (unshare) and the control plane
        environment.stop()
    # Nothing of it is left: no bridge or veth, no route of its range, no cgroup, no process.
    assert plan.bridge not in _links()
    assert f"pyctrl{plan.slot}n" not in _links()
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True, check=True).stdout
    assert f"10.{200 + plan.slot}." not in routes, routes
    for index in (1, 2):
        name = host.cgroup_name(plan, index).lstrip("/")
        assert not any((h / name).exists() for h in host._hierarchies()), name
    assert not [pid for pid in pids if pid_alive(pid)]
