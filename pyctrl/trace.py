"""Tracing: the path of every event from the apiserver to a reconcile, one line per step.

Not an upstream piece: controller-runtime has no such switch (its nearest relatives are the
``workqueue_*`` metrics and ``-v=5`` logs). This module exists to *teach* the pipeline — see the
guide's "Tracing a reconcile" page. Turn it on with ``PYCTRL_TRACE=1`` in the environment (read
when pyctrl is imported) or :func:`enable`/:func:`tracing` in code. Each line goes to stderr (or
the file given to :func:`enable`)::

    pyctrl.trace +   14.052 ms  watch      ConfigMap default/demo | MODIFIED resourceVersion=612

Stages, in the order one event passes them (the hook that prints each is a single
``if trace.ENABLED:`` line at that point in the code):

=============  ==========================================  ===========================================
stage          where                                       what the line says
=============  ==========================================  ===========================================
``list``       ``cache.reflector`` at ``InitDone``         a (re)list replaced the store: its size, RV
``watch``      ``cache.watcher`` (Watching state)          the watch event: type and resourceVersion
``store``      ``cache.reflector.apply``                   the store write: add / update / delete
``handler``    ``cache.informer.Registration``             the informer hands the change to a handler
``predicate``  ``source`` dispatch                         each predicate's verdict; pass or filtered
``queue``      ``workqueue`` ``add``/``add_after``/fire    queued, deduplicated, deferred, or waiting
``worker``     ``controller`` worker loop                  a worker took the request, time it waited
``reconcile``  ``controller`` result handling              the outcome (result table) and duration
``done``       ``workqueue.Queue.done``                    finished; re-queued if added meanwhile
=============  ==========================================  ===========================================

A requeue shows as the ``queue`` line (``add_after``) that follows a ``reconcile`` line.

Guarantees:

- off (the default) every hook costs one module-attribute check; nothing is computed, stored or
  printed;
- on, lines are written whole and flushed in event-loop order; times are milliseconds since the
  first line after tracing was enabled (``time.perf_counter``); the ``worker`` line gives the time the request
  waited since it became ready, the ``reconcile`` line the reconcile's duration;
- tracing never changes what the pipeline does: predicates are pure, so the ``predicate`` line
  evaluates each one again to name the one that filtered the event; the per-request "ready since"
  times it keeps are bounded (:data:`MAX_TRACKED`);
- no object content ever appears (so no Secret data): lines carry kinds, names, resourceVersions,
  predicate and handler names, and outcomes.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, TextIO

__all__ = ["ENABLED", "MAX_TRACKED", "disable", "enable", "requested", "tracing"]


def requested(value: str | None) -> bool:
    """Whether a ``PYCTRL_TRACE`` value asks for tracing: anything but unset, empty, 0, false, no, off."""
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


#: Whether hooks print. Read it, never set it: use :func:`enable`/:func:`disable`.
ENABLED: bool = requested(os.environ.get("PYCTRL_TRACE"))
#: At most this many requests' "ready since" times are remembered (oldest dropped first).
MAX_TRACKED = 10_000


class _State:
    file: TextIO | None = None
    t0: float | None = None  # perf_counter at the first line since tracing was enabled
    #: (id(queue), item) -> perf_counter when the item last became ready in that queue
    ready_since: ClassVar[dict[tuple[int, Any], float]] = {}


_state = _State()


def enable(file: TextIO | None = None) -> None:
    """Start tracing to ``file`` (default: ``sys.stderr`` at the time of each line); the next line
    is at time 0."""
    global ENABLED  # noqa: PLW0603 (the hooks check one module attribute: the cheapest test there is)
    _state.file, _state.t0 = file, None
    _state.ready_since.clear()
    ENABLED = True


def disable() -> None:
    """Stop tracing."""
    global ENABLED
    ENABLED, _state.file = False, None
    _state.ready_since.clear()


@contextlib.contextmanager
def tracing(file: TextIO | None = None) -> Iterator[None]:
    """Trace inside a ``with`` block, restoring the previous state after it."""
    previous = (ENABLED, _state.file)
    enable(file)
    try:
        yield
    finally:
        if previous[0]:
            enable(previous[1])
        else:
            disable()


# -- formatting -------------------------------------------------------------------------------------


def _emit(stage: str, subject: str, detail: str) -> None:
    now = time.perf_counter()
    if _state.t0 is None:
        _state.t0 = now
    ms = (now - _state.t0) * 1000
    out = _state.file if _state.file is not None else sys.stderr
    out.write(f"pyctrl.trace +{ms:10.3f} ms  {stage:<10} {subject} | {detail}\n")
    out.flush()


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _meta(obj: Any) -> tuple[str, str, str, str]:
    """(kind, namespace, name, resourceVersion) of a typed object or a dict."""
    if isinstance(obj, dict):
        meta = obj.get("metadata") or {}
        return (
            str(obj.get("kind") or "object"),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("resourceVersion") or ""),
        )
    meta = getattr(obj, "metadata", None)
    return (
        type(obj).__name__,
        str(getattr(meta, "namespace", "") or ""),
        str(getattr(meta, "name", "") or ""),
        str(getattr(meta, "resource_version", "") or ""),
    )


def _object(obj: Any) -> str:
    kind, namespace, name, _ = _meta(obj)
    return f"{kind} {_key(namespace, name)}"


def _predicate_name(check: Any) -> str:
    """A predicate's name: pyctrl's built-ins by their module name, else the function's name."""
    from pyctrl import predicate

    for name, value in vars(predicate).items():
        if value is check and not name.startswith("_"):
            return name
    if isinstance(check, predicate.Funcs):
        funcs = ((k, getattr(check, f"{k}_func")) for k in ("create", "update", "delete", "generic"))
        return f"Funcs({', '.join(f'{k}_func={_function_name(f)}' for k, f in funcs if f is not None)})"
    return _function_name(getattr(check, "fn", check))


