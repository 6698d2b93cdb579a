"""The informer cache: one informer per kind, started lazily, read from memory.

Mirrors controller-runtime ``pkg/cache`` (``informerCache``: ``Get``/``List`` from informers,
``GetInformer``, ``IndexField``, ``WaitForCacheSync``, ``Options.ByObject`` with namespaces,
selectors and transforms, ``DefaultTransform`` stripping managedFields).

Guarantees:

- one informer (per namespace when ``namespaces`` is set) per kind and representation, whether the
  kind is named by its typed class or by its GVK; created on the first
  ``get_informer``/``index_field``/read, and started at once if the cache runs, else by
  :meth:`Cache.start`;
- the metadata-only representation (``PartialObjectMetadata.of(kind)``, controller-runtime's
  ``metav1.PartialObjectMetadata`` with the kind's GVK) has informers of its own, listing and
  watching ``PartialObjectMetadata(List)``: it caches only metadata, and its reads return
  ``PartialObjectMetadata`` objects. As in controller-runtime, a read (or ``get_informer``) of one
  representation never answers from the other's informer: a metadata-only read of a kind whose
  full form is cached starts a metadata informer beside it (one more list and watch), and a full
  read of a kind cached as metadata only starts a full informer. ``ByObject`` options keyed by
  the kind apply to both representations, unless options are keyed by its metadata-only form
  (``by_object={Secret: ByObject(labels=...), PartialObjectMetadata.of(Secret): ByObject()}``):
  then those apply to the metadata representation. So an operator can cache in full only the
  Secrets carrying its label and still watch the metadata of all the others (least privilege:
  no value of a Secret it does not own is ever held); controller-runtime keys ``ByObject`` by
  GVK only, so it cannot give the two representations different selectors;
- ``get``/``list`` answer from memory after the kind's informer synced; they raise
  :class:`~pyctrl.client.errors.CacheNotStarted` before ``start()`` and
  :class:`~pyctrl.client.errors.CacheSyncTimeout` when the informer cannot sync within
  ``sync_timeout``; an unknown kind fails at once with ``UnknownKind``;
- a caller can never corrupt the cache: every read decodes fresh objects from stored bytes;
- ``list`` filters by namespace, label selector and field selector; a field other than
  ``metadata.name``/``metadata.namespace`` must have an index (:meth:`Cache.index_field`),
  else :class:`~pyctrl.client.errors.FieldNotIndexed`; only exact matches (``=``) are supported,
  as in controller-runtime; ``limit`` truncates, ``continue_`` is not supported;
- :meth:`Cache.stop` stops every informer and handler task;
- :meth:`Cache.unsynced` names every informer not synced yet and why: the last list or watch
  error (e.g. ``Forbidden`` when RBAC denies the list), so a readiness check can say it;
- a frozen watch (a half-open connection: neither ends nor delivers) is replaced within
  ``watch_stall_timeout`` seconds (default 30) of its opening, from its last resourceVersion, for
  full and metadata-only informers alike (:mod:`pyctrl.cache.watcher`: every watch asks the
  apiserver to end it a grace before that, so a healthy one costs a re-watch every 20-25 s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, TypeVar

from pyctrl.cache.informer import Informer, Registration, ResourceEventHandler, decoder_for
from pyctrl.cache.reflector import Transform, strip_managed_fields
from pyctrl.cache.store import Key
from pyctrl.cache.watcher import DEFAULT_STALL_TIMEOUT, MIN_STALL_TIMEOUT
from pyctrl.client.errors import (
    CacheError,
    CacheNotStarted,
    CacheSyncTimeout,
    FieldNotIndexed,
    NotFound,
    failure_status,
)
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.interfaces import ObjectList, ReaderBase
from pyctrl.client.objects import KubeObject, is_metadata_only
from pyctrl.client.options import GetOptions, ListOptions
from pyctrl.client.restmapper import RESTMapping
from pyctrl.client.scheme import Kind, kind_gvk
from pyctrl.client.selectors import FieldSelector
from pyctrl.client.watch import ListerWatcher

__all__ = ["ByObject", "Cache", "CacheOptions", "Informers", "KindInformer", "ListWatchSource"]

T = TypeVar("T", bound=KubeObject)
_DEFAULT: Any = object()


class ListWatchSource(Protocol):
    """Where informers get their data: ``ApiClient`` or ``FakeClient``."""

    async def mapping(self, kind: Kind) -> RESTMapping: ...

    async def list_watcher(self, kind: Kind, options: ListOptions) -> ListerWatcher: ...


@dataclass(frozen=True)
class ByObject:
    """Per-kind cache options (controller-runtime ``cache.ByObject``)."""

    namespaces: Sequence[str] | None = None
    labels: Mapping[str, str] | None = None
    label_selector: str | None = None
    fields: Mapping[str, str] | None = None
    field_selector: str | None = None
    #: Rewrites raw objects before caching; default: the cache's ``default_transform``.
    transform: Transform | None = _DEFAULT


class KindInformer:
    """The informer(s) of one kind: one per cached namespace, or one for all namespaces."""

    def __init__(self, kind: Kind, informers: dict[str | None, Informer], namespaced: bool) -> None:
        self.kind = kind
        self.informers = informers
        self.namespaced = namespaced

    def add_event_handler(self, handler: ResourceEventHandler) -> list[Registration]:
        """Register ``handler`` on every underlying informer; returns the registrations."""
        return [i.add_event_handler(handler, kind=self.kind) for i in self.informers.values()]

    async def remove_event_handler(self, registrations: list[Registration]) -> None:
        for informer in self.informers.values():
            for reg in registrations:
                await informer.remove_event_handler(reg)

    def has_synced(self) -> bool:
        return all(i.has_synced() for i in self.informers.values())

    async def wait_for_sync(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109 (controller-runtime API)
        results = await asyncio.gather(*(i.wait_for_sync(timeout) for i in self.informers.values()))
        return all(results)

    def _for_namespace(self, namespace: str | None) -> list[Informer]:
        if None in self.informers or not self.namespaced:
            return list(self.informers.values())
        if namespace is None:
            return list(self.informers.values())
        if namespace not in self.informers:
            cached = ", ".join(sorted(str(n) for n in self.informers))
            raise CacheError(
                f"namespace {namespace!r} is not cached for {kind_gvk(self.kind).kind} (cached: {cached})"
            )
        return [self.informers[namespace]]


class Informers(Protocol):
    """controller-runtime ``cache.Informers``: what a ``source.Kind`` needs of a cache."""

    async def mapping(self, kind: Kind) -> RESTMapping: ...

    async def get_informer(self, kind: Kind) -> KindInformer: ...


class CacheOptions(TypedDict, total=False):
    """controller-runtime ``cache.Options``: the keywords of :class:`Cache` (see its defaults),
    as ``Manager(cache_options=...)`` takes them."""

    by_object: Mapping[Kind, ByObject] | None
    default_namespaces: Sequence[str] | None
    default_transform: Transform | None
    #: controller-runtime ``SyncPeriod``: redeliver every cached object this often (None: never).
    resync_period: float | None
    watch_list: bool
    page_size: int
    sync_timeout: float | None
    #: A watch neither ended nor delivered this long after it was opened is frozen: replaced (>= 3).
    watch_stall_timeout: float


class Cache(ReaderBase):
    """controller-runtime's informer cache (see the module docstring)."""

    def __init__(
        self,
        source: ListWatchSource,
        *,
        by_object: Mapping[Kind, ByObject] | None = None,
        default_namespaces: Sequence[str] | None = None,
        default_transform: Transform | None = strip_managed_fields,
        resync_period: float | None = None,
        watch_list: bool = True,
        page_size: int = 500,
        sync_timeout: float | None = 120.0,
        watch_stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    ) -> None:
        if not watch_stall_timeout >= MIN_STALL_TIMEOUT:
            raise ValueError(
                f"watch_stall_timeout must be at least {MIN_STALL_TIMEOUT:g} s, got {watch_stall_timeout}"
            )
        self._source = source
        # (kind, metadata only?) -> options; a kind's own entry stands for both representations
        self._by_object: dict[tuple[GroupVersionKind, bool], ByObject] = {}
        for k, v in (by_object or {}).items():
            if not is_metadata_only(k):
                self._by_object[(kind_gvk(k), False)] = v
                self._by_object.setdefault((kind_gvk(k), True), v)
        for k, v in (by_object or {}).items():
            if is_metadata_only(k):
                self._by_object[(kind_gvk(k), True)] = v
        self._default_namespaces = default_namespaces
        self._default_transform = default_transform
        self._resync_period = resync_period
        self._watch_list = watch_list
        self._page_size = page_size
        self._sync_timeout = sync_timeout
        self._watch_stall_timeout = watch_stall_timeout
        # (kind, metadata only?) -> its informers: one per kind and representation.
        self._kinds: dict[tuple[GroupVersionKind, bool], KindInformer] = {}
        # kind -> (namespaced?, its informers by namespace, its decoder): filled by the first read
        # of a kind, so the next gets find the store in one dict lookup (a reconcile reads its
        # object from here every time)
        self._readers: dict[Kind, tuple[bool, dict[str | None, Informer], Callable[[bytes], Any]]] = {}
        self._lock = asyncio.Lock()
        self._started = False

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> Cache:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def started(self) -> bool:
        return self._started

    async def start(self) -> None:
        """Start every informer created so far; later ones start on creation."""
        self._started = True
        for ki in self._kinds.values():
            for informer in ki.informers.values():
                informer.start()

    async def stop(self) -> None:
        self._started = False
        for ki in self._kinds.values():
            for informer in ki.informers.values():
                await informer.stop()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109 (controller-runtime API)
        """Wait until every informer created so far has synced; ``False`` on timeout."""
        if not self._started:
            raise CacheNotStarted("wait_for_cache_sync before Cache.start()")
        results = await asyncio.gather(*(ki.wait_for_sync(timeout) for ki in self._kinds.values()))
        return all(results)

    def unsynced(self) -> list[str]:
        """One line per informer not synced yet: ``informer for <Kind>[ in <namespace>]: `` and
        its last list/watch error (``<ErrorClass>: <message>``), or ``not listed yet``."""
        lines = []
        for ki in self._kinds.values():
            for namespace, informer in ki.informers.items():
                if informer.has_synced():
                    continue
                where = f" in {namespace}" if namespace else ""
                exc = informer.last_error
                why = f"{type(exc).__name__}: {exc}" if exc is not None else "not listed yet"
                lines.append(f"informer for {informer.name}{where}: {why}")
        return lines

    # -- informers ------------------------------------------------------------------------------
    async def mapping(self, kind: Kind) -> RESTMapping:
        """The REST mapping of ``kind`` (resource and scope), from the cache's source."""
        return await self._source.mapping(kind)

    async def get_informer(self, kind: Kind) -> KindInformer:
        """The informer(s) of ``kind``, created (and started if the cache runs) on first use."""
        key = (kind_gvk(kind), is_metadata_only(kind))
        existing = self._kinds.get(key)
        if existing is not None:
            return KindInformer(kind, existing.informers, existing.namespaced)
        async with self._lock:
            if key not in self._kinds:
                self._kinds[key] = await self._create(kind)
            ki = self._kinds[key]
        return KindInformer(kind, ki.informers, ki.namespaced)

    async def _create(self, kind: Kind) -> KindInformer:
        opts = self._by_object.get((kind_gvk(kind), is_metadata_only(kind)), ByObject())
        mapping = await self._source.mapping(kind)
        namespaces = opts.namespaces if opts.namespaces is not None else self._default_namespaces
        scopes: list[str | None] = list(namespaces) if namespaces and mapping.namespaced else [None]
        transform = self._default_transform if opts.transform is _DEFAULT else opts.transform
        informers: dict[str | None, Informer] = {}
        for ns in scopes:
            list_opts = ListOptions.build(
                namespace=ns,
                labels=opts.labels,
                label_selector=opts.label_selector,
                fields=opts.fields,
                field_selector=opts.field_selector,
            )
            lw = await self._source.list_watcher(kind, list_opts)
            informer = Informer(
                lw,
                kind,
                transform=transform,
                watch_list=self._watch_list,
                page_size=self._page_size,
                resync_period=self._resync_period,
                watch_stall_timeout=self._watch_stall_timeout,
            )
            informers[ns] = informer
            if self._started:
                informer.start()
        return KindInformer(kind, informers, mapping.namespaced)

    async def index_field(self, kind: Kind, field: str, fn: Callable[[Any], list[str]]) -> None:
        """Index ``kind`` by ``fn(obj)`` so ``list(kind, fields={field: value})`` works from memory."""
        if field in ("metadata.name", "metadata.namespace"):
            raise ValueError(f"{field} is indexed already")
        ki = await self.get_informer(kind)
        for informer in ki.informers.values():
            informer.add_index(field, fn)

    async def _synced_informers(
        self, kind: Kind, namespace: str | None
    ) -> tuple[KindInformer, list[Informer]]:
        if not self._started:
            raise CacheNotStarted(f"cannot read {kind_gvk(kind).kind}: the cache is not started")
        ki = await self.get_informer(kind)
        informers = ki._for_namespace(namespace)
        for informer in informers:
            if not await informer.wait_for_sync(self._sync_timeout):
                raise CacheSyncTimeout(
                    f"informer for {kind_gvk(kind)} did not sync within {self._sync_timeout} s"
                )
        return ki, informers

    # -- Reader ---------------------------------------------------------------------------------
    async def _get(self, kind: Kind, name: str, opts: GetOptions) -> Any:
        namespace = opts.namespace
        reader = self._readers.get(kind) if self._started else None
        if reader is not None:  # a kind read before: its informer, if synced, answers at once
            namespaced, by_namespace, decode = reader
            informer = by_namespace.get(None) or by_namespace.get(namespace)
            if informer is not None and informer.has_synced() and (namespace or not namespaced):
                data = informer.store.get(namespace or "", name)
                if data is not None:
                    return decode(data)
        ki, informers = await self._synced_informers(kind, namespace)
        if ki.namespaced and not namespace:
            raise ValueError(f"{kind_gvk(kind).kind} is namespaced: a namespace is required")
        self._readers[kind] = (ki.namespaced, ki.informers, decoder_for(kind))
        for informer in informers:
            data = informer.store.get(namespace or "", name)
            if data is not None:
                return decoder_for(kind)(data)
        plural = kind_gvk(kind).kind.lower()
        raise NotFound(failure_status("NotFound", 404, f'{plural} "{name}" not found'))

    async def _list(self, kind: Kind, opts: ListOptions) -> ObjectList[Any]:
        if opts.continue_:
            raise ValueError("the cache does not page: continue_ is not supported (use limit only)")
        _, informers = await self._synced_informers(kind, opts.namespace)
        found: list[bytes] = []
        for informer in informers:
            keys = _field_keys(informer, opts.namespace, opts.field_selector)
            if keys is None:
                found.extend(informer.store.list(namespace=opts.namespace, selector=opts.label_selector))
            else:
                found.extend(informer.store.get_many(keys, opts.label_selector))
        if opts.limit:
            found = found[: opts.limit]
        rv = informers[0].reflector.last_sync_resource_version if len(informers) == 1 else ""
        decode = decoder_for(kind)
        return ObjectList([decode(data) for data in found], rv)


def _field_keys(informer: Informer, namespace: str | None, selector: FieldSelector) -> set[Key] | None:
    """Keys matching every field clause via indexes; ``None`` when there is no field clause."""
    if not selector:
        return None
    keys: set[Key] | None = None
    store = informer.store
    for field, op, value in selector.clauses:
        if op != "=":
            raise FieldNotIndexed(f"the cache supports only exact field matches, not {field}{op}{value}")
        if field == "metadata.namespace":
            match = {k for k in store.all_keys() if k[0] == value}
        elif field == "metadata.name":
            match = {k for k in store.all_keys() if k[1] == value}
        elif store.has_index(field):
            match = store.lookup(field, value)
        else:
            raise FieldNotIndexed(
                f"field {field!r} is not indexed for {informer.name}: call cache.index_field first"
            )
        keys = match if keys is None else keys & match
    assert keys is not None
    if namespace is not None:
        keys = {k for k in keys if k[0] == namespace}
    return keys
