"""Ring membership observed from member Leases (client-go leader election's expiry rule, per peer).

Each member holds one ``coordination.k8s.io`` Lease of its own, named
:func:`member_lease_name` (ring + a hash of its identity) and labelled ``RING_LABEL=<ring>``,
renewed by a :class:`~pyctrl.leaderelection.LeaderElector` (the member is the only candidate for
its own Lease). :class:`Peers` turns periodic lists of those Leases into two answers:

- ``live()``: the identities whose Lease is held and was seen *changing* less than its
  ``leaseDurationSeconds`` ago **on the observer's clock** (never ``renewTime``: clock skew), the
  rule a leader-election standby applies before taking a lease;
- ``is_gone(identity)``: the member has certainly stopped: its Lease is released (empty holder,
  written only after its controllers stopped) or has not changed for its duration on our clock, or
  is missing and has been missing for the default duration since we first looked for it.

A member whose renewals fail stops reconciling ``renew_deadline`` after its last successful renewal
started, which is before any observer can see its Lease unchanged for ``lease_duration`` (the
leader-election argument, ``lease_duration > renew_deadline``); so ``is_gone`` implies stopped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyctrl.client.objects import Lease, LeaseSpec
from pyctrl.workqueue import Clock

__all__ = ["RING_LABEL", "Peers", "member_lease_name"]

#: The label every member Lease carries; its value is the ring's name.
RING_LABEL = "sharding.pyctrl.io/ring"


def member_lease_name(ring: str, identity: str) -> str:
    """The Lease of ``identity`` in ``ring``: a valid object name whatever the identity holds."""
    return f"{ring}-{hashlib.blake2b(identity.encode(), digest_size=6).hexdigest()}"


@dataclass
class _Seen:
    record: tuple[Any, ...] | None  # None: the Lease was missing
    at: float  # our clock when the record was last seen to change


class Peers:
    """What one member has observed of the ring's Leases (single writer: its coordinator)."""

    def __init__(self, ring: str, clock: Clock, default_duration: float) -> None:
        self.ring = ring
        self.clock = clock
        self.default_duration = default_duration
        self._seen: dict[str, _Seen] = {}
        self._leases: dict[str, Lease] = {}

    def observe(self, leases: Iterable[Lease]) -> None:
        """Record one list of the ring's Leases (all of them)."""
        now = self.clock.now()
        listed = {lease.metadata.name or "": lease for lease in leases}
        for name, lease in listed.items():
            s = lease.spec or LeaseSpec()
            record = (s.holder_identity, s.lease_duration_seconds, s.acquire_time, s.renew_time)
            seen = self._seen.get(name)
            if seen is None or seen.record != record:
                self._seen[name] = _Seen(record, now)
        for name, seen in self._seen.items():
            if name not in listed and seen.record is not None:
                self._seen[name] = _Seen(None, now)
        self._leases = listed

    def _expired(self, seen: _Seen, now: float) -> bool:
        if seen.record is None:
            return now - seen.at >= self.default_duration
        holder, duration = seen.record[0], seen.record[1] or self.default_duration
        return not holder or now - seen.at >= duration

    def live(self) -> frozenset[str]:
        """Identities holding an unexpired member Lease."""
        now = self.clock.now()
        out = set()
        for name, lease in self._leases.items():
            holder = lease.spec.holder_identity if lease.spec else None
            if (
                holder
                and member_lease_name(self.ring, holder) == name
                and not self._expired(self._seen[name], now)
            ):
                out.add(holder)
        return frozenset(out)

    def is_gone(self, identity: str) -> bool:
        """True once ``identity`` has certainly stopped reconciling (see the module docstring)."""
        name, now = member_lease_name(self.ring, identity), self.clock.now()
        seen = self._seen.get(name)
        if seen is None:  # never listed: missing from now on our clock
            self._seen[name] = seen = _Seen(None, now)
        if seen.record is not None and seen.record[0] != identity:
            return True  # released (empty holder)
        return self._expired(seen, now)

    def garbage(self, grace: float) -> list[Lease]:
        """Leases unchanged for ``grace`` seconds on our clock (released or long expired; a live
        member renews every retry period): safe to delete, as a missing Lease counts as gone."""
        now = self.clock.now()
        return [lease for name, lease in self._leases.items() if now - self._seen[name].at >= grace]
