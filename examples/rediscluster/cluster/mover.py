"""Slot migration in the background: what ``redis-cli --cluster reshard`` does, off the reconcile.

The reconcile hands :meth:`SlotMover.submit` the moves of its plan and returns at once (it stays in
milliseconds: REFERENCE "never block in reconcile"); one task per cluster carries them out and
calls ``notify(key)`` when it ends, so the next reconcile observes the result and plans again.
A background task rather than one step per reconcile: keys move continuously over kept-open
connections (throughput on par with ``redis-cli``), while the only state that matters lives in
Redis itself — a crash mid-move leaves the slot MIGRATING/IMPORTING, which the next plan finishes
first (``plan`` rule 1) — so losing the task loses nothing.

Moving slot ``s`` from A to B, idempotent at every step (a repeat after a crash is safe):

1. on B ``CLUSTER SETSLOT s IMPORTING A`` (skipped when B already owns ``s``);
2. on A ``CLUSTER SETSLOT s MIGRATING B`` (skipped when A no longer owns ``s``);
3. until A holds no key of ``s``: ``CLUSTER GETKEYSINSLOT s batch`` on A, then
   ``MIGRATE B "" 0 timeout REPLACE [AUTH pw | AUTH2 user pw] KEYS ...`` (A's copy is the
   authoritative one; REPLACE only matters for a key a crash left on both; A logs in to B as the
   operator does: its ACL user with ``spec.users``, and over TLS when ``tls-cluster yes``, since
   redis-server opens MIGRATE connections as it opens the cluster bus's) — clients meanwhile get
   ``-ASK`` for moved keys, and a
   MIGRATING A creates no new key of ``s``, so a batch shorter than ``batch`` was the last;
4. ``CLUSTER SETSLOT s NODE B`` on B, then on A and every other master at once.

The slots of a transfer move ``group`` at a time (default 64): each step above is one pipeline
for the whole group on its node, so a group costs the round trips one slot did (at most 6 plus
one per further ``batch`` of a slot's keys), every slot still going through the steps in order.
A move is bound by round trips, not by bytes (a slot holds 0.3 keys in the e2e test, 61 in the
benchmark), and a round trip is as long as the scheduler makes it: moving one slot per round
trip, each 4,096-slot phase of the e2e test's 3 -> 4 -> 3 took 220-245 s at load ~12 on two
cores (10-40 slots/s); in groups of 64, 18 s and 14 s at load ~15.

A failing command (timeout, BUSYKEY, a node down) fails its group's step, which is retried (the
whole group, from step 1) with exponential backoff (0.1 s to 5 s) and counted in
:class:`Progress` (``errors``, ``last_error``); keys are never deleted other
than by MIGRATE itself, so none is lost or duplicated. ``stop()`` cancels every task (a slot may
stay open: the next leader finishes it). A failure that retrying cannot cure — a failover or a
pod restart under the job — is for the reconcile to see: :func:`outdated` says when the job no
longer fits what the nodes answer, and the reconcile then cancels it (``forget``) and plans again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions as rexc

from examples.rediscluster.cluster import metrics
from examples.rediscluster.cluster.plan_types import Member
from examples.rediscluster.shared.redis_admin import CLIENT_DEFAULTS, RedisAccess, tls_options
from examples.rediscluster.shared.tasks import cancel_and_wait

__all__ = ["Endpoint", "Job", "Progress", "SlotMover", "Transfer", "outdated"]

log = logging.getLogger(__name__)

ClusterKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A master as the mover reaches it: its address and its cluster node id."""

    ip: str
    port: int
    node_id: str


@dataclass(frozen=True, slots=True)
class Transfer:
    """One of the plan's ``MoveSlots``: ``slots`` from ``source`` to ``target``."""

    source: Endpoint
    target: Endpoint
    slots: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Job:
    """Transfers to run in order; ``masters``: every master, told the new owner of each slot."""

    label: str  # e.g. "resharding to 4 shards" or "repair of open slots"
    transfers: tuple[Transfer, ...]
    masters: tuple[Endpoint, ...]


@dataclass(slots=True)
class Progress:
    label: str
    slots_total: int
    slots_done: int = 0
    keys_moved: int = 0
    errors: int = 0
    last_error: str | None = None
    current: tuple[str, str] | None = None  # (source ip:port, target ip:port)
    finished: bool = False
    started_at: float = field(default_factory=time.monotonic)

    @property
    def slots_remaining(self) -> int:
        return self.slots_total - self.slots_done


