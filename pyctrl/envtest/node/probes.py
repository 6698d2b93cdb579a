"""Probes and lifecycle handlers (kubelet ``pkg/kubelet/prober`` and ``lifecycle``).

Guarantees:
- ``ProbeSpec.parse`` applies the Kubernetes defaults: initialDelaySeconds 0, periodSeconds 10,
  timeoutSeconds 1, successThreshold 1, failureThreshold 3;
- ``ProbeTracker`` flips its result only after ``successThreshold`` consecutive successes or
  ``failureThreshold`` consecutive failures, starting from the kubelet's initial results
  (readiness: failure; liveness: success; startup: not yet succeeded);
- ``check`` runs one exec (exit code 0), tcpSocket (connect) or httpGet (status 200..399) probe
  within ``timeoutSeconds`` (``seconds``); host defaults to the Pod IP, a named port is looked up in the
  container's ports; a timeout or any error is a failure with a message, never an exception;
- ``run_handler`` runs a lifecycle hook (exec, httpGet or sleep) and reports failure the same way.
- gRPC probes are not supported: they fail with a message saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ExecFn", "ProbeContext", "ProbeResult", "ProbeSpec", "ProbeTracker", "check", "run_handler"]

# (argv, timeout seconds) -> (exit code, combined output); runs inside the container.
ExecFn = Callable[[list[str], float], Awaitable[tuple[int, str]]]


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    message: str = ""


@dataclass(frozen=True)
class ProbeContext:
    """Where a probe runs: the Pod IP, the container's ports and how to exec in it."""

    pod_ip: str
    ports: Mapping[str, int]
    exec_fn: ExecFn


@dataclass(frozen=True)
class ProbeSpec:
    handler: Mapping[str, Any]
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @classmethod
    def parse(cls, probe: Mapping[str, Any]) -> ProbeSpec:
        return cls(
            handler=probe,
            initial_delay=float(probe.get("initialDelaySeconds") or 0),
            period=float(probe.get("periodSeconds") or 10),
            timeout=float(probe.get("timeoutSeconds") or 1),
            success_threshold=int(probe.get("successThreshold") or 1),
            failure_threshold=int(probe.get("failureThreshold") or 3),
        )


class ProbeTracker:
    """Consecutive-result bookkeeping of one probe of one container run."""

    def __init__(self, spec: ProbeSpec, initial: bool) -> None:
        self.spec = spec
        self.result = initial
        self._streak_ok: bool | None = None
        self._streak = 0
        self.last_message = ""

    @property
    def failures(self) -> int:
        """Consecutive failures up to now."""
        return self._streak if self._streak_ok is False else 0

    def record(self, outcome: ProbeResult) -> bool:
        """Count ``outcome``; True when the probe's result changed."""
        self.last_message = outcome.message
        if outcome.ok == self._streak_ok:
            self._streak += 1
        else:
            self._streak_ok, self._streak = outcome.ok, 1
        needed = self.spec.success_threshold if outcome.ok else self.spec.failure_threshold
        if outcome.ok != self.result and self._streak >= needed:
            self.result = outcome.ok
            return True
        return False


def _port(value: Any, ports: Mapping[str, int]) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.isdigit():
        return int(text)
    if text in ports:
        return ports[text]
    raise ValueError(f"port {text!r} is not a named port of the container")


async def _tcp(handler: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
    host = handler.get("host") or ctx.pod_ip
    port = _port(handler.get("port"), ctx.ports)
    _, writer = await asyncio.open_connection(host, port)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return ProbeResult(True)


async def _http(handler: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
    host = handler.get("host") or ctx.pod_ip
    port = _port(handler.get("port"), ctx.ports)
    path = handler.get("path") or "/"
    tls: ssl.SSLContext | None = None
    if str(handler.get("scheme", "HTTP")).upper() == "HTTPS":
        tls = ssl.create_default_context()
        tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE  # the kubelet skips verification
    reader, writer = await asyncio.open_connection(host, port, ssl=tls)
    try:
        headers = {"Host": f"{host}:{port}", "User-Agent": "kube-probe/1.36", "Accept": "*/*"}
        headers.update({h["name"]: h.get("value", "") for h in handler.get("httpHeaders") or []})
        lines = [f"GET {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items()), "Connection: close"]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        status_line = (await reader.readline()).decode(errors="replace").strip()
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    parts = status_line.split()
    if len(parts) < 2 or not parts[1].isdigit():
        return ProbeResult(False, f"HTTP probe got a malformed response: {status_line!r}")
    code = int(parts[1])
    if 200 <= code < 400:
        return ProbeResult(True)
    return ProbeResult(False, f"HTTP probe failed with statuscode: {code}")


async def _exec(handler: Mapping[str, Any], ctx: ProbeContext, seconds: float) -> ProbeResult:
    command = [str(c) for c in handler.get("command") or []]
    if not command:
        return ProbeResult(False, "exec probe without a command")
    code, output = await ctx.exec_fn(command, seconds)
    if code == 0:
        return ProbeResult(True)
    return ProbeResult(False, f"command {command!r} exited with {code}: {output.strip()[-500:]}")


async def check(probe: Mapping[str, Any], ctx: ProbeContext, seconds: float = 1.0) -> ProbeResult:
    """Run the probe's handler once; never raises (errors and timeouts are failures)."""
    try:
        if "exec" in probe:
            return await _exec(probe["exec"], ctx, seconds)
        if "tcpSocket" in probe:
            return await asyncio.wait_for(_tcp(probe["tcpSocket"], ctx), seconds)
        if "httpGet" in probe:
            return await asyncio.wait_for(_http(probe["httpGet"], ctx), seconds)
        if "grpc" in probe:
            return ProbeResult(False, "gRPC probes are not supported by the local node")
        return ProbeResult(False, f"unsupported probe handler {sorted(probe)}")
    except TimeoutError:
        return ProbeResult(False, f"probe timed out after {seconds:g}s")
    except (OSError, ValueError, ssl.SSLError) as exc:
        return ProbeResult(False, f"probe failed: {exc}")


async def run_handler(handler: Mapping[str, Any], ctx: ProbeContext, seconds: float) -> ProbeResult:
    """A postStart / preStop hook: exec, httpGet or sleep, bounded by ``seconds``."""
    if "sleep" in handler:
        await asyncio.sleep(min(float(handler["sleep"].get("seconds", 0)), seconds))
        return ProbeResult(True)
    return await check(handler, ctx, seconds)
