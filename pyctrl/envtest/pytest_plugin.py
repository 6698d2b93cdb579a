"""Pytest fixtures for the local control plane.

Load with ``pytest_plugins = ["pyctrl.envtest.pytest_plugin"]``.

- ``envtest``: one started ``Environment`` for the whole session (stopped at the end, even on
  failure or Ctrl-C). CRDs in ``crds/`` beside the rootdir are installed when present.
  ``PYCTRL_ENVTEST_LOCAL_NODE=0`` turns the local node off.
- ``envtest_nodes``: a second control plane for the session with three nodes (``local-node-1`` ..
  ``local-node-3`` in zones zone-a/b/c), started on first use, CRDs installed like ``envtest``.
  A test that stops a node (``stop_node``) or cordons one starts / uncordons it again before it
  ends, so the next test finds three Ready nodes.
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

__all__ = ["envtest", "envtest_nodes", "kubeconfig", "namespace"]


def _crds(request: pytest.FixtureRequest) -> list[Path]:
    crds = Path(str(request.config.rootpath)) / "crds"
    return [crds] if crds.is_dir() and any(crds.glob("*.yaml")) else []


@pytest.fixture(scope="session")
def envtest(request: pytest.FixtureRequest) -> Iterator[Environment]:
    env = Environment(
        crd_directory_paths=_crds(request),
        local_node=os.environ.get("PYCTRL_ENVTEST_LOCAL_NODE", "1") != "0",
    )
    env.start()
    _record_pids(request.config, env.pids())
    try:
        yield env
    finally:
        env.stop()


@pytest.fixture(scope="session")
def envtest_nodes(request: pytest.FixtureRequest) -> Iterator[Environment]:
    env = Environment(crd_directory_paths=_crds(request), nodes=3)
    env.start()
    try:
        yield env
    finally:
        # Recorded at the end: a node started again by a test has a new pid.
        _record_pids(request.config, {f"nodes/{name}": pid for name, pid in env.pids().items()})
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


def _record_pids(config: pytest.Config, pids: dict[str, int]) -> None:
    recorded: dict[str, int] = config.stash.get(_PIDS_KEY, {})
    config.stash[_PIDS_KEY] = {**recorded, **pids}


def session_pids(config: pytest.Config) -> dict[str, int]:
    """Pids of the session's control planes (for the end-of-session orphan check)."""
    return config.stash.get(_PIDS_KEY, {})