class _Retry(Exception):
    pass


def outdated(job: Job, members: Sequence[Member]) -> str | None:
    """Why the running ``job`` no longer fits the observed cluster, or None while it does.

    A job is planned from one observation; a failover or a pod restart under it would make its
    steps fail for ever (SETSLOT on a replica, MIGRATE to an old address), so the reconcile
    cancels it and plans again when, for some transfer:

    - its source or target node answers as a replica (its shard failed over), or at another address;
    - another answering master serves some of its slots (the source's replica took them over);
    - every pod answers and none is its source or target node any more (a pod came back as a new
      node).

    A node that does not answer changes nothing: the mover's retries wait for it."""
    by_id = {m.node_id: m for m in members if m.reachable and m.node_id}
    all_answer = all(m.reachable for m in members)
    for t in job.transfers:
        for end in (t.source, t.target):
            m = by_id.get(end.node_id)
            if m is None:
                if all_answer:
                    return f"node {end.node_id[:8]} is no pod's node any more"
            elif not m.is_master:
                return f"{m.pod} (node {end.node_id[:8]}) is a replica now"
            elif (m.ip, m.port) != (end.ip, end.port):
                return f"{m.pod} (node {end.node_id[:8]}) answers at {m.ip}:{m.port} now"
        moving = set(t.slots)
        for m in by_id.values():
            ends = (t.source.node_id, t.target.node_id)
            if m.node_id not in ends and m.is_master and (taken := m.slots & moving):
                return f"{m.pod} serves {len(taken)} of the slots moving to {t.target.ip}"
    return None


