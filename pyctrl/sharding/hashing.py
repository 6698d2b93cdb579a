"""Rendezvous (highest-random-weight) hashing: which member of a ring owns a key.

Every member computes ``score(member, key)`` for every live member and the highest score owns the
key (ties, which need a 64-bit collision, go to the greater member name). Properties, each tested:

- deterministic across processes and Python runs (BLAKE2b, not Python's salted ``hash``);
- balanced: each of ``n`` members owns about ``1/n`` of the keys;
- minimal movement: when a member leaves, only the keys it owned move (each to the member with
  its next-highest score); when a member joins, only keys that now score highest on the newcomer
  move, all of them to it. No other key changes owner, so a membership change re-enqueues and
  hands over only the objects that must move.

Unlike a consistent-hash ring it needs no virtual nodes for balance with few members; its cost is
``O(members)`` per lookup, negligible for the handful of replicas an operator runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["object_key", "rendezvous_owner", "score"]


def score(member: str, key: str) -> int:
    """The 64-bit weight of ``key`` on ``member``."""
    digest = hashlib.blake2b(f"{member}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous_owner(key: str, members: Iterable[str]) -> str | None:
    """The member owning ``key`` (None when there are no members)."""
    best: tuple[int, str] | None = None
    for member in members:
        candidate = (score(member, key), member)
        if best is None or candidate > best:
            best = candidate
    return best[1] if best is not None else None


def object_key(namespace: str | None, name: str) -> str:
    """The hash key of an object: ``namespace/name``, or ``name`` for a cluster-scoped one."""
    return f"{namespace}/{name}" if namespace else name
