"""The webhook server (controller-runtime ``pkg/webhook`` ``Server``, ``pkg/certwatcher`` and
``pkg/webhook/internal/metrics``).

An HTTPS server (default ``:9443``) serving ``cert_dir/tls.crt`` and ``cert_dir/tls.key`` (the
layout cert-manager and Secret volumes give), with admission handlers registered by path.

Guarantees:
- the manager starts it after its HTTP servers and before the caches (REFERENCE "Manager start
  order"); a missing or unreadable certificate, or a taken port, fails the start with a message
  naming the file or the address;
- every request gets an ``AdmissionReview`` answer with HTTP 200 (as controller-runtime): a body
  that is not an ``admission.k8s.io/v1`` review is answered ``allowed: false`` with code 400, a
  handler that raises with code 500 (and its traceback in the log); an unknown path is HTTP 404;
  a conversion handler (``/convert``) answers ``ConversionReview``s the same way (failures as
  ``result.status: Failure``);
- handlers may be registered before or after start; a path can be registered once;
- a rotated certificate (files rewritten in place, as kubelet does with Secret volumes) is
  loaded within ``cert_check_interval`` (10 s, certwatcher's polling period) for new connections;
- ``controller_runtime_webhook_requests_total{webhook,code}``,
  ``controller_runtime_webhook_requests_in_flight{webhook}`` and
  ``controller_runtime_webhook_latency_seconds{webhook}`` with ``webhook`` the path;
- :meth:`Server.started_checker` is a readiness check that completes a TLS handshake with the
  server (controller-runtime's ``StartedChecker``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client import Counter, Gauge, Histogram

from pyctrl._httpserver import HTTPServer
from pyctrl.log import get_logger
from pyctrl.metrics import once, registry
from pyctrl.webhook.admission import AdmissionRequest, AdmissionResponse, Handler, errored
from pyctrl.webhook.conversion import ConversionHandler, convert_review

if TYPE_CHECKING:  # imported when the server listens (pyctrl._httpserver says why)
    from aiohttp import web

__all__ = ["Server", "WebhookError"]

DEFAULT_PORT = 9443
DEFAULT_CERT_DIR = Path(tempfile.gettempdir()) / "k8s-webhook-server" / "serving-certs"


class WebhookError(RuntimeError):
    """The webhook server cannot start or a path is registered twice."""


@dataclass(frozen=True)
class _Families:
    total: Counter
    in_flight: Gauge
    latency: Histogram


@once
def _metrics() -> _Families:
    return _Families(
        total=Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.",
            ("webhook", "code"),
            registry=registry,
        ),
        in_flight=Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            ("webhook",),
            registry=registry,
        ),
        latency=Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            ("webhook",),
            registry=registry,
        ),
    )


class Server:
    """An HTTPS server for admission webhooks; a manager runnable of the webhook group."""

    needs_leader_election = False
    cert_check_interval = 10.0

    def __init__(
        self,
        *,
        host: str = "",
        port: int = DEFAULT_PORT,
        cert_dir: Path | str | None = None,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
    ) -> None:
        self.host = host or "0.0.0.0"
        self.port = port
        self.cert_dir = Path(cert_dir) if cert_dir is not None else DEFAULT_CERT_DIR
        self.cert_path = self.cert_dir / cert_name
        self.key_path = self.cert_dir / key_name
        self.log = get_logger("pyctrl.webhook")
        self._handlers: dict[str, Handler | ConversionHandler] = {}
        self._http: HTTPServer | None = None
        self._ssl: ssl.SSLContext | None = None
        self._cert_stamp: tuple[int, ...] | None = None
        self._started = asyncio.Event()

    def register(self, path: str, handler: Handler | ConversionHandler) -> None:
        """Serve ``handler`` at ``path`` (e.g. ``/validate-redis-pyctrl-dev-v1alpha1-rediscluster``)."""
        if not path.startswith("/"):
            raise WebhookError(f"a webhook path must start with '/', got {path!r}")
        if path in self._handlers:
            raise WebhookError(f"a webhook is already registered at {path}")
        self._handlers[path] = handler

    @property
    def paths(self) -> list[str]:
        return sorted(self._handlers)

    # -- TLS ----------------------------------------------------------------------------------
    def _stamp(self) -> tuple[int, ...]:
        cert, key = self.cert_path.stat(), self.key_path.stat()
        return (cert.st_ino, cert.st_mtime_ns, cert.st_size, key.st_ino, key.st_mtime_ns, key.st_size)

    def _load_certificate(self) -> None:
        if self._ssl is None:
            self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            stamp = self._stamp()
            self._ssl.load_cert_chain(self.cert_path, self.key_path)
        except (OSError, ssl.SSLError) as exc:
            raise WebhookError(
                f"webhook server: cannot load the serving certificate {self.cert_path} "
                f"and key {self.key_path}: {exc}"
            ) from exc
        self._cert_stamp = stamp

    def reload_certificate_if_changed(self) -> bool:
        """Load the certificate again when its files changed; True when it did (certwatcher)."""
        try:
            stamp = self._stamp()
        except OSError:
            return False  # mid-rotation: keep serving the loaded one
        if stamp == self._cert_stamp:
            return False
        try:
            self._load_certificate()
        except WebhookError as exc:
            self.log.error("Keeping the previous serving certificate", error=str(exc))
            return False
        self.log.info("Loaded the rotated serving certificate", cert=str(self.cert_path))
        return True

    # -- serving ------------------------------------------------------------------------------
    async def listen(self) -> None:
        """Load the certificate and bind now (failures name the file or the address)."""
        from aiohttp import web

        self._load_certificate()
        app = web.Application()
        app.router.add_post("/{path:.*}", self._serve)
        self._http = HTTPServer("webhook", app, self.host, self.port, ssl_context=self._ssl)
        try:
            await self._http.listen()
        except OSError as exc:
            self._http = None
            raise WebhookError(str(exc)) from exc
        self.port = self._http.port
        self._started.set()
        self.log.info("Serving webhooks", address=f"{self.host}:{self.port}", paths=self.paths)

    async def start(self, stop: asyncio.Event) -> None:
        if self._http is None:
            await self.listen()
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.cert_check_interval)
                if not stop.is_set():
                    self.reload_certificate_if_changed()
        finally:
            self._started.clear()
            if self._http is not None:
                await self._http.close()
                self._http = None

    async def _serve(self, request: web.Request) -> web.Response:
        from aiohttp import web  # loaded by listen() already: a dict lookup

        path = request.path
        handler = self._handlers.get(path)
        if handler is None:
            return web.Response(status=404, text=f"no webhook at {path}\n")
        families = _metrics()
        in_flight = families.in_flight.labels(path)
        in_flight.inc()
        started = time.perf_counter()
        try:
            body = await self._review(path, handler, await request.read())
        finally:
            in_flight.dec()
            families.latency.labels(path).observe(time.perf_counter() - started)
        families.total.labels(path, "200").inc()
        return web.Response(body=body, content_type="application/json")

    async def _review(self, path: str, handler: Handler | ConversionHandler, raw: bytes) -> bytes:
        if isinstance(handler, ConversionHandler):
            try:
                body: Any = orjson.loads(raw)
            except ValueError:
                body = None  # answered as a Failure naming what was expected
            return orjson.dumps(convert_review(handler, body))
        uid = ""
        try:
            review: Any = orjson.loads(raw)
            if isinstance(review, dict) and isinstance(review.get("request"), dict):
                uid = str(review["request"].get("uid") or "")
            request = AdmissionRequest.from_review(review if isinstance(review, dict) else {})
        except ValueError as exc:  # orjson.JSONDecodeError is a ValueError
            response: AdmissionResponse = errored(400, f"cannot read the AdmissionReview: {exc}")
        else:
            try:
                response = await handler.handle(request)
            except Exception as exc:
                self.log.error("Webhook handler failed", exc_info=exc, webhook=path, uid=uid)
                response = errored(500, f"webhook {path} failed: {exc}")
        return orjson.dumps(response.review(uid))

    def started_checker(self) -> Callable[[], Awaitable[None]]:
        """A readiness check: the server has started and completes a TLS handshake."""

        async def check() -> None:
            if not self._started.is_set():
                raise RuntimeError("webhook server not started yet")
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # only that TLS is served, not by whom
            host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, self.port, ssl=context), 5)
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

        return check
