"""Fixtures of the client tests: ``backend`` runs a test against the fake and the real apiserver."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
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


RestartApiserver = Callable[..., Awaitable[None]]


@pytest.fixture
def restart_apiserver(envtest: Environment) -> RestartApiserver:
    """``await restart_apiserver(compact=False)``: stop kube-apiserver, optionally compact etcd, start it.

    ``start_apiserver`` runs on the main thread (blocking the loop for a few seconds): envtest's
    processes die with the *thread* that started them (PR_SET_PDEATHSIG), and a worker thread of
    ``asyncio.to_thread`` ends with the test's event loop. The apiserver must come back on the
    same port: the clients under test keep their configuration.
    """

    async def restart(*, compact: bool = False) -> None:
        url = envtest.server_url
        await asyncio.to_thread(envtest.stop_apiserver)
        if compact:
            await asyncio.to_thread(envtest.compact_etcd)
        envtest.start_apiserver()
        assert envtest.server_url == url, "the apiserver came back on another port"
        # later tests need kube-controller-manager to have reconnected (it creates the default
        # ServiceAccount of new namespaces); its own backoff can reach 30 s after repeated outages
        probe = f"restart-probe-{uuid.uuid4().hex[:6]}"
        await asyncio.to_thread(envtest.create_namespace, probe, 120.0)
        await asyncio.to_thread(envtest.delete_namespace, probe)

    return restart
