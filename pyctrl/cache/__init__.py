"""pyctrl's informer cache: watcher → reflector → store, informers and the cache.

Mirrors client-go ``tools/cache`` (reflector, store and indexers, shared informer) and
controller-runtime ``pkg/cache``. Modules, one concept each:

- ``watcher``   -- the list/watch state machine (relist on 410, re-watch, backoff, streaming list)
- ``reflector`` -- applies watcher events to the store, computes adds/updates/tombstones
- ``store``     -- objects as compact JSON bytes, namespace partition, label interning, indexes
- ``informer``  -- the shared informer: handlers, registrations, resync
- ``cache``     -- one informer per kind, lazily started; get/list from memory
"""

from pyctrl.cache.cache import ByObject, Cache, CacheOptions, Informers, KindInformer, ListWatchSource
from pyctrl.cache.informer import (
    DeletedFinalStateUnknown,
    HandlerFuncs,
    Informer,
    Registration,
    ResourceEventHandler,
)
from pyctrl.cache.reflector import Change, Reflector, Transform, strip_managed_fields
from pyctrl.cache.store import IndexFunc, Store
from pyctrl.cache.watcher import Backoff, Watcher, WatcherState
from pyctrl.client.errors import CacheError, CacheNotStarted, CacheSyncTimeout, FieldNotIndexed

__all__ = [
    "Backoff",
    "ByObject",
    "Cache",
    "CacheError",
    "CacheNotStarted",
    "CacheOptions",
    "CacheSyncTimeout",
    "Change",
    "DeletedFinalStateUnknown",
    "FieldNotIndexed",
    "HandlerFuncs",
    "IndexFunc",
    "Informer",
    "Informers",
    "KindInformer",
    "ListWatchSource",
    "Reflector",
    "Registration",
    "ResourceEventHandler",
    "Store",
    "Transform",
    "Watcher",
    "WatcherState",
    "strip_managed_fields",
]
