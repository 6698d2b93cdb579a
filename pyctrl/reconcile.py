"""Reconcile requests and results (controller-runtime ``pkg/reconcile``).

A reconciler is any object with ``async def reconcile(self, request: Request) -> Result``. It is
level-triggered: it reads the current state named by ``request`` and drives the world towards the
desired state, the same way whether it runs once or ten thousand times.

How the controller treats what ``reconcile`` returns or raises (REFERENCE "Reconcile results"):

============================  ==========================  ===============================
outcome                       queue action                reconcile_total ``result``
============================  ==========================  ===============================
raises (not TerminalError)    ``add_rate_limited``        ``error``
raises ``TerminalError``      ``forget``, no retry        ``error`` (+ terminal counter)
``Result(requeue_after=s)``   ``forget``, ``add_after``   ``requeue_after``
``Result(requeue=True)``      ``add_rate_limited``        ``requeue``
``Result()``                  ``forget``                  ``success``
============================  ==========================  ===============================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = ["Reconciler", "Request", "Result", "TerminalError"]


class Request(NamedTuple):
    """The object to reconcile: its namespace ("" for cluster-scoped) and name.

    A tuple (as ``types.NamespacedName`` is a plain struct): it is the workqueue's key, hashed
    several times per reconcile, and a tuple hashes and compares in C, where a frozen dataclass
    runs Python for each. ``ns, name = request`` works; it equals the plain tuple of its fields.
    """

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """What to do after a successful reconcile.

    ``requeue_after`` (seconds) wins over ``requeue``; ``priority`` is the queue priority of the
    requeued request (default: the queue's normal priority 0).
    """

    requeue: bool = False
    requeue_after: float | None = None
    priority: int | None = None

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError(f"requeue_after must be >= 0, got {self.requeue_after}")


class TerminalError(Exception):
    """An error retrying cannot fix (an invalid spec, say): logged and counted, never requeued."""


@runtime_checkable
class Reconciler(Protocol):
    """controller-runtime ``reconcile.Reconciler``."""

    async def reconcile(self, request: Request) -> Result: ...