def _function_name(fn: Any) -> str:
    name = getattr(fn, "__name__", None)
    return str(name) if name and name != "<lambda>" else type(fn).__name__


def _seconds(value: float) -> str:
    return f"{value:g}s"


# -- hooks (called only when ENABLED) ----------------------------------------------------------------


def watch_event(kind: str, event_type: str, obj: dict[str, Any]) -> None:
    """The watcher read one event from the watch stream."""
    _, namespace, name, rv = _meta(obj)
    if event_type == "BOOKMARK":
        _emit("watch", kind, f"BOOKMARK resourceVersion={rv}")
    else:
        _emit("watch", f"{kind} {_key(namespace, name)}", f"{event_type} resourceVersion={rv}")


def listed(reflector: Any, resource_version: str) -> None:
    """A (re)list finished and replaced the store."""
    _emit(
        "list",
        reflector.watcher._name,
        f"store replaced at resourceVersion={resource_version}: {len(reflector.store)} cached",
    )


def stored(reflector: Any, change: str, key: tuple[str, str]) -> None:
    """The reflector wrote one watch event to the store."""
    verb = {"add": "added to", "update": "updated in", "delete": "deleted from"}[change]
    _emit(
        "store",
        f"{reflector.watcher._name} {_key(*key)}",
        f"{change}: {verb} the store ({len(reflector.store)} cached)",
    )


def delivered(kind: str, change: Any, handler: Any) -> None:
    """An informer registration hands one change to its handler."""
    method = {"add": "on_add", "update": "on_update", "delete": "on_delete"}[change.type]
    flags = " (initial list)" if change.in_initial_list else " (tombstone)" if change.tombstone else ""
    _emit("handler", f"{kind} {_key(*change.key)}", f"{method}{flags} -> {handler!r}")


def predicates(source: str, event: Any, checks: Sequence[Any]) -> None:
    """Each predicate's verdict on ``event`` (re-evaluated: predicates are pure)."""
    from pyctrl.event import event_object, event_type
    from pyctrl.predicate import passes

    kind = event_type(event)
    verdicts = [(_predicate_name(check), passes(check, event)) for check in checks]
    rejected = [name for name, ok in verdicts if not ok]
    what = f"{kind} event from {source}"
    if not checks:
        detail = f"{what}: pass (no predicates)"
    elif rejected:
        detail = f"{what}: filtered by {', '.join(rejected)}"
    else:
        detail = f"{what}: pass ({', '.join(name for name, _ in verdicts)})"
    _emit("predicate", _object(event_object(event)), detail)


