"""Fixtures of the client tests: ``backend`` runs a test against the fake and the real apiserver."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pyctrl.client import ApiClient, load_kubeconfig
from pyctrl.envtest import Environment
from tests.client.support import WIDGET_CRD, Backend, fake_client


@pytest.fixture(scope="session")
def widget_crd(envtest: Environment) -> str:
    """Install the test CRD once per session."""
    return envtest.install_crds([WIDGET_CRD])[0]


@pytest.fixture
async def api(kubeconfig: Path, widget_crd: str) -> AsyncIterator[ApiClient]:
    """An apiserver client (admin), closed after the test."""
    client = ApiClient(await load_kubeconfig(kubeconfig))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def real_backend(api: ApiClient, namespace: str) -> Backend:
    return Backend("real", api, namespace)


@pytest.fixture
def fake_backend() -> Backend:
    return Backend("fake", fake_client(), "test-ns")


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.controlplane)])
def backend(request: pytest.FixtureRequest) -> Backend:
    """The same behavioural test against the fake client and the real apiserver."""
    found: Backend = request.getfixturevalue(f"{request.param}_backend")
    return found
