"""pyctrl.webhook.Server over real HTTPS: routing, error answers, metrics, certificates."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from pyctrl.envtest._certs import Pki
from pyctrl.metrics import registry
from pyctrl.webhook import AdmissionRequest, AdmissionResponse, Server, WebhookError, allowed, denied
from tests.webhook._reviews import configmap_review

REVIEW = configmap_review(
    "CREATE", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}, uid="u-7"
)


class NameCheck:
    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        name = (request.object or {}).get("metadata", {}).get("name", "")
        return allowed() if name == "cm" else denied(f"name {name!r} is not allowed")


class Broken:
    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        raise RuntimeError("the handler broke")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    pki = Pki(tmp_path / "pki")
    pki.ensure()
    pki.issue_serving_cert(tmp_path / "certs")
    return pki


@pytest.fixture
async def server(pki: Pki, tmp_path: Path) -> AsyncIterator[Server]:
    srv = Server(host="127.0.0.1", port=0, cert_dir=tmp_path / "certs")
    srv.register("/validate-cm", NameCheck())
    srv.register("/broken", Broken())
    await srv.listen()
    stop = asyncio.Event()
    task = asyncio.create_task(srv.start(stop))
    try:
        yield srv
    finally:
        stop.set()
        await task


def trusting(pki: Pki) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki.ca_cert))


async def post(srv: Server, pki: Pki, path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else None
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"https://127.0.0.1:{srv.port}{path}", json=None if data else body, data=data, ssl=trusting(pki)
        ) as r,
    ):
        return r.status, (await r.json() if r.content_type == "application/json" else await r.text())


def metric(name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_a_review_is_answered_by_the_handler_at_its_path(server: Server, pki: Pki) -> None:
    before = metric("controller_runtime_webhook_requests_total", webhook="/validate-cm", code="200")
    status, body = await post(server, pki, "/validate-cm", REVIEW)
    assert status == 200
    assert body["response"] == {"uid": "u-7", "allowed": True, "status": {"code": 200}}
    other = {**REVIEW, "request": {**REVIEW["request"], "object": {"metadata": {"name": "x"}}}}
    _, body = await post(server, pki, "/validate-cm", other)
    assert body["response"]["allowed"] is False
    assert body["response"]["status"] == {
        "code": 403,
        "reason": "Forbidden",
        "message": "name 'x' is not allowed",
    }
    after = metric("controller_runtime_webhook_requests_total", webhook="/validate-cm", code="200")
    assert after - before == 2
    assert metric("controller_runtime_webhook_latency_seconds_count", webhook="/validate-cm") >= 2
    assert metric("controller_runtime_webhook_requests_in_flight", webhook="/validate-cm") == 0


async def test_bad_bodies_get_400_answers_failing_handlers_500_and_unknown_paths_404(
    server: Server, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    _, body = await post(server, pki, "/validate-cm", b"not json")
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["code"] == 400
    assert "cannot read the AdmissionReview" in body["response"]["status"]["message"]
    _, body = await post(server, pki, "/broken", REVIEW)
    assert (body["response"]["uid"], body["response"]["status"]["code"]) == ("u-7", 500)
    assert "the handler broke" in body["response"]["status"]["message"]
    assert "Webhook handler failed" in caplog.text
    status, text = await post(server, pki, "/nowhere", REVIEW)
    assert (status, text) == (404, "no webhook at /nowhere\n")


async def test_a_path_is_registered_once_and_must_be_absolute(server: Server) -> None:
    with pytest.raises(WebhookError, match="already registered at /validate-cm"):
        server.register("/validate-cm", NameCheck())
    with pytest.raises(WebhookError, match="must start with '/'"):
        server.register("validate", NameCheck())


async def test_the_started_checker_fails_before_start_and_passes_after(pki: Pki, tmp_path: Path) -> None:
    srv = Server(host="127.0.0.1", port=0, cert_dir=tmp_path / "certs")
    check = srv.started_checker()
    with pytest.raises(RuntimeError, match="not started"):
        await check()
    await srv.listen()
    stop = asyncio.Event()
    task = asyncio.create_task(srv.start(stop))
    try:
        await check()
    finally:
        stop.set()
        await task
    with pytest.raises(RuntimeError, match="not started"):
        await check()


async def test_a_missing_certificate_or_a_taken_port_fails_listen_naming_it(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(WebhookError, match=r"cannot load the serving certificate .*nowhere/tls.crt"):
        await Server(host="127.0.0.1", port=0, cert_dir=tmp_path / "nowhere").listen()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(WebhookError, match=f"cannot listen on 127.0.0.1:{port}"):
            await Server(host="127.0.0.1", port=port, cert_dir=tmp_path / "certs").listen()


async def served_serial(srv: Server, pki: Pki) -> int:
    _, writer = await asyncio.open_connection("127.0.0.1", srv.port, ssl=trusting(pki))
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return x509.load_der_x509_certificate(der).serial_number


async def test_a_rotated_certificate_is_served_to_new_connections(
    server: Server, pki: Pki, tmp_path: Path
) -> None:
    first = await served_serial(server, pki)
    assert server.reload_certificate_if_changed() is False  # nothing changed
    fresh = tmp_path / "fresh"
    pki.issue_serving_cert(fresh)
    for name in ("tls.crt", "tls.key"):
        shutil.copy(fresh / name, server.cert_dir / name)
    assert server.reload_certificate_if_changed() is True
    second = await served_serial(server, pki)
    assert second != first
    assert second == x509.load_pem_x509_certificate((fresh / "tls.crt").read_bytes()).serial_number
