"""Hash-slot arithmetic of Redis Cluster: even layouts, ranges, and the moves of a rebalance.

Pure functions, no I/O. Mirrors what ``redis-cli --cluster create`` (even split over the masters)
and ``redis-cli --cluster rebalance`` (move the fewest slots so every master holds
16384/N ± 1) compute, with one difference: the plan is deterministic (same ownership, same
moves), so a reconcile that recomputes it after a restart continues the same rebalance.

Guarantees:

- :func:`even_counts` gives ``n`` counts summing to 16384 that differ by at most one;
- :func:`rebalance` moves only slots of shards above their target (departing shards, index
  ``>= shards``, have target 0), each slot once, to shards below theirs; after the moves every
  shard ``< shards`` holds its target; unassigned slots are not moved (bootstrap assigns them);
- :class:`SlotSet` holds slots as sorted, disjoint inclusive runs (two 16-bit numbers per run,
  not one Python int per slot): a master's view of ~164 contiguous slots is ~150 bytes instead
  of ~13 KB as a ``frozenset``; it is a read-only ``Set[int]`` (``in``, ``len``, iteration,
  ``&``/``|``/``-``, equality with any set of the same slots); building one refuses any slot
  outside ``0 .. 16383`` (``ValueError``), so its size is bounded whatever it is built from;
- :func:`parse_ranges` refuses a range outside ``0 .. 16383`` or reversed (``ValueError``), so
  ``"0-9999999999"`` costs nothing.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EMPTY_SLOTS",
    "SLOTS",
    "Move",
    "SlotSet",
    "even_counts",
    "even_layout",
    "format_ranges",
    "parse_ranges",
    "parse_slot_set",
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


class SlotSet(AbstractSet[int]):
    """An immutable set of hash slots held as runs (see the module docstring)."""

    __slots__ = ("_hash_value", "_len", "_runs")
    _runs: array[int]  # first0, last0, first1, last1, ...: sorted, disjoint, not adjacent
    _len: int
    _hash_value: int | None

    def __init__(self, slots: Iterable[int] = ()) -> None:
        if isinstance(slots, SlotSet):
            self._set_runs(slots._runs)
            return
        self._set_runs(_merge((s, s) for s in sorted({_slot(s) for s in slots})))

    @classmethod
    def from_runs(cls, runs: Iterable[tuple[int, int]]) -> SlotSet:
        """The slots of inclusive ``(first, last)`` runs, in any order, overlapping or not;
        ``ValueError`` for a slot outside ``0 .. 16383`` or a reversed run."""
        checked = []
        for first, last in runs:
            if _slot(first) > _slot(last):
                raise ValueError(f"slot range {first}-{last} is reversed")
            checked.append((first, last))
        out = cls.__new__(cls)
        out._set_runs(_merge(sorted(checked)))
        return out

    def _set_runs(self, runs: Iterable[int]) -> None:
        self._runs = array("H", runs)
        self._len = sum(self._runs[i + 1] - self._runs[i] + 1 for i in range(0, len(self._runs), 2))
        self._hash_value = None

    @property
    def runs(self) -> list[tuple[int, int]]:
        """The inclusive ``(first, last)`` runs, sorted."""
        r = self._runs
        return [(r[i], r[i + 1]) for i in range(0, len(r), 2)]

    def __contains__(self, slot: object) -> bool:
        if not isinstance(slot, int):
            return False
        i = bisect_right(self._runs, slot)  # odd: inside a run (or on its first slot)
        return i % 2 == 1 or (i > 0 and self._runs[i - 1] == slot)

    def __iter__(self) -> Iterator[int]:
        for first, last in self.runs:
            yield from range(first, last + 1)

    def __len__(self) -> int:
        return self._len

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SlotSet):
            return self._runs == other._runs
        return super().__eq__(other)

    def __hash__(self) -> int:
        if self._hash_value is None:  # the frozenset algorithm: equal to a frozenset's hash
            self._hash_value = self._hash()
        return self._hash_value

    def __and__(self, other: AbstractSet[Any]) -> SlotSet:
        if not isinstance(other, SlotSet):
            return SlotSet(s for s in other if s in self)
        out, a, b = [], self.runs, other.runs
        i = j = 0
        while i < len(a) and j < len(b):
            first, last = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if first <= last:
                out.append((first, last))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return SlotSet.from_runs(out)

    def __or__(self, other: AbstractSet[Any]) -> SlotSet:
        if isinstance(other, SlotSet):
            return SlotSet.from_runs(self.runs + other.runs)
        return SlotSet.from_runs([*self.runs, *((s, s) for s in other)])

    __rand__ = __and__
    __ror__ = __or__

    def __repr__(self) -> str:
        return f"SlotSet({','.join(format_ranges(self))!r})"


def _slot(value: object) -> int:
    if not isinstance(value, int) or not 0 <= value < SLOTS:
        raise ValueError(f"{value!r} is not a hash slot (0 .. {SLOTS - 1})")
    return value


def _merge(runs: Iterable[tuple[int, int]]) -> list[int]:
    """Sorted runs merged where they overlap or touch, flattened."""
    out: list[int] = []
    for first, last in runs:
        if out and first <= out[-1] + 1:
            out[-1] = max(out[-1], last)
        else:
            out += (first, last)
    return out


#: The slots of a node serving none (shared: most views are of replicas).
EMPTY_SLOTS = SlotSet()


def ranges(slots: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted slots as inclusive ``(first, last)`` runs."""
    if isinstance(slots, SlotSet):
        return slots.runs
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
    """The slots of ranges as :func:`format_ranges` writes them (``["0-5460", "10923"]``);
    ``ValueError`` for a slot outside ``0 .. 16383`` or a reversed range."""
    return set(parse_slot_set(text))


def parse_slot_set(text: Iterable[str]) -> SlotSet:
    """:func:`parse_ranges` as a :class:`SlotSet` (no slot expanded)."""
    runs = []
    for r in text:
        first, _, last = r.partition("-")
        runs.append((_number(first), _number(last or first)))
    return SlotSet.from_runs(runs)


def _number(text: str) -> int:
    if not text.isdigit() or len(text) > 5:  # 16383 has five digits; isdigit refuses signs
        raise ValueError(f"{text!r} is not a hash slot (0 .. {SLOTS - 1})")
    return int(text)


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
