"""Fixtures for the local node's control-plane tests (the control plane comes from envtest)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pyctrl.envtest.node.kube import Kube


@pytest.fixture
async def kube(kubeconfig: Path) -> AsyncIterator[Kube]:
    client = await Kube.from_kubeconfig(str(kubeconfig))
    try:
        yield client
    finally:
        await client.close()
