"""Test helpers for operators built on pyctrl: the idempotence check (beyond controller-runtime).

Also here: :class:`FaultProxy`, a fault-injecting TCP proxy (freeze, delay, reset, drop) to put
between a manager and the apiserver (:mod:`pyctrl._faultproxy`).

The operator rule (REFERENCE, "Operator rules"): reconcile is level-triggered and idempotent — run
it once or 10,000 times, same converged state, and *zero writes* when nothing changed.
:func:`assert_idempotent` makes that rule checkable in every user's test suite::

    from pyctrl.testing import assert_idempotent

    # ... drive the object to its converged state (e.g. wait until status.phase == "Ready") ...
    await assert_idempotent(reconciler, Request("ns", "my-cluster"), mgr.client, n=5)

    # or, so that no in-memory state can hide a write, a fresh reconciler for every run:
    await assert_idempotent(lambda: MyReconciler(mgr.client), request, mgr.client)

Guarantees:

- every write request (``POST``, ``PUT``, ``PATCH``, ``DELETE``) that the checked reconciles make
  through the client's apiserver transport is recorded — including dry-run writes and writes
  made by tasks a reconcile starts; writes by *other* tasks through the same client (a running
  manager's controllers, say) are not, because recording is scoped with a ``contextvars``
  variable;
- ``client`` may be an :class:`~pyctrl.client.ApiClient`, a
  :class:`~pyctrl.client.split.SplitClient` (its apiserver side), a
  :class:`~pyctrl.manager.Manager` (its ``api_client``) or a
  :class:`~pyctrl.client.fake.FakeClient` (its in-memory writes: create, update/patch, apply,
  delete) — :data:`RecordableClient`; any other ``Client`` raises ``TypeError``;
- ``assert_idempotent`` runs ``reconcile(request)`` ``n`` times in a row and raises
  ``AssertionError`` listing every write (run number, verb, path) if any run wrote, and naming the
  run if a reconcile raised; it returns the ``n`` results otherwise (requeues are allowed: a
  converged reconciler may still poll);
- given a factory (a zero-argument callable), it builds a fresh reconciler for every run, as a
  restarted operator would.

Mechanism: the first use on an ``ApiClient`` wraps its transport seam (``ApiClient.transport``) in
a :class:`RecordingTransport`, and on a ``FakeClient`` adds a write observer to its core
(``FakeCore.write_observers``); either records a write only while :func:`recording_writes` is
active in the calling context, stays in place and costs one context-variable lookup per request.
A client built with ``ApiClient(config, transport=RecordingTransport(Transport(config)))`` is
recorded the same way.

Caveat for cache-backed clients: the reconciles read through the cache, so wait until the cache
reflects the last write of convergence (the same thing a real controller does: the watch event of
that write triggers one more, write-free reconcile) before calling it.

Waiting for a condition: :func:`eventually` polls a check until it holds, bounded by a deadline::

    from pyctrl.testing import eventually

    pod = await eventually(lambda: get_pod(client, "ns", "p"), within=30, what="pod p")
    await eventually(lambda: len(events) == 2, within=5, what="two events")

- ``check`` is a zero-argument callable, plain or returning an awaitable (awaited); it is called
  until it returns a truthy value, which ``eventually`` returns;
- an exception raised by ``check`` counts as "not yet" (things are still starting);
- after ``within`` seconds without a truthy value it raises ``AssertionError`` naming ``what`` and
  the last value returned (or exception raised) by ``check``; ``interval`` only spaces the polls
  out.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from pyctrl import _access
from pyctrl._faultproxy import FaultProxy, ProxyError
from pyctrl.client import ApiClient, Client, HTTPRequest, HTTPTransport, SplitClient
from pyctrl.client.fake import FakeClient
from pyctrl.client.scheme import Object, gvk_of
from pyctrl.manager import Manager
from pyctrl.reconcile import Reconciler, Request, Result

__all__ = [
    "FaultProxy",
    "ProxyError",
    "RecordableClient",
    "RecordingTransport",
    "Write",
    "assert_idempotent",
    "eventually",
    "recording_writes",
]

_T = TypeVar("_T")

_WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

_recording: ContextVar[list[Write] | None] = ContextVar("pyctrl_recording_writes", default=None)


@dataclass(frozen=True)
class Write:
    """One recorded write request."""

    verb: str
    path: str
    body: str = ""

    def __str__(self) -> str:
        return f"{self.verb} {self.path}" + (f" {self.body}" if self.body else "")


class RecordingTransport:
    """An :class:`~pyctrl.client.rest.HTTPTransport` wrapping another: while
    :func:`recording_writes` is active in the calling context, each write request is recorded."""

    def __init__(self, inner: HTTPTransport) -> None:
        self.inner = inner

    async def send(self, request: HTTPRequest) -> bytes:
        writes = _recording.get()
        if writes is not None and request.method.upper() in _WRITE_VERBS:
            body = (request.body or b"")[:300].decode(errors="replace")
            writes.append(Write(request.method.upper(), request.path, body))
        return await self.inner.send(request)

    def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        """A watch is a read: handed on unrecorded."""
        return self.inner.stream(request)


def _record_fake_write(verb: str, obj: Object) -> None:
    writes = _recording.get()
    if writes is not None:
        writes.append(Write(verb, _describe(obj)))


def _describe(obj: Object) -> str:
    try:
        kind = gvk_of(obj).kind
    except Exception:
        kind = type(obj).__name__
    ns = _access.namespace(obj)
    return f"{kind} {ns + '/' if ns else ''}{_access.name(obj)}"


#: What :func:`recording_writes` accepts: an apiserver client, one that contains one, or the fake.
RecordableClient = ApiClient | SplitClient | Manager | FakeClient


def _install(client: RecordableClient | Client) -> None:
    """Wrap the transport every write of ``client`` goes through (once), or observe the fake's."""
    if isinstance(client, Manager):
        client = client.api_client
    while isinstance(client, SplitClient):
        client = client.client
    if isinstance(client, ApiClient):
        if not isinstance(client.transport, RecordingTransport):
            client.transport = RecordingTransport(client.transport)
    elif isinstance(client, FakeClient):
        if _record_fake_write not in client.core.write_observers:
            client.core.write_observers.append(_record_fake_write)
    else:
        raise TypeError(
            f"cannot record the writes of {type(client).__name__}: pass an ApiClient, SplitClient, "
            "Manager or FakeClient"
        )


