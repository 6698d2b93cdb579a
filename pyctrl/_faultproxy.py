"""A fault-injecting TCP proxy on loopback, for testing how a client survives a bad network.

Beyond controller-runtime (its tests use real servers and kill them; nothing there freezes a
connection). It plays the part of toxiproxy's ``timeout``/``latency``/``reset_peer`` toxics in
process, for the half-open connections that make watches stall silently (kopf#585, #957).
Re-exported by :mod:`pyctrl.testing`::

    async with FaultProxy("127.0.0.1", apiserver_port) as proxy:
        config = config.with_options(host=proxy.url("https"))  # TLS passes through untouched
        ...
        proxy.freeze()      # the open connections stop forwarding; nothing is closed
        proxy.thaw()

Guarantees:

- it listens on ``host:port`` (default ``127.0.0.1`` and a free port) and forwards every accepted
  connection to ``target`` byte for byte, both ways, in order; only loopback addresses are
  accepted, for both ends;
- :meth:`start` fails with :class:`ProxyError` naming the address when the port is taken, and
  when the target does not accept a TCP connection (so a test never runs against nothing);
- faults, each effective at once and on every connection they name:

  - :meth:`freeze` — the connections open *now* stop forwarding in both directions and stay open
    (a half-open connection as a dead middlebox leaves it); connections made later flow;
    :meth:`thaw` resumes them, delivering what was held;
  - :meth:`set_delay` — every chunk is forwarded ``seconds`` late (0 turns it off), order kept;
  - :meth:`reset` — every open connection is aborted with a TCP RST to both peers;
  - :meth:`drop` — while on, bytes in both directions on every connection (new ones included)
    are read and thrown away: the connections stay open but carry nothing;

- a client whose connection the target refuses is reset at once (counted in
  ``failed_connects``);
- :meth:`stop` (also on leaving ``async with``) closes the listener and every connection and
  waits for its tasks: nothing is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct
from dataclasses import dataclass, field

__all__ = ["FaultProxy", "ProxyError"]

_CHUNK = 1 << 16
_TARGET_CHECK_TIMEOUT = 5.0


class ProxyError(RuntimeError):
    """The proxy cannot run as asked (address in use, target unreachable, not loopback)."""


def _require_loopback(what: str, host: str) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ProxyError(f"{what} {host!r} is not a loopback address (the proxy serves 127.0.0.0/8 only)")


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass(eq=False)
class _Connection:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.flowing.set()

    def abort(self) -> None:
        for writer in (self.client, self.server):
            _abort_with_rst(writer)

    def close(self) -> None:
        for writer in (self.client, self.server):
            writer.close()


class FaultProxy:
    """A TCP proxy from ``host:port`` to ``target_host:target_port`` (see the module docstring)."""

    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        _require_loopback("target", target_host)
        _require_loopback("listen address", host)
        self.target = (target_host, target_port)
        self.host = host
        self.port = port
        #: Connections accepted in all, and those the target refused.
        self.accepted = 0
        self.failed_connects = 0
        self._delay = 0.0
        self._dropping = False
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Check the target accepts connections, then listen (``port`` is the bound port after)."""
        if self._server is not None:
            raise ProxyError("the proxy is already running")
        target = f"{self.target[0]}:{self.target[1]}"
        try:
            async with asyncio.timeout(_TARGET_CHECK_TIMEOUT):
                _, writer = await asyncio.open_connection(*self.target)
        except (OSError, TimeoutError) as exc:
            raise ProxyError(f"target {target} is unreachable: {exc or 'connect timed out'}") from exc
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        try:
            self._server = await asyncio.start_server(self._accept, self.host, self.port)
        except OSError as exc:
            raise ProxyError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") from exc
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close the listener and every connection; return once all proxy tasks ended."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for conn in list(self._connections):
            conn.abort()
        tasks = [*self._handlers, *(t for c in self._connections for t in c.tasks)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._connections.clear()
        if server is not None:
            await server.wait_closed()

    def url(self, scheme: str = "http") -> str:
        """``scheme://host:port`` of the listening side."""
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    # -- faults ---------------------------------------------------------------------------------
    def freeze(self) -> int:
        """Stop forwarding on the connections open now (they stay open); return how many."""
        for conn in self._connections:
            conn.flowing.clear()
        return len(self._connections)

    def thaw(self) -> None:
        """Resume every frozen connection (held bytes are delivered)."""
        for conn in self._connections:
            conn.flowing.set()

    def set_delay(self, seconds: float) -> None:
        """Forward every chunk ``seconds`` late from now on (0: no delay)."""
        if seconds < 0:
            raise ValueError(f"delay must be >= 0, got {seconds}")
        self._delay = seconds

    def reset(self) -> int:
        """Abort every open connection with a TCP RST to both ends; return how many."""
        conns = list(self._connections)
        for conn in conns:
            conn.abort()
        return len(conns)

    def drop(self, enabled: bool = True) -> None:
        """While enabled, read and discard every byte in both directions, on every connection."""
        self._dropping = enabled

    # -- forwarding -----------------------------------------------------------------------------
    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.accepted += 1
        try:
            try:
                server_reader, server_writer = await asyncio.open_connection(*self.target)
            except OSError:
                self.failed_connects += 1
                _abort_with_rst(client_writer)
                return
            conn = _Connection(client_writer, server_writer)
            self._connections.add(conn)
            conn.tasks = [
                asyncio.create_task(self._pump(conn, client_reader, server_writer)),
                asyncio.create_task(self._pump(conn, server_reader, client_writer)),
            ]
            try:
                await asyncio.gather(*conn.tasks, return_exceptions=True)
            finally:
                conn.close()
                self._connections.discard(conn)
        except asyncio.CancelledError:
            # stop() cancels the handlers; ended quietly, as asyncio's stream callback (before
            # Python 3.12) would log a cancelled handler's task.exception() as an error
            return
        finally:
            self._handlers.discard(task)

    async def _pump(
        self, conn: _Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Copy ``reader`` to ``writer`` under the current faults until EOF or an error."""
        try:
            while True:
                await conn.flowing.wait()
                data = await reader.read(_CHUNK)
                if not data:
                    break
                if self._dropping:
                    continue
                if self._delay:
                    await asyncio.sleep(self._delay)  # the injected latency itself
                await conn.flowing.wait()  # frozen while the read was pending: hold the bytes
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()  # half-close, as TCP does: the other direction may go on
        except (ConnectionError, OSError):
            conn.abort()
