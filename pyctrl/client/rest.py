"""The HTTP transport to the apiserver: one aiohttp session, retries, rate limit, metrics.

Mirrors client-go ``rest.RESTClient`` (request building, ``Retry-After`` handling, the
``rest_client_requests_total{code,method,host}`` metric) and ``flowcontrol`` (the token bucket).

Guarantees:

- one ``aiohttp.ClientSession`` per :class:`Transport`, created on first use inside the running
  loop and closed by :meth:`Transport.close`;
- HTTP failures leave this module only as :mod:`pyctrl.client.errors` types (``raise … from``):
  a failure ``Status`` becomes the :class:`~pyctrl.client.errors.ApiError` subclass for its reason,
  an unreachable server or broken stream becomes :class:`~pyctrl.client.errors.TransportError`, a
  client-side timeout :class:`~pyctrl.client.errors.RequestTimeout`;
- reads (GET) are retried on transient failures — connection errors, 429, 500 ServerTimeout, 503,
  504 — with exponential backoff (0.2 s doubling, cap 5 s, jittered) for ``Config.retries`` more
  attempts; a ``Retry-After`` from the server is honoured (cap 30 s). Writes are retried only
  when the server certainly did not act: a 429 carrying ``Retry-After``, or a refused connection;
- every response (and every failed connection, as code ``<error>``) increments
  ``rest_client_requests_total``;
- with ``Config.qps`` set, requests pass a token bucket (``qps`` per second, ``burst`` deep);
  watches hold no token while streaming;
- every request is bounded: the TCP/TLS connect by ``Config.connect_timeout``, a non-watch
  request by ``Config.timeout`` in all, a watch by its read timeout between two chunks (the cache's
  watcher also abandons a watch not ended within its ``watch_stall_timeout``); connections use TCP keepalive
  (probes after 30 s idle, every 10 s, 3 unanswered = dead — client-go dials with a 30 s
  keepalive), so a peer that vanished is noticed even on an idle pooled connection.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
import orjson
from prometheus_client import Counter

from pyctrl.client.config import Config
from pyctrl.client.errors import (
    ApiError,
    RequestTimeout,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
    TransportError,
    api_error_from_status,
)
from pyctrl.metrics import registry
from pyctrl.workqueue import BucketRateLimiter, Clock, RealClock

__all__ = ["HTTPRequest", "HTTPTransport", "TokenBucket", "Transport", "parse_json", "requests_total"]

#: client-go ``rest_client_requests_total``.
requests_total = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=registry,
)

_RETRY_AFTER_CAP = 30.0
_BACKOFF_BASE, _BACKOFF_CAP = 0.2, 5.0
_TRANSIENT = (TooManyRequests, ServerTimeout, ServiceUnavailable)
_STREAM_CHUNK = 1 << 16
_KEEPALIVE_IDLE, _KEEPALIVE_INTERVAL, _KEEPALIVE_COUNT = 30, 10, 3


def _keepalive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """aiohttp's socket factory: a TCP socket with keepalive probes (module docstring)."""
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (
        ("TCP_KEEPIDLE", _KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", _KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", _KEEPALIVE_COUNT),
    ):
        if hasattr(socket, option):  # Linux names; other systems keep their defaults
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
    return sock


@dataclass(frozen=True, slots=True)
class HTTPRequest:
    """One request to the apiserver, as it crosses the transport seam."""

    method: str
    #: Path below the server URL, e.g. ``/api/v1/namespaces/ns/pods``.
    path: str
    #: Query parameters; ``None`` and ``""`` values are left out, booleans sent as true/false.
    params: Mapping[str, Any] | None = None
    body: bytes | None = None
    content_type: str | None = None
    #: Client-side timeout in seconds; ``None``: the config's. For :meth:`HTTPTransport.stream`, the
    #: longest silence allowed between two chunks instead; ``None``: no bound.
    timeout: float | None = None
    #: The ``Accept`` header; ``None``: ``application/json`` (another value asks for another
    #: representation, e.g. ``PartialObjectMetadataList``).
    accept: str | None = None


