"""Hash-slot arithmetic of Redis Cluster: even layouts, ranges, and the moves of a rebalance.

Pure functions, no I/O. Mirrors what ``redis-cli --cluster create`` (even split over the masters)
and ``redis-cli --cluster rebalance`` (move the fewest slots so every master holds
16384/N ± 1) compute, with one difference: the plan is deterministic (same ownership, same
moves), so a reconcile that recomputes it after a restart continues the same rebalance.

Guarantees:

- :func:`even_counts` gives ``n`` counts summing to 16384 that differ by at most one;
- :func:`rebalance` moves only slots of shards above their target (departing shards, index
  ``>= shards``, have target 0), each slot once, to shards below theirs; after the moves every
  shard ``< shards`` holds its target; unassigned slots are not moved (bootstrap assigns them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "SLOTS",
    "Move",
    "even_counts",
    "even_layout",
    "format_ranges",
    "parse_ranges",
    "ranges",
    "rebalance",
]

SLOTS = 16384


@dataclass(frozen=True, slots=True, order=True)
class Move:
    """Move ``slot`` from the master of shard ``source`` to the master of shard ``target``."""

    slot: int
    source: int
    target: int


def even_counts(n: int) -> list[int]:
    """Slots per shard for ``n`` shards: the first ``16384 % n`` get one more."""
    if n < 1:
        raise ValueError("at least one shard")
    base, extra = divmod(SLOTS, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def even_layout(n: int) -> list[range]:
    """Contiguous slot ranges of an even split over ``n`` shards (what ``--cluster create`` does)."""
    out, start = [], 0
    for count in even_counts(n):
        out.append(range(start, start + count))
        start += count
    return out


def ranges(slots: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted slots as inclusive ``(first, last)`` runs."""
    out: list[tuple[int, int]] = []
    for s in sorted(set(slots)):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def format_ranges(slots: Iterable[int]) -> list[str]:
    """``["0-5460", "10923"]``: the form CLUSTER NODES and ``status.shards[].slots`` use."""
    return [f"{a}-{b}" if a != b else str(a) for a, b in ranges(slots)]


def parse_ranges(text: Iterable[str]) -> set[int]:
    """The slots of ranges as :func:`format_ranges` writes them (``["0-5460", "10923"]``)."""
    out: set[int] = set()
    for r in text:
        first, _, last = r.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


def _targets(owned: Mapping[int, Iterable[int]], shards: int) -> dict[int, int]:
    """Target count per shard; the larger targets go to the shards holding most (fewest moves)."""
    counts = sorted(even_counts(shards), reverse=True)
    order = sorted(range(shards), key=lambda i: (-len(set(owned.get(i, ()))), i))
    targets = dict.fromkeys(owned, 0)
    targets.update({shard: counts[rank] for rank, shard in enumerate(order)})
    return targets


def rebalance(owned: Mapping[int, Iterable[int]], shards: int) -> list[Move]:
    """The moves that take ``owned`` (shard index -> slots its master serves) to an even layout
    over shards ``0 .. shards-1``; shards with a higher index are drained to zero.

    Donors give their highest slots first; recipients are filled in index order. The result is
    sorted by (source, target, slot), so consecutive moves share a source/target pair."""
    mine = {shard: sorted(set(slots)) for shard, slots in owned.items()}
    targets = _targets(mine, shards)
    pool: list[tuple[int, int]] = []  # (slot, source)
    for shard in sorted(mine):
        excess = len(mine[shard]) - targets[shard]
        if excess > 0:
            pool += [(s, shard) for s in mine[shard][-excess:]]
    moves: list[Move] = []
    for shard in sorted(targets):
        need = targets[shard] - len(mine.get(shard, ()))
        while need > 0 and pool:
            slot, source = pool.pop()
            moves.append(Move(slot, source, shard))
            need -= 1
    return sorted(moves, key=lambda m: (m.source, m.target, m.slot))


def shard_of(ordinal: int, replicas_per_shard: int) -> int:
    """The shard a StatefulSet pod belongs to: ordinals are grouped ``1 + replicasPerShard`` a shard."""
    return ordinal // (1 + replicas_per_shard)


def pods_for(shards: int, replicas_per_shard: int) -> int:
    """StatefulSet replicas for ``shards`` shards."""
    return shards * (1 + replicas_per_shard)


def counts(owned: Mapping[int, Sequence[int]]) -> dict[int, int]:
    return {shard: len(slots) for shard, slots in owned.items()}
