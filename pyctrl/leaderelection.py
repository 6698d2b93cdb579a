"""Leader election on a coordination.k8s.io Lease (client-go ``tools/leaderelection``, Lease lock).

Algorithm (client-go's ``tryAcquireOrRenew``), run every ``retry_period``:

1. get the Lease; create it (holder = us) if it does not exist;
2. when the record differs from the one last observed, remember it and *our* monotonic time of
   observation — expiry is judged on the observer's clock, never on ``renewTime`` (clock skew);
3. a record held by someone else is left alone until ``lease_duration`` has passed on our clock
   since we observed it change;
4. write the new record with an update carrying the observed ``resourceVersion``: of two
   candidates only one update succeeds (the other gets ``Conflict``), so two cannot both win.
   ``leaseTransitions`` grows on every change of holder.

While leading, the lease is renewed every ``retry_period``; when no renewal has succeeded for
``renew_deadline`` the elector declares leadership lost. Since ``lease_duration > renew_deadline``
the old leader stops before any standby can take the lease: the deadline is counted from the
*start* of the last successful renewal (before the apiserver stored it), while a standby counts
``lease_duration`` from when it *observed* that renewal (after it was stored).

Deliberate differences from client-go, both keeping its safety argument: candidates retry every
``retry_period * [1, 1.2)`` (client-go's JitterUntil allows up to 2.2x), and a candidate that saw
a held lease retries right when that lease expires on its clock if that is sooner, so a standby
takes over a dead leader's lease within ``lease_duration + 1.2 * retry_period`` of the last renewal.

``release_on_cancel`` writes an empty holder with ``leaseDurationSeconds: 1`` on a clean stop so a
standby takes over within one retry period. ``leader_election_master_status{name}`` is 1 while
leading.

Defaults are controller-runtime's: 15 s / 10 s / 2 s; identity ``hostname_uuid``.
"""

from __future__ import annotations

import asyncio
import datetime
import random
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Gauge

from pyctrl._deadline import done_by
from pyctrl.client.errors import Conflict, KubernetesError, NotFound
from pyctrl.client.interfaces import Client
from pyctrl.client.objects import Lease, LeaseSpec, ObjectMeta
from pyctrl.log import get_logger
from pyctrl.metrics import registry
from pyctrl.workqueue import Clock, RealClock

__all__ = ["LeaderElectionConfig", "LeaderElectionLost", "LeaderElector", "default_identity"]

_JITTER = 1.2
_JITTER_FACTOR = 0.2  # candidates retry every retry_period * [1, 1.2)


async def _wait(stop: asyncio.Event, clock: Clock, seconds: float) -> bool:
    """Wait ``seconds`` on ``clock`` or until ``stop``; True when stopped."""
    await done_by(clock, clock.now() + seconds, asyncio.ensure_future(stop.wait()))
    return stop.is_set()


_master_status = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, "
    "0 indicates backup, 1 indicates master.",
    ("name",),
    registry=registry,
)


class LeaderElectionLost(RuntimeError):
    """Leadership was lost (no renewal within the renew deadline)."""


def default_identity() -> str:
    """``hostname_uuid``, as controller-runtime."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(now: datetime.datetime | None = None) -> str:
    now = now or datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the lease is and the timings; validated as client-go does."""

    name: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = False
    #: labels the Lease carries (set when created, kept on every write): sharding's member
    #: Leases are found by them (:mod:`pyctrl.sharding`)
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or not self.namespace:
            raise ValueError("leader election needs a lease name and namespace")
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if not self.renew_deadline > _JITTER * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than retry_period*{_JITTER}")
        if self.retry_period <= 0:
            raise ValueError("retry_period must be greater than zero")


