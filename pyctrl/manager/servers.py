"""The manager's HTTP servers: Prometheus metrics and health probes (controller-runtime
``pkg/metrics/server`` and the manager's probe listener).

The metrics server serves plain HTTP by default, or HTTPS (``SecureServing``) with a certificate
from a directory or a self-signed one (:mod:`pyctrl.manager._certs`), and runs its requests
through filters (aiohttp middlewares; ``FilterProvider``), such as
:func:`pyctrl.manager.filters.with_authentication_and_authorization`.

Bind addresses follow controller-runtime: ``":8080"`` (all interfaces), ``"127.0.0.1:0"`` (a free
port, read back from ``.port``), ``"0"`` or ``""`` (disabled).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from pyctrl._httpserver import HTTPServer
from pyctrl.healthz import Checker, run_checks
from pyctrl.metrics import registry

if TYPE_CHECKING:  # imported when an application is built (pyctrl._httpserver says why)
    from aiohttp import web

    from pyctrl.manager.filters import Filter, Handler

__all__ = ["HTTPServer", "health_app", "metrics_app", "parse_bind_address"]


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``"host:port"`` → (host, port); ``"0"``/``""`` → None (disabled)."""
    if address in ("", "0"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"bind address must be 'host:port', ':port' or '0', got {address!r}")
    return host or "0.0.0.0", int(port)


def metrics_app(filters: Sequence[Filter] = ()) -> web.Application:
    """``/metrics`` of pyctrl's registry, every request through ``filters`` first."""
    from aiohttp import web

    async def metrics(_: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, generate_latest, registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def middleware(f: Filter) -> Callable[..., Awaitable[web.StreamResponse]]:
        @web.middleware  # aiohttp 3 takes a callable as (request, handler) only when marked
        async def run(request: web.Request, handler: Handler) -> web.StreamResponse:
            return await f(request, handler)

        return run

    app = web.Application(middlewares=[middleware(f) for f in filters])
    app.router.add_get("/metrics", metrics)
    return app


def health_app(healthz: dict[str, Checker], readyz: dict[str, Checker]) -> web.Application:
    from aiohttp import web

    def endpoint(checks: dict[str, Checker]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            only = request.match_info.get("name")
            if only is not None and only not in checks:
                return web.Response(status=404, text=f"no check named {only!r}\n")
            ok, lines = await run_checks(checks, only)
            verbose = "verbose" in request.query
            if ok and not verbose:
                return web.Response(text="ok")
            text = "\n".join(lines) + ("\nok" if ok else "\nhealth check failed") + "\n"
            return web.Response(status=200 if ok else 500, text=text)

        return handle

    app = web.Application()
    for path, checks in (("/healthz", healthz), ("/readyz", readyz)):
        app.router.add_get(path, endpoint(checks))
        app.router.add_get(path + "/{name}", endpoint(checks))
    return app
