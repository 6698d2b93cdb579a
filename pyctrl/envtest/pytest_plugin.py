"""Pytest fixtures for the local control plane.

Load with ``pytest_plugins = ["pyctrl.envtest.pytest_plugin"]``.

- ``envtest``: one started ``Environment`` for the whole session (stopped at the end, even on
  failure or Ctrl-C). CRDs in ``crds/`` beside the rootdir are installed when present.
  ``PYCTRL_ENVTEST_LOCAL_NODE=0`` turns the local node off.
- ``kubeconfig``: the admin kubeconfig path.
- ``namespace``: a fresh namespace per test (its ``default`` ServiceAccount exists), deleted after.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyctrl.envtest import Environment

__all__ = ["envtest", "kubeconfig", "namespace"]


@pytest.fixture(scope="session")
def envtest(request: pytest.FixtureRequest) -> Iterator[Environment]:
    crds = Path(str(request.config.rootpath)) / "crds"
    env = Environment(
        crd_directory_paths=[crds] if crds.is_dir() and any(crds.glob("*.yaml")) else [],
        local_node=os.environ.get("PYCTRL_ENVTEST_LOCAL_NODE", "1") != "0",
    )
    env.start()
    request.config.stash[_PIDS_KEY] = env.pids()
    try:
        yield env
    finally:
        env.stop()


@pytest.fixture(scope="session")
def kubeconfig(envtest: Environment) -> Path:
    return envtest.kubeconfig_path


@pytest.fixture
def namespace(envtest: Environment, request: pytest.FixtureRequest) -> Iterator[str]:
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    envtest.create_namespace(name)
    try:
        yield name
    finally:
        envtest.delete_namespace(name)


_PIDS_KEY = pytest.StashKey[dict[str, int]]()


def session_pids(config: pytest.Config) -> dict[str, int]:
    """Pids of the session's control plane (for the end-of-session orphan check)."""
    return config.stash.get(_PIDS_KEY, {})