class HTTPTransport(Protocol):
    """The transport seam of :class:`~pyctrl.client.ApiClient` (httpx's transport: a request in,
    its response out; a test fake is a few lines).

    ``send`` sends one request and returns the response body; ``stream`` sends one and yields the
    response body line by line as it arrives (a watch), ending when the server ends the response,
    and closing the response when closed early. A failure is raised as a :mod:`pyctrl.client.errors`
    type. :class:`Transport` is the real one; a wrapper (recording, fault injection) takes another
    transport and delegates to it.
    """

    async def send(self, request: HTTPRequest) -> bytes: ...

    def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]: ...


def parse_json(data: bytes, what: str) -> Any:
    """A response body as JSON; ``TransportError`` naming ``what`` when it is not."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TransportError(f"{what}: response is not JSON: {data[:200]!r}") from exc


class TokenBucket:
    """client-go ``flowcontrol.NewTokenBucketRateLimiter``: ``qps`` tokens per second, ``burst`` deep,
    waited for on ``clock``.

    The bucket is the workqueue's :class:`~pyctrl.workqueue.BucketRateLimiter` (in client-go both
    are ``x/time/rate.Limiter``): each caller reserves its token at once and waits until it is due,
    so concurrent callers are served in turn without a lock (a caller cancelled while waiting still
    spends its token).
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else RealClock()
        self._bucket = BucketRateLimiter(qps, burst, clock=self._clock)

    async def acquire(self) -> None:
        delay = self._bucket.when(None)
        if delay > 0:
            await self._clock.sleep_until(self._clock.now() + delay)


