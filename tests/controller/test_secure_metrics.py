"""The manager's least-privilege options on the real control plane: secure metrics serving
(controller-runtime ``metricsserver.Options{SecureServing: true, FilterProvider:
filters.WithAuthenticationAndAuthorization}``: HTTPS, ServiceAccount tokens from the TokenRequest
API authenticated by TokenReview and authorized by SubjectAccessReview against RBAC, and the cache
of those decisions) and kinds read without the cache (``DisableFor``)."""

from __future__ import annotations

import base64
import contextlib
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pyctrl.client import ApiClient, load_kubeconfig
from pyctrl.client.errors import CacheNotStarted, NotFound
from pyctrl.client.interfaces import Client
from pyctrl.client.objects import ObjectMeta, Secret
from pyctrl.envtest import Environment
from pyctrl.manager import Manager, ManagerError
from pyctrl.manager.filters import AuthFilter, with_authentication_and_authorization
from pyctrl.testing import eventually
from pyctrl.workqueue import FakeClock
from tests._certs import CertAuthority

from ._manager import new_manager, running

pytestmark = pytest.mark.controlplane


@pytest.fixture
async def api(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    client = ApiClient(await load_kubeconfig(kubeconfig))
    try:
        yield client
    finally:
        await client.close()


class Rbac:
    """ServiceAccounts of the test namespace, their tokens, and a metrics-reader ClusterRole."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.role = f"metrics-reader-{uuid.uuid4().hex[:8]}"
        self.bindings: list[str] = []

    async def create_role(self) -> None:
        await self.api.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": self.role},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
            }
        )

    async def token(self, account: str) -> str:
        sa = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": self.namespace},
        }
        with contextlib.suppress(Exception):
            await self.api.create(sa)
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        }
        answer = await self.api.subresource("token").create(sa, request)
        return str(answer["status"]["token"])

    def binding(self, account: str) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{self.role}-{account}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": self.role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.namespace}],
        }

    async def grant(self, account: str) -> None:
        await self.api.create(self.binding(account))
        self.bindings.append(account)

    async def revoke(self, account: str) -> None:
        await self.api.delete(self.binding(account))

    async def clean_up(self) -> None:
        for account in self.bindings:
            with contextlib.suppress(NotFound):
                await self.revoke(account)
        with contextlib.suppress(NotFound):
            await self.api.delete(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": self.role},
                }
            )


@pytest.fixture
async def rbac(api: ApiClient, namespace: str) -> AsyncIterator[Rbac]:
    found = Rbac(api, namespace)
    await found.create_role()
    try:
        yield found
    finally:
        await found.clean_up()


def _insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the self-signed certificate: only that TLS is served
    return context


async def scrape(port: int | None, token: str | None = None, *, header: str | None = None) -> tuple[int, str]:
    assert port is not None
    headers = {"Authorization": header or f"Bearer {token}"} if token or header else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"https://127.0.0.1:{port}/metrics", headers=headers, ssl=_insecure()) as resp,
    ):
        return resp.status, await resp.text()


async def test_metrics_need_a_token_that_rbac_allows_to_get_metrics(
    kubeconfig: Path, namespace: str, rbac: Rbac
) -> None:
    reader, nobody = await rbac.token("reader"), await rbac.token("nobody")
    await rbac.grant("reader")
    mgr = await new_manager(
        kubeconfig,
        namespace,
        metrics_secure_serving=True,
        metrics_filter_provider=with_authentication_and_authorization,
    )
    async with running(mgr):
        await eventually(lambda: mgr.metrics_port, within=30, what="the metrics server")
        assert (await scrape(mgr.metrics_port))[0] == 401
        assert (await scrape(mgr.metrics_port, header="Basic cmVhZGVyOng="))[0] == 401
        assert (await scrape(mgr.metrics_port, "not-a-token"))[0] == 401
        status, text = await scrape(mgr.metrics_port, nobody)
        assert status == 403
        assert f"user=system:serviceaccount:{rbac.namespace}:nobody, verb=get, path=/metrics" in text

        async def served() -> bool:  # RBAC reaches the apiserver's authorizer through its informer
            status, text = await scrape(mgr.metrics_port, reader)
            assert status == 200, text
            return True

        await eventually(served, within=60, what="the reader's scrape served")
        assert mgr.metrics_port is not None
        async with aiohttp.ClientSession() as session:  # HTTPS, self-signed: verification fails
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(f"https://127.0.0.1:{mgr.metrics_port}/metrics")


async def test_decisions_are_cached_allow_for_five_minutes_deny_for_thirty_seconds(
    kubeconfig: Path, namespace: str, rbac: Rbac
) -> None:
    reader, other = await rbac.token("reader"), await rbac.token("other")
    await rbac.grant("reader")
    clock = FakeClock()

    def provider(client: Client) -> AuthFilter:
        return AuthFilter(client, clock=clock)

    mgr = await new_manager(
        kubeconfig, namespace, metrics_secure_serving=True, metrics_filter_provider=provider
    )
    async with running(mgr):
        await eventually(lambda: mgr.metrics_port, within=30, what="the metrics server")

        async def status_after(step: float, token: str, expected: int) -> bool:
            clock.step(step)
            status, text = await scrape(mgr.metrics_port, token)
            assert status == expected, text
            return True

        await eventually(lambda: status_after(301, reader, 200), within=60)
        assert (await scrape(mgr.metrics_port, other))[0] == 403
        await rbac.revoke("reader")
        await rbac.grant("other")
        clock.step(29)  # both decisions still cached: RBAC changed, the answers did not
        assert (await scrape(mgr.metrics_port, reader))[0] == 200
        assert (await scrape(mgr.metrics_port, other))[0] == 403
        await eventually(lambda: status_after(1, other, 200), within=60)  # the deny expired after 30 s
        await eventually(lambda: status_after(301, reader, 403), within=60)


async def test_a_certificate_directory_is_served(kubeconfig: Path, namespace: str, tmp_path: Path) -> None:
    ca = CertAuthority()
    issued = ca.issue("metrics", hosts=("127.0.0.1",))
    (tmp_path / "tls.crt").write_bytes(issued.cert_pem)
    (tmp_path / "tls.key").write_bytes(issued.key_pem)
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    mgr = await new_manager(kubeconfig, namespace, metrics_secure_serving=True, metrics_cert_dir=tmp_path)
    async with running(mgr):
        await eventually(lambda: mgr.metrics_port, within=30, what="the metrics server")
        trusted = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        url = f"https://127.0.0.1:{mgr.metrics_port}/metrics"
        async with aiohttp.ClientSession() as session, session.get(url, ssl=trusted) as resp:
            assert resp.status == 200  # no filter: TLS only


async def test_a_filter_or_certificates_without_secure_serving_are_refused(kubeconfig: Path) -> None:
    config = await load_kubeconfig(kubeconfig)
    with pytest.raises(ManagerError, match="need metrics_secure_serving=True"):
        Manager(config, metrics_filter_provider=with_authentication_and_authorization)
    with pytest.raises(ManagerError, match="need metrics_secure_serving=True"):
        Manager(config, metrics_cert_dir="/nonexistent")
    missing = Manager(
        config,
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="0",
        metrics_secure_serving=True,
        metrics_cert_dir="/nonexistent",
    )
    with pytest.raises(OSError, match=r"cannot load the serving certificate /nonexistent/tls\.crt"):
        async with running(missing):
            pass


async def test_a_kind_with_the_cache_disabled_is_read_by_get_without_list_or_watch(
    envtest: Environment, api: ApiClient, namespace: str
) -> None:
    """controller-runtime ``client.Options.Cache.DisableFor``: a user allowed only ``get`` on
    Secrets reads one through the manager's client; no informer is made for the kind."""
    user = f"secret-getter-{namespace}"
    rbac = "rbac.authorization.k8s.io/v1"
    await api.create(
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "get-secrets", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
        }
    )
    await api.create(
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "get-secrets", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "get-secrets"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
    )
    await api.create(Secret(metadata=ObjectMeta(name="named", namespace=namespace), string_data={"k": "v"}))
    config = await load_kubeconfig(envtest.add_user(user))
    mgr = Manager(config, disable_cache_for=[Secret], metrics_bind_address="0", health_probe_bind_address="0")
    cached = Manager(config, metrics_bind_address="0", health_probe_bind_address="0")
    try:
        got = await eventually(  # the RoleBinding reaches the apiserver's authorizer
            lambda: mgr.client.get(Secret, "named", namespace=namespace), within=60, what="the GET allowed"
        )
        assert got.data == {"k": base64.b64encode(b"v").decode()}
        assert not mgr.cache._kinds  # no informer: nothing listed or watched
        with pytest.raises(CacheNotStarted):  # the default reads the cache (a list and watch)
            await cached.client.get(Secret, "named", namespace=namespace)
    finally:
        await mgr.api_client.close()
        await cached.api_client.close()