class SlotMover:
    """One background migration task per cluster; see the module docstring."""

    needs_leader_election = True

    def __init__(
        self,
        notify: Callable[[ClusterKey], None],
        *,
        batch: int = 1000,
        group: int = 64,
        migrate_timeout_ms: int = 10000,
    ) -> None:
        if batch < 1 or group < 1:
            raise ValueError(f"batch and group must be >= 1, got batch={batch}, group={group}")
        self._notify = notify
        self._batch = batch
        self._group = group
        self._migrate_timeout_ms = migrate_timeout_ms
        self._tasks: dict[ClusterKey, asyncio.Task[None]] = {}
        self._progress: dict[ClusterKey, Progress] = {}
        self._jobs: dict[ClusterKey, Job] = {}

    def running(self, key: ClusterKey) -> bool:
        task = self._tasks.get(key)
        return task is not None and not task.done()

    def progress(self, key: ClusterKey) -> Progress | None:
        """The running (or last finished) job's progress."""
        return self._progress.get(key)

    def job(self, key: ClusterKey) -> Job | None:
        """The running (or last finished) job."""
        return self._jobs.get(key)

    def submit(self, key: ClusterKey, job: Job, access: RedisAccess) -> bool:
        """Start ``job`` unless one runs for ``key`` already (then False); ``access``: how every
        node is reached (user, password, TLS CA), and what MIGRATE authenticates with."""
        if self.running(key):
            return False
        progress = Progress(job.label, sum(len(t.slots) for t in job.transfers))
        self._progress[key] = progress
        self._jobs[key] = job
        self._tasks[key] = asyncio.create_task(self._run(key, job, access, progress), name=f"reshard {key}")
        return True

    def forget(self, key: ClusterKey) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
        self._progress.pop(key, None)
        self._jobs.pop(key, None)

    async def start(self, stop: asyncio.Event) -> None:
        try:
            await stop.wait()
        finally:
            await self.stop()

    async def stop(self) -> None:
        await cancel_and_wait(list(self._tasks.values()))
        self._tasks.clear()

    async def _run(self, key: ClusterKey, job: Job, access: RedisAccess, progress: Progress) -> None:
        clients: dict[tuple[str, int], aioredis.Redis] = {}
        tls = tls_options(access.tls_ca)

        def client(e: Endpoint) -> aioredis.Redis:
            if (e.ip, e.port) not in clients:
                clients[(e.ip, e.port)] = aioredis.Redis(
                    host=e.ip,
                    port=e.port,
                    username=access.username,
                    password=access.password,
                    socket_timeout=self._migrate_timeout_ms / 1000 + 5,
                    socket_connect_timeout=2,
                    decode_responses=False,
                    **tls,
                    **CLIENT_DEFAULTS,
                )
            return clients[(e.ip, e.port)]

        try:
            for t in job.transfers:
                progress.current = (f"{t.source.ip}:{t.source.port}", f"{t.target.ip}:{t.target.port}")
                for first in range(0, len(t.slots), self._group):
                    group = t.slots[first : first + self._group]
                    step = functools.partial(self._move, client, t, group, job, access)
                    await self._with_retries(key, progress, step, access.password)
                    progress.slots_done += len(group)
        finally:
            progress.finished = True
            progress.current = None
            for c in clients.values():
                with contextlib.suppress(Exception):
                    await c.aclose()
            with contextlib.suppress(Exception):
                self._notify(key)

    async def _with_retries(
        self, key: ClusterKey, progress: Progress, step: Callable[[], Awaitable[int]], password: str | None
    ) -> None:
        delay = 0.1
        while True:
            try:
                moved = await step()
                progress.keys_moved += moved
                metrics.observe_migration(*key, moved, 0)
                return
            except (rexc.RedisError, OSError, _Retry) as exc:
                progress.errors += 1
                metrics.observe_migration(*key, 0, 1)
                error = f"{type(exc).__name__}: {exc}"
                if password:  # the error reaches Events and status: never the password in it
                    error = error.replace(password, "***")
                progress.last_error = error[:300]
                log.info("slot move failed, retrying in %.1fs: %s", delay, progress.last_error)
                await asyncio.sleep(delay)  # backoff before the retry, not synchronisation
                delay = min(delay * 2, 5.0)

    async def _move(
        self,
        client: Callable[[Endpoint], aioredis.Redis],
        t: Transfer,
        slots: tuple[int, ...],
        job: Job,
        access: RedisAccess,
    ) -> int:
        """Move ``slots`` (module docstring: each step one pipeline); the number of keys moved."""
        src, dst = client(t.source), client(t.target)
        importing = [("CLUSTER", "SETSLOT", s, "IMPORTING", t.source.node_id) for s in slots]
        await _pipeline(dst, importing, ok_if="already the owner")
        migrating = [("CLUSTER", "SETSLOT", s, "MIGRATING", t.target.node_id) for s in slots]
        await _pipeline(src, migrating, ok_if="not the owner")
        # the source logs in to the target as the operator's user (over TLS with tls-cluster yes)
        auth: tuple[str, ...] = ()
        if access.password and access.username:
            auth = ("AUTH2", access.username, access.password)
        elif access.password:
            auth = ("AUTH", access.password)
        moved = 0
        pending = list(slots)
        while pending:
            listed = await _pipeline(src, [("CLUSTER", "GETKEYSINSLOT", s, self._batch) for s in pending])
            full = [(s, keys) for s, keys in zip(pending, listed, strict=True) if keys]
            if not full:
                break
            target = (t.target.ip, t.target.port, "", 0, self._migrate_timeout_ms, "REPLACE", *auth)
            migrate = [("MIGRATE", *target, "KEYS", *keys) for _, keys in full]
            for (s, _), reply in zip(full, await _pipeline(src, migrate), strict=True):
                if reply not in (b"OK", "OK", True, b"NOKEY", "NOKEY"):
                    raise _Retry(f"MIGRATE slot {s}: {reply!r}")
            moved += sum(len(keys) for _, keys in full)
            # all of a slot's keys were listed once a batch came back short; a MIGRATING source
            # creates no new key (-ASK)
            pending = [s for s, keys in full if len(keys) >= self._batch]
        node = [("CLUSTER", "SETSLOT", s, "NODE", t.target.node_id) for s in slots]
        await _pipeline(dst, node)
        others = [client(m) for m in job.masters if m.node_id not in (t.source.node_id, t.target.node_id)]
        results = await asyncio.gather(
            _pipeline(src, node), *(_pipeline(o, node) for o in others), return_exceptions=True
        )
        if isinstance(results[0], BaseException):  # the others learn it by gossip if unreachable
            raise results[0]
        return moved


async def _pipeline(
    c: aioredis.Redis, commands: Sequence[tuple[Any, ...]], *, ok_if: str | None = None
) -> list[Any]:
    """Send ``commands`` in one round trip (no MULTI); their replies. The first error reply is
    raised, unless its message contains ``ok_if`` (then its reply is None)."""
    pipe = c.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    replies = await pipe.execute(raise_on_error=False)
    out: list[Any] = []
    for reply in replies:
        tolerated = isinstance(reply, rexc.ResponseError) and ok_if is not None and ok_if in str(reply)
        if isinstance(reply, Exception) and not tolerated:
            raise reply
        out.append(None if tolerated else reply)
    return out