def _params(params: Mapping[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (params or {}).items():
        if value is None or value == "":
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    try:
        return min(float(str(value)), _RETRY_AFTER_CAP) if value is not None else None
    except ValueError:
        return None


class Transport:
    """Issues requests to the apiserver described by a :class:`~pyctrl.client.config.Config`."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.host = urlsplit(config.host).netloc
        self._session: aiohttp.ClientSession | None = None
        self._limiter = TokenBucket(config.qps, config.burst) if config.qps else None
        self._ssl = config.ssl_context()
        # per-request objects that depend on few values, built once (the status patch per
        # reconciled object is the hot path): the timeout per request timeout, the metric child
        # per (code, method), the TLS server name as request keywords
        self._timeouts: dict[float | None, aiohttp.ClientTimeout] = {}
        self._counters: dict[tuple[str, str], Any] = {}
        self._tls: dict[str, Any] = (
            {"server_hostname": config.tls_server_name} if config.tls_server_name else {}
        )

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=0, socket_factory=_keepalive_socket)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": self.config.user_agent, "Accept": "application/json"},
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _headers(self, content_type: str | None, accept: str | None) -> dict[str, str]:
        headers: dict[str, str] = {"Accept": accept} if accept else {}
        auth = await self.config.authorization()
        if auth:
            headers["Authorization"] = auth
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _count(self, code: str, method: str) -> None:
        child = self._counters.get((code, method))
        if child is None:
            child = self._counters[code, method] = requests_total.labels(
                code=code, method=method, host=self.host
            )
        child.inc()

    def _timeout(self, total: float | None) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(total)
        if timeout is None:
            timeout = self._timeouts[total] = aiohttp.ClientTimeout(
                total=total, sock_connect=self.config.connect_timeout
            )
        return timeout

    async def _once(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str],
        body: bytes | None,
        content_type: str | None,
        request_timeout: float | None,
        accept: str | None,
    ) -> bytes:
        if self._limiter is not None:
            await self._limiter.acquire()
        session = self._get_session()
        url = self.config.host + path
        try:
            async with session.request(
                method,
                url,
                params=params or None,
                data=body,
                headers=await self._headers(content_type, accept),
                timeout=self._timeout(request_timeout),
                **self._tls,
            ) as resp:
                data = await resp.read()
                self._count(str(resp.status), method)
                if resp.status >= 400:
                    raise _api_error(data, resp.status, resp.headers)
                return data
        except ApiError:
            raise
        except TimeoutError as exc:
            self._count("<error>", method)
            raise RequestTimeout(f"{method} {url}: no response within {request_timeout} s") from exc
        except aiohttp.ClientConnectorError as exc:
            self._count("<error>", method)
            raise _Refused(f"{method} {url}: cannot connect to the apiserver: {exc}") from exc
        except aiohttp.ClientError as exc:
            self._count("<error>", method)
            raise TransportError(f"{method} {url}: {exc.__class__.__name__}: {exc}") from exc

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        request_timeout: float | None = None,
        accept: str | None = None,
    ) -> bytes:
        """Send one request (with the retries described in the module docstring); return the body."""
        query = _params(params)
        timeout = self.config.timeout if request_timeout is None else request_timeout
        attempt = 0
        while True:
            try:
                return await self._once(
                    method,
                    path,
                    params=query,
                    body=body,
                    content_type=content_type,
                    request_timeout=timeout,
                    accept=accept,
                )
            except (TransportError, ApiError) as exc:
                delay = self._retry_delay(method, exc, attempt)
                if delay is None:
                    if isinstance(exc, _Refused):
                        raise TransportError(str(exc)) from exc.__cause__
                    raise
            attempt += 1
            await asyncio.sleep(delay)

    def _retry_delay(self, method: str, exc: Exception, attempt: int) -> float | None:
        if attempt >= self.config.retries:
            return None
        retry_after = exc.retry_after if isinstance(exc, TooManyRequests) else None
        if isinstance(exc, ApiError) and not isinstance(exc, _TRANSIENT):
            return None
        if method != "GET" and not (isinstance(exc, _Refused) or retry_after is not None):
            return None
        if retry_after is not None:
            return retry_after
        backoff = min(_BACKOFF_CAP, _BACKOFF_BASE * 2.0**attempt)
        return backoff * (0.5 + random.random() / 2)

    async def request_json(self, method: str, path: str, *, params: Mapping[str, Any] | None = None) -> Any:
        """:meth:`request` and parse the JSON body."""
        return parse_json(await self.request(method, path, params=params), f"{method} {path}")

    async def send(self, request: HTTPRequest) -> bytes:
        """:class:`HTTPTransport`: :meth:`request` for an :class:`HTTPRequest`."""
        r = request
        return await self.request(
            r.method,
            r.path,
            params=r.params,
            body=r.body,
            content_type=r.content_type,
            request_timeout=r.timeout,
            accept=r.accept,
        )

    def stream_lines(
        self, path: str, *, params: Mapping[str, Any] | None = None, read_timeout: float | None = None
    ) -> AsyncGenerator[bytes, None]:
        """:meth:`stream` a GET of ``path``: ``read_timeout`` bounds the silence between two chunks."""
        return self.stream(HTTPRequest("GET", path, params, timeout=read_timeout))

    async def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        """:class:`HTTPTransport`: send ``request`` and yield the response body line by line (a
        watch stream); ``request.timeout`` bounds the silence between two chunks.

        Lines of any length are supported (aiohttp's own line reader caps them at 128 KiB).
        """
        if self._limiter is not None:
            await self._limiter.acquire()
        session = self._get_session()
        method, url, read_timeout = request.method, self.config.host + request.path, request.timeout
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.config.connect_timeout, sock_read=read_timeout
        )
        try:
            async with session.request(
                method,
                url,
                params=_params(request.params),
                data=request.body,
                headers=await self._headers(request.content_type, request.accept),
                timeout=timeout,
                server_hostname=self.config.tls_server_name,
            ) as resp:
                self._count(str(resp.status), method)
                if resp.status >= 400:
                    raise _api_error(await resp.read(), resp.status, resp.headers)
                buffer = b""
                async for chunk in resp.content.iter_chunked(_STREAM_CHUNK):
                    buffer += chunk
                    if b"\n" not in chunk:
                        continue
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield line
                if buffer.strip():
                    yield buffer
        except ApiError:
            raise
        except TimeoutError as exc:
            raise RequestTimeout(f"watch {url}: no data for {read_timeout} s") from exc
        except aiohttp.ClientConnectorError as exc:
            self._count("<error>", method)
            raise TransportError(f"watch {url}: cannot connect to the apiserver: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise TransportError(f"watch {url}: {exc.__class__.__name__}: {exc}") from exc


class _Refused(TransportError):
    """Internal: the connection was refused, so the request was certainly not processed."""


def _api_error(data: bytes, code: int, headers: Mapping[str, str]) -> ApiError:
    try:
        status: Any = orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        status = data.decode(errors="replace")
    return api_error_from_status(status, code, retry_after=_retry_after(headers))