@contextlib.contextmanager
def recording_writes(client: RecordableClient | Client) -> Iterator[list[Write]]:
    """Record the writes made through ``client`` by this context (and tasks it creates)."""
    _install(client)
    writes: list[Write] = []
    token = _recording.set(writes)
    try:
        yield writes
    finally:
        _recording.reset(token)


async def assert_idempotent(
    reconciler: Reconciler | Callable[[], Reconciler],
    request: Request,
    client: RecordableClient | Client,
    *,
    n: int = 3,
) -> list[Result]:
    """Run reconcile ``n`` times on a converged object; fail if any run wrote (module docstring)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    results: list[Result] = []
    wrote: list[tuple[int, Write]] = []
    for run in range(1, n + 1):
        current = reconciler if isinstance(reconciler, Reconciler) else reconciler()
        with recording_writes(client) as writes:
            try:
                result = await current.reconcile(request)
            except Exception as exc:
                raise AssertionError(
                    f"reconcile {run}/{n} of {request} raised {type(exc).__name__}: {exc}"
                ) from exc
        results.append(result)
        wrote.extend((run, w) for w in writes)
    if wrote:
        lines = "\n".join(f"  run {run}: {w}" for run, w in wrote)
        raise AssertionError(
            f"reconcile of {request} is not idempotent: {len(wrote)} write(s) in {n} runs "
            f"on a converged object:\n{lines}"
        )
    return results


@overload
async def eventually(
    check: Callable[[], Awaitable[_T | None]], *, within: float, what: str = ..., interval: float = ...
) -> _T: ...
@overload
async def eventually(
    check: Callable[[], _T | None], *, within: float, what: str = ..., interval: float = ...
) -> _T: ...
async def eventually(
    check: Callable[[], Any], *, within: float, what: str = "the condition", interval: float = 0.05
) -> Any:
    """Poll ``check`` until it returns a truthy value (returned); fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    last: Any = None
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # "not yet": reported if it is still the last outcome at the deadline
            last = exc
        else:
            if result:
                return result
            last = result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval)  # polling interval of a deadline-bounded wait
