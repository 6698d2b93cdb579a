"""pyctrl.testing.FaultProxy between a real TCP client and a real echo server on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

import pytest

from pyctrl.testing import FaultProxy, ProxyError


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(1024):
                writer.write(data)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def proxy(echo_port: int) -> AsyncIterator[FaultProxy]:
    async with FaultProxy("127.0.0.1", echo_port) as p:
        yield p


async def connect(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def roundtrip(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], data: bytes) -> bytes:
    reader, writer = conn
    writer.write(data)
    await writer.drain()
    async with asyncio.timeout(10):
        return await reader.readexactly(len(data))


async def test_bytes_are_forwarded_both_ways_in_order(proxy: FaultProxy) -> None:
    conn = await connect(proxy)
    assert await roundtrip(conn, b"hello") == b"hello"
    assert await roundtrip(conn, b"x" * 200_000) == b"x" * 200_000
    assert proxy.open_connections == 1
    conn[1].close()


async def test_freeze_holds_the_open_connections_while_new_ones_flow_and_thaw_delivers(
    proxy: FaultProxy,
) -> None:
    frozen = await connect(proxy)
    assert await roundtrip(frozen, b"a") == b"a"
    assert proxy.freeze() == 1
    frozen[1].write(b"held")
    await frozen[1].drain()
    later = await connect(proxy)
    assert await roundtrip(later, b"flows") == b"flows"  # a connection made after the freeze
    with pytest.raises(TimeoutError):  # nothing comes back, and nothing is closed either
        async with asyncio.timeout(0.5):
            await frozen[0].read(1)
    assert not frozen[0].at_eof()
    proxy.thaw()
    async with asyncio.timeout(10):
        assert await frozen[0].readexactly(4) == b"held"
    frozen[1].close()
    later[1].close()


async def test_delay_forwards_every_chunk_late(proxy: FaultProxy) -> None:
    conn = await connect(proxy)
    proxy.set_delay(0.3)
    started = time.monotonic()
    assert await roundtrip(conn, b"slow") == b"slow"
    assert time.monotonic() - started >= 0.6  # one delay each way: a lower bound, never flaky
    proxy.set_delay(0)
    assert await roundtrip(conn, b"fast") == b"fast"
    with pytest.raises(ValueError, match="delay must be >= 0"):
        proxy.set_delay(-1)
    conn[1].close()


async def test_reset_aborts_every_open_connection_with_a_tcp_rst(proxy: FaultProxy) -> None:
    conn = await connect(proxy)
    assert await roundtrip(conn, b"a") == b"a"
    assert proxy.reset() == 1
    with pytest.raises(ConnectionResetError):
        async with asyncio.timeout(10):
            await conn[0].read(1)
    fresh = await connect(proxy)  # the proxy itself keeps serving
    assert await roundtrip(fresh, b"b") == b"b"
    fresh[1].close()


async def test_drop_discards_bytes_on_every_connection_without_closing(proxy: FaultProxy) -> None:
    conn = await connect(proxy)
    assert await roundtrip(conn, b"a") == b"a"
    proxy.drop()
    conn[1].write(b"lost")
    await conn[1].drain()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await conn[0].read(1)
    proxy.drop(False)
    assert await roundtrip(conn, b"kept") == b"kept"  # "lost" never arrives
    conn[1].close()


async def test_a_taken_port_is_a_clear_error(echo_port: int) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ProxyError, match=rf"cannot listen on 127.0.0.1:{port}: .*in use"):
            await FaultProxy("127.0.0.1", echo_port, port=port).start()


async def test_an_unreachable_target_is_a_clear_error() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(ProxyError, match=rf"target 127.0.0.1:{port} is unreachable"):
            await FaultProxy("127.0.0.1", port).start()


def test_only_loopback_addresses_are_accepted() -> None:
    with pytest.raises(ProxyError, match="not a loopback address"):
        FaultProxy("10.0.0.1", 80)
    with pytest.raises(ProxyError, match="not a loopback address"):
        FaultProxy("127.0.0.1", 80, host="0.0.0.0")


async def test_stop_closes_every_connection_and_the_listener(echo_port: int) -> None:
    proxy = FaultProxy("127.0.0.1", echo_port)
    await proxy.start()
    conn = await connect(proxy)
    assert await roundtrip(conn, b"a") == b"a"
    proxy.freeze()
    await proxy.stop()
    assert proxy.open_connections == 0
    with contextlib.suppress(ConnectionResetError):
        async with asyncio.timeout(10):
            assert await conn[0].read(1) == b""
    with pytest.raises(ConnectionRefusedError):
        await connect(proxy)
