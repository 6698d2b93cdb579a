"""Probe checks against real local servers, and the consecutive-result thresholds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pyctrl.envtest.node.probes import ProbeContext, ProbeResult, ProbeSpec, ProbeTracker, check, run_handler


async def no_exec(argv: list[str], seconds: float) -> tuple[int, str]:
    raise AssertionError("exec not expected")


def ctx(ports: dict[str, int] | None = None) -> ProbeContext:
    return ProbeContext(pod_ip="127.0.0.1", ports=ports or {}, exec_fn=no_exec)


def test_probe_spec_defaults_are_the_kubernetes_ones() -> None:
    spec = ProbeSpec.parse({"tcpSocket": {"port": 1}})
    assert (spec.initial_delay, spec.period, spec.timeout) == (0, 10, 1)
    assert (spec.success_threshold, spec.failure_threshold) == (1, 3)


def test_result_flips_only_after_the_thresholds_of_consecutive_results() -> None:
    spec = ProbeSpec.parse({"successThreshold": 2, "failureThreshold": 3})
    tracker = ProbeTracker(spec, initial=False)
    ok, bad = ProbeResult(True), ProbeResult(False, "no")
    assert not tracker.record(ok)
    assert not tracker.record(bad)  # streak broken
    assert not tracker.record(ok)
    assert tracker.record(ok)
    assert tracker.result
    assert [tracker.record(bad) for _ in range(3)] == [False, False, True]
    assert not tracker.result
    assert tracker.failures == 3
    assert tracker.last_message == "no"


def test_liveness_starts_successful_and_readiness_starts_failed() -> None:
    spec = ProbeSpec.parse({})
    assert ProbeTracker(spec, initial=True).result
    assert not ProbeTracker(spec, initial=False).result


@pytest.fixture
async def http_server() -> AsyncIterator[int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readuntil(b"\r\n\r\n")).decode()
        path = request.split()[1]
        code = {"/ok": 200, "/redirect": 302, "/bad": 500}.get(path, 404)
        if path == "/header" and "X-Probe: yes" in request:
            code = 204
        writer.write(f"HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_http_get_succeeds_on_2xx_and_3xx_and_fails_otherwise(http_server: int) -> None:
    def probe(path: str, port: object = http_server) -> dict[str, object]:
        return {"httpGet": {"path": path, "port": port}}

    assert (await check(probe("/ok"), ctx())).ok
    assert (await check(probe("/redirect"), ctx())).ok
    bad = await check(probe("/bad"), ctx())
    assert not bad.ok
    assert "statuscode: 500" in bad.message
    assert (await check(probe("/ok", "web"), ctx({"web": http_server}))).ok
    headers = {
        "httpGet": {
            "path": "/header",
            "port": http_server,
            "httpHeaders": [{"name": "X-Probe", "value": "yes"}],
        }
    }
    assert (await check(headers, ctx())).ok


async def test_tcp_socket_succeeds_when_something_listens_and_fails_when_nothing_does(
    http_server: int,
) -> None:
    assert (await check({"tcpSocket": {"port": http_server}}, ctx())).ok
    closed = await check({"tcpSocket": {"port": 1}}, ctx())
    assert not closed.ok
    assert "probe failed" in closed.message
    unknown = await check({"tcpSocket": {"port": "nope"}}, ctx())
    assert not unknown.ok
    assert "named port" in unknown.message


async def test_a_server_that_never_answers_fails_by_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers; returns when the prober hangs up
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        result = await check({"httpGet": {"path": "/", "port": port}}, ctx(), seconds=0.2)
    finally:
        server.close()
        await server.wait_closed()
    assert not result.ok
    assert "timed out" in result.message


async def test_exec_succeeds_on_exit_code_zero_and_reports_output_otherwise() -> None:
    calls: list[tuple[list[str], float]] = []

    async def fake_exec(argv: list[str], seconds: float) -> tuple[int, str]:
        calls.append((argv, seconds))
        return (0, "") if argv[-1] == "true" else (2, "boom\n")

    probe_ctx = ProbeContext(pod_ip="127.0.0.1", ports={}, exec_fn=fake_exec)
    assert (await check({"exec": {"command": ["sh", "-c", "true"]}}, probe_ctx, seconds=3)).ok
    failed = await check({"exec": {"command": ["sh", "-c", "false"]}}, probe_ctx)
    assert not failed.ok
    assert "exited with 2: boom" in failed.message
    assert calls[0] == (["sh", "-c", "true"], 3)


async def test_grpc_probes_fail_with_a_clear_message() -> None:
    result = await check({"grpc": {"port": 1}}, ctx())
    assert not result.ok
    assert "not supported" in result.message


async def test_a_sleep_hook_is_bounded_by_the_grace_period() -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert (await run_handler({"sleep": {"seconds": 30}}, ctx(), seconds=0.05)).ok
    assert loop.time() - start < 5