class LeaderElector:
    """Campaigns for, holds and releases one Lease through ``client`` (get/create/update)."""

    def __init__(self, client: Client, config: LeaderElectionConfig, *, clock: Clock | None = None):
        self.client = client
        self.config = config
        self.clock: Clock = clock if clock is not None else RealClock()
        self.elected = asyncio.Event()
        self.log = get_logger("pyctrl.leaderelection", lease=f"{config.namespace}/{config.name}")
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._expires_at: float | None = None  # when the lease held by another expires for us
        self._lease: Lease | None = None
        self._gauge = _master_status.labels(config.name)
        self._gauge.set(0)

    def is_leader(self) -> bool:
        return self.elected.is_set()

    async def run(self, stop: asyncio.Event) -> None:
        """Acquire, then renew until ``stop`` (returns) or loss (raises ``LeaderElectionLost``)."""
        acquired_at = await self._acquire(stop)
        if acquired_at is None:
            return
        try:
            await self._renew(stop, acquired_at)
        finally:
            self.elected.clear()
            self._gauge.set(0)
        if self.config.release_on_cancel:
            await self.release()

    async def _acquire(self, stop: asyncio.Event) -> float | None:
        """Try every retry period (sooner when the held lease expires first) until we win;
        return the clock time the winning attempt *started* (None when stopped first)."""
        self.log.info("Attempting to acquire leader lease", identity=self.config.identity)
        while not stop.is_set():
            started = self.clock.now()
            if await self.try_acquire_or_renew():
                self.elected.set()
                self._gauge.set(1)
                self.log.info("Successfully acquired lease", identity=self.config.identity)
                return started
            wait = self.config.retry_period * (1 + _JITTER_FACTOR * random.random())
            if self._expires_at is not None:
                wait = min(wait, max(0.0, self._expires_at - self.clock.now()) + 0.01)
            await _wait(stop, self.clock, wait)
        return None

    async def _renew(self, stop: asyncio.Event, last_renew: float) -> None:
        """Renew every retry period; raise once no attempt *started* within the renew deadline
        succeeded. Attempts are timed from their start, so the loss is declared no later than
        ``renew_deadline`` after the start of the last successful write, which is before the
        write itself: a standby (timing ``lease_duration`` from a later observation) cannot have
        taken the lease yet."""
        cfg = self.config
        while True:
            deadline = last_renew + cfg.renew_deadline
            if await _wait(stop, self.clock, min(cfg.retry_period, max(0.0, deadline - self.clock.now()))):
                return
            started = self.clock.now()
            ok = False
            if deadline - started > 0:  # the attempt is cut off at the deadline, on our clock
                attempt = asyncio.ensure_future(self.try_acquire_or_renew())
                ok = await done_by(self.clock, deadline, attempt) and attempt.result()
            if ok:
                last_renew = started
            elif self.clock.now() >= deadline:
                self.log.error("Failed to renew lease within the renew deadline; leadership lost")
                raise LeaderElectionLost(
                    f"lease {cfg.namespace}/{cfg.name}: no renewal for {cfg.renew_deadline}s"
                )

    def _record(self, spec: LeaseSpec | None) -> tuple[Any, ...]:
        s = spec or LeaseSpec()
        return (
            s.holder_identity,
            s.lease_duration_seconds,
            s.acquire_time,
            s.renew_time,
            s.lease_transitions,
        )

    async def try_acquire_or_renew(self) -> bool:
        """One step of client-go's ``tryAcquireOrRenew``: True when we hold the lease after it."""
        cfg, now_wall = self.config, _micro_time()
        self._expires_at = None
        try:
            lease: Lease = await self.client.get(Lease, cfg.name, namespace=cfg.namespace)
        except NotFound:
            new = Lease(
                metadata=ObjectMeta(name=cfg.name, namespace=cfg.namespace, labels=dict(cfg.labels) or None),
                spec=LeaseSpec(
                    holder_identity=cfg.identity,
                    lease_duration_seconds=max(1, round(cfg.lease_duration)),
                    acquire_time=now_wall,
                    renew_time=now_wall,
                    lease_transitions=0,
                ),
            )
            return await self._write(new, create=True)
        except KubernetesError as exc:
            self.log.info("Error retrieving lease", error=str(exc))
            return False
        record = self._record(lease.spec)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock.now()
        spec = lease.spec or LeaseSpec()
        holder = spec.holder_identity or ""
        duration = spec.lease_duration_seconds or round(cfg.lease_duration)
        if holder and holder != cfg.identity and self.clock.now() - self._observed_at < duration:
            self._expires_at = self._observed_at + duration
            return False
        transitions = spec.lease_transitions or 0
        new_spec = LeaseSpec(
            holder_identity=cfg.identity,
            lease_duration_seconds=max(1, round(cfg.lease_duration)),
            acquire_time=spec.acquire_time if holder == cfg.identity else now_wall,
            renew_time=now_wall,
            lease_transitions=transitions if holder == cfg.identity else transitions + 1,
        )
        update: dict[str, Any] = {"spec": new_spec}
        if cfg.labels and any((lease.metadata.labels or {}).get(k) != v for k, v in cfg.labels.items()):
            labels = {**(lease.metadata.labels or {}), **cfg.labels}
            update["metadata"] = lease.metadata.model_copy(update={"labels": labels})
        return await self._write(lease.model_copy(update=update), create=False)

    async def _write(self, lease: Lease, *, create: bool) -> bool:
        try:
            stored: Lease = await (self.client.create(lease) if create else self.client.update(lease))
        except Conflict:
            return False  # someone else wrote first
        except KubernetesError as exc:
            self.log.info("Error writing lease", error=str(exc))
            return False
        self._lease = stored
        self._observed, self._observed_at = self._record(stored.spec), self.clock.now()
        return True

    async def release(self) -> bool:
        """Give the lease up (empty holder, 1 s duration) if we hold it; True when written."""
        lease = self._lease
        if lease is None or lease.spec is None or lease.spec.holder_identity != self.config.identity:
            return False
        now = _micro_time()
        spec = lease.spec.model_copy(
            update={
                "holder_identity": "",
                "lease_duration_seconds": 1,
                "renew_time": now,
                "acquire_time": now,
            }
        )
        try:
            await self.client.update(lease.model_copy(update={"spec": spec}))
        except KubernetesError as exc:
            self.log.info("Failed to release lease", error=str(exc))
            return False
        self.log.info("Released leader lease")
        return True
