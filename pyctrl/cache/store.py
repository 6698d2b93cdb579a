"""The informer store: objects as compact JSON bytes, with a namespace partition and indexes.

Mirrors client-go ``tools/cache.ThreadSafeStore`` + ``Indexer`` (and kube-rs ``reflector::Store``:
one writer, many readers).

Design (measured in ``benchmarks/cache_bench.py``): a parsed dict of a small ConfigMap costs
3-5x its JSON size in CPython, so the store keeps each object as the compact JSON bytes of its
transformed form. What reads need without decoding is extracted once, at insertion: the
namespace (the store is partitioned by it — the built-in namespace index costs nothing per
object), the labels (interned: objects sharing a label set share one dict) and the values of the
user's index functions.

Guarantees:

- a caller can never corrupt the store: it hands out ``bytes`` (immutable); every read decodes a
  fresh object;
- exactly one writer: only the reflector calls the mutating methods (``replace``, ``upsert``,
  ``delete``, ``add_index``); readers see either the state before or after a whole write — in
  asyncio a write never yields half-way;
- index values are those of the object currently stored: an update or delete removes the old
  values before adding the new ones;
- ``list`` returns objects in a stable (namespace, name) order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from pyctrl.client.selectors import Selector

__all__ = ["IndexFunc", "Key", "Store", "StoredObject"]

#: ``(namespace, name)``; namespace is ``""`` for cluster-scoped objects.
Key = tuple[str, str]
#: Maps a stored object (decoded by the store's decoder) to its index values.
IndexFunc = Callable[[Any], Iterable[str]]


class StoredObject(NamedTuple):
    """One cached object: its JSON bytes, its (shared, read-only) labels and index values.

    A tuple of untracked values, so the garbage collector stops tracking it after its first
    collection: a store of 10,000 objects adds nothing to every later collection's work.
    """

    data: bytes
    labels: Mapping[str, str] | None
    index_values: tuple[tuple[str, ...], ...]


class _LabelInterner:
    """Shares one dict among objects with equal labels; refcounted so the table shrinks again."""

    def __init__(self) -> None:
        self._table: dict[tuple[tuple[str, str], ...], list[Any]] = {}

    def acquire(self, labels: Mapping[str, str] | None) -> Mapping[str, str] | None:
        if not labels:
            return None
        # not sorted: the apiserver writes map keys in a fixed order, so equal label sets arrive as
        # equal tuples; a differently ordered equal set only costs one more shared dict
        key = tuple(labels.items())
        slot = self._table.get(key)
        if slot is None:
            slot = self._table[key] = [dict(key), 0]
        slot[1] += 1
        shared: Mapping[str, str] = slot[0]
        return shared

    def release(self, labels: Mapping[str, str] | None) -> None:
        if not labels:
            return
        key = tuple(labels.items())
        slot = self._table.get(key)
        if slot is not None:
            slot[1] -= 1
            if slot[1] <= 0:
                del self._table[key]


class Store:
    """Namespace-partitioned object store with secondary indexes (see the module docstring)."""

    def __init__(self, decode: Callable[[bytes], Any]) -> None:
        self._decode = decode
        self._by_ns: dict[str, dict[str, StoredObject]] = {}
        self._labels = _LabelInterner()
        self._index_names: list[str] = []
        self._index_funcs: list[IndexFunc] = []
        #: index name -> value -> keys
        self._indexes: dict[str, dict[str, set[Key]]] = {}
        self._count = 0

    # -- reads ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._count

    def get(self, namespace: str, name: str) -> bytes | None:
        entry = self._by_ns.get(namespace, {}).get(name)
        return entry.data if entry is not None else None

    def entry(self, key: Key) -> StoredObject | None:
        return self._by_ns.get(key[0], {}).get(key[1])

    def all_keys(self) -> Iterator[Key]:
        for ns, objs in self._by_ns.items():
            for name in objs:
                yield ns, name

    def has_index(self, name: str) -> bool:
        return name in self._indexes

    def lookup(self, index: str, value: str) -> set[Key]:
        """Keys whose index function returned ``value`` (a copy)."""
        return set(self._indexes[index].get(value, ()))

    def get_many(self, keys: Iterable[Key], selector: Selector | None = None) -> list[bytes]:
        """Objects for ``keys`` in (namespace, name) order, filtered by ``selector``."""
        out = []
        for key in sorted(keys):
            entry = self.entry(key)
            if entry is not None and (not selector or selector.matches(entry.labels)):
                out.append(entry.data)
        return out

    def list(self, *, namespace: str | None = None, selector: Selector | None = None) -> list[bytes]:
        """Objects in ``namespace`` (all if ``None``) matching ``selector``, in key order."""
        if namespace is not None:
            part = self._by_ns.get(namespace, {})
            candidates: Iterable[StoredObject] = (part[n] for n in sorted(part))
        else:
            candidates = (self._by_ns[ns][n] for ns in sorted(self._by_ns) for n in sorted(self._by_ns[ns]))
        if selector:
            return [e.data for e in candidates if selector.matches(e.labels)]
        return [e.data for e in candidates]

    # -- writes (the reflector only) ----------------------------------------------------------------
    def make_entry(self, data: bytes, labels: Mapping[str, str] | None) -> StoredObject:
        """Build an entry (interning labels, computing index values) without inserting it."""
        values: tuple[tuple[str, ...], ...] = ()
        if self._index_funcs:
            obj = self._decode(data)
            values = tuple(tuple(fn(obj)) for fn in self._index_funcs)
        return StoredObject(data, self._labels.acquire(labels), values)

    def upsert(self, key: Key, entry: StoredObject) -> StoredObject | None:
        """Insert or replace; returns the previous entry."""
        part = self._by_ns.get(key[0])
        if part is None:
            part = self._by_ns[key[0]] = {}
        old = part.get(key[1])
        part[key[1]] = entry
        if old is None:
            self._count += 1
        else:
            self._unindex(key, old)
            self._labels.release(old.labels)
        self._index(key, entry)
        return old

    def delete(self, key: Key) -> StoredObject | None:
        """Remove; returns the removed entry (``None`` if absent)."""
        part = self._by_ns.get(key[0])
        old = part.pop(key[1], None) if part is not None else None
        if old is not None:
            self._count -= 1
            self._unindex(key, old)
            self._labels.release(old.labels)
            if not part:
                del self._by_ns[key[0]]
        return old

    def replace(self, partitions: dict[str, dict[str, StoredObject]]) -> dict[str, dict[str, StoredObject]]:
        """Swap in a whole new content, namespace -> name -> entry (after a list); returns the
        previous content in the same shape. Without indexes this costs nothing per new object."""
        previous = self._by_ns
        for objs in previous.values():
            for old in objs.values():
                self._labels.release(old.labels)
        self._by_ns = {ns: objs for ns, objs in partitions.items() if objs}
        self._count = sum(len(objs) for objs in self._by_ns.values())
        for idx in self._indexes.values():
            idx.clear()
        if self._index_names:
            for key, entry in self._iter_entries():
                self._index(key, entry)
        return previous

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Register an index and compute it for every stored object."""
        if name in self._indexes:
            raise ValueError(f"index {name!r} already exists")
        self._index_names.append(name)
        self._index_funcs.append(fn)
        self._indexes[name] = {}
        for key, old in list(self._iter_entries()):
            self._unindex(key, old)
            values = (*old.index_values, tuple(fn(self._decode(old.data))))
            new = self._by_ns[key[0]][key[1]] = old._replace(index_values=values)
            self._index(key, new)

    def _iter_entries(self) -> Iterator[tuple[Key, StoredObject]]:
        for ns, objs in self._by_ns.items():
            for name, entry in objs.items():
                yield (ns, name), entry

    def _index(self, key: Key, entry: StoredObject) -> None:
        for name, values in zip(self._index_names, entry.index_values, strict=False):
            idx = self._indexes[name]
            for value in values:
                bucket = idx.get(value)
                if bucket is None:
                    bucket = idx[value] = set()
                bucket.add(key)

    def _unindex(self, key: Key, entry: StoredObject) -> None:
        for name, values in zip(self._index_names, entry.index_values, strict=False):
            idx = self._indexes[name]
            for value in values:
                bucket = idx.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del idx[value]