def _queue(queue: Any, item: Any) -> str:
    return f"{queue.name or 'queue'} {item}"


def _mark_ready(queue: Any, item: Any) -> None:
    ready = _state.ready_since
    if len(ready) >= MAX_TRACKED:
        del ready[next(iter(ready))]
    ready[(id(queue), item)] = time.perf_counter()


def queue_add(queue: Any, item: Any, priority: int) -> None:
    """Before ``Queue.add`` changes anything: what the add will do."""
    if queue._shutting_down:
        outcome = "ignored (shutting down)"
    elif item in queue._dirty:
        old = queue._dirty[item][0]
        kept = f"priority raised {old} -> {priority}" if priority > old else f"priority {old} kept"
        where = "re-queued on done" if item in queue._processing else "already queued"
        outcome = f"deduplicated: {where}, {kept}"
    elif item in queue._processing:
        outcome = "deferred: being processed, re-queued once on done"
    else:
        outcome = "queued (new)"
        _mark_ready(queue, item)
    _emit("queue", _queue(queue, item), f"add priority={priority}: {outcome}")


def queue_add_after(queue: Any, item: Any, seconds: float, priority: int) -> None:
    """Before ``DelayingQueue.add_after`` changes anything: what the delayed add will do."""
    if queue._shutting_down:
        outcome = "ignored (shutting down)"
    elif seconds <= 0:
        outcome = "no delay: added now"
    elif item in queue._dirty:
        outcome = "already queued: only the priority may rise"
    elif item in queue._waiting and queue._waiting[item].ready_at <= queue._clock.now() + seconds:
        outcome = "already waiting with an earlier ready time: kept"
    else:
        outcome = f"waiting {_seconds(seconds)} before it is queued"
    _emit("queue", _queue(queue, item), f"add_after {_seconds(seconds)} priority={priority}: {outcome}")


def delay_cut(queue: Any, item: Any) -> None:
    """An add without delay found ``item`` waiting for its delay (``Queue.add`` follows)."""
    _emit("queue", _queue(queue, item), "was waiting for its delay: ready now")


def delay_elapsed(queue: Any, item: Any) -> None:
    """A delayed item's ready time came (``Queue.add`` follows)."""
    _emit("queue", _queue(queue, item), "delay elapsed")


def picked(queue: Any, item: Any, priority: int) -> None:
    """A worker took ``item`` from ``queue``."""
    since = _state.ready_since.pop((id(queue), item), None)
    waited = f" after {(time.perf_counter() - since) * 1000:.3f} ms ready in the queue" if since else ""
    _emit("worker", _queue(queue, item), f"picked, priority={priority}{waited}")


def reconciled(controller: str, request: Any, outcome: Any, seconds: float) -> None:
    """The reconciler returned (or raised) ``outcome`` after ``seconds``."""
    from pyctrl.client.errors import Conflict
    from pyctrl.reconcile import Result, TerminalError

    match outcome:
        case TerminalError():
            result = f"terminal error, not retried: {outcome}"
        case Conflict():
            result = "conflict (stale read): requeue with backoff"
        case BaseException():
            result = f"error {type(outcome).__name__}: requeue with backoff"
        case Result(requeue_after=after) if after:
            result = f"requeue_after={_seconds(after)}"
        case Result(requeue=True):
            result = "requeue=True: requeue with backoff"
        case _:
            result = "success"
    _emit("reconcile", f"{controller} {request}", f"{result} in {seconds * 1000:.3f} ms")


def queue_done(queue: Any, item: Any) -> None:
    """After ``Queue.done``: whether an add made while processing queued the item again."""
    if item in queue._dirty:
        _mark_ready(queue, item)
        _emit("done", _queue(queue, item), "done: added while processing, so queued again")
    else:
        _emit("done", _queue(queue, item), "done")
