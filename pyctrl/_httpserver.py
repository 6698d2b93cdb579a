"""An aiohttp application on a bind address, optionally over TLS: the listener of the manager's
metrics and probe servers (``pyctrl.manager.servers``) and of the webhook server
(``pyctrl.webhook``). A module of its own so that neither package imports the other.

aiohttp's server half (``aiohttp.web``) is imported when a server listens or its application is
built, not with pyctrl: a program with the metrics, probe and webhook servers off never loads it
(about 2 MiB of RSS and 20 ms of CPU at start-up).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time, imported where a server is built (see the module docstring)
    from aiohttp import web

__all__ = ["HTTPServer"]


class HTTPServer:
    """An aiohttp app served on a bind address (over TLS with ``ssl_context``); a manager runnable
    of the HTTP-server group, and the listener of the webhook server."""

    needs_leader_election = False

    def __init__(
        self,
        name: str,
        app: web.Application,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.name = name
        self.app = app
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self._runner: web.AppRunner | None = None

    @property
    def listening(self) -> bool:
        return self._runner is not None

    async def listen(self) -> None:
        """Bind now (so a taken port fails the manager's start with a clear error)."""
        from aiohttp import web

        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise OSError(
                exc.errno, f"{self.name} server cannot listen on {self.host}:{self.port}: {exc.strerror}"
            ) from exc
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])

    async def start(self, stop: asyncio.Event) -> None:
        if self._runner is None:
            await self.listen()
        try:
            await stop.wait()
        finally:
            await self.close()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
