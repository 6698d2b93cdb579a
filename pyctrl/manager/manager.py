"""The manager: shared client, cache and servers; runnables started in a fixed order
(controller-runtime ``pkg/manager``).

Start order (REFERENCE "Manager start order"): HTTP servers (metrics, probes; bound before anything
else so a taken port fails fast) → the webhook server (when configured or ``webhook_server`` was
used) → caches (started, then waited for) → runnables that do not need leader election → warm-up
of leader-only runnables (with leader election and ``warm_standby``) → leader election →
leader-only runnables (controllers). Stop is the reverse,
within ``graceful_shutdown_timeout`` (30 s) in all; a runnable still running after it is cancelled.

Guarantees:
- ``start`` returns when ``stop`` is set (or SIGTERM/SIGINT arrive, when the manager installed the
  handlers) after a graceful shutdown, and raises when a runnable fails (the others are stopped);
- with leader election, leader-only runnables start only after the lease is acquired (``elected``
  is set then) and are cancelled at once when leadership is lost, after which ``start`` raises
  ``LeaderElectionLost`` (controller-runtime exits the process then; the operator's ``main`` does);
- the metrics server (controller-runtime ``metricsserver.Options``) serves plain HTTP unless
  ``metrics_secure_serving``: then HTTPS with ``metrics_cert_dir``'s ``tls.crt``/``tls.key`` or a
  self-signed certificate made at start, every request through ``metrics_filter_provider``'s
  filter (``pyctrl.manager.filters.with_authentication_and_authorization``: TokenReview, then
  SubjectAccessReview of ``get`` on ``/metrics``); a filter or a certificate directory without
  secure serving is refused (a bearer token must not cross plain HTTP);
- ``/readyz`` fails until the caches have synced, including informers created after start (by
  controllers' sources once elected), naming each informer not synced and its last list/watch
  error (``informer for Pod: Forbidden: ...``); ``/healthz`` has a ``ping`` check;
- the client reads from the cache and writes to the apiserver, except kinds in
  ``disable_cache_for`` (controller-runtime ``client.Options.Cache.DisableFor``), which it reads
  from the apiserver (no informer, no list/watch permission needed: a GET per read);
  ``api_reader`` reads uncached;
- warm standby (controller-runtime's warm replicas, ``EnableWarmup``; here ``warm_standby``, on
  by default): while waiting for the lease, every leader-only runnable that has ``warm_up(stop)``
  (controllers) runs it: the controllers' sources start, so their informers list and watch and
  requests queue up, and a new leader's first reconcile needs no list. It is on by default
  because it is safe: a source only reads (list/watch into the cache, requests into the
  controller's own queue); workers, probers and every other leader-only runnable still start
  only once elected, so a standby never reconciles or writes. Its cost is a standby's cache (memory,
  one watch per kind on the apiserver); ``warm_standby=False`` starts sources only after winning.
- sharding (no controller-runtime counterpart; :mod:`pyctrl.sharding`): with
  ``sharding=ShardingOptions(ring=...)`` the manager is a member of a ring of replicas; its
  ``shard_coordinator`` runs with the runnables that need no leader election (so it stops after the
  controllers, then releases its member Lease), ``/readyz`` fails until it is a member, and every
  controller built on the manager reconciles only the ``for_`` objects this member holds. When the
  member Lease cannot be renewed the member fences itself at once and ``start`` raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pyctrl.cache import Cache, CacheOptions, Informers
from pyctrl.client import ApiClient, Config
from pyctrl.client.scheme import Kind, Scheme, default_scheme
from pyctrl.client.split import SplitClient
from pyctrl.healthz import Checker, ping
from pyctrl.log import get_logger
from pyctrl.manager._certs import serving_context
from pyctrl.manager.servers import HTTPServer, health_app, metrics_app, parse_bind_address
from pyctrl.recorder import EventBroadcaster, EventRecorder

if TYPE_CHECKING:  # at run time imported where used: a manager without them never loads them
    from pyctrl.leaderelection import LeaderElector
    from pyctrl.manager.filters import FilterProvider
    from pyctrl.sharding import ShardCoordinator, ShardingOptions
    from pyctrl.webhook import Server as WebhookServer

__all__ = ["Manager", "ManagerError", "ManagerProtocol", "Runnable", "WebhookHost"]


@runtime_checkable
class Runnable(Protocol):
    """controller-runtime ``manager.Runnable``: run until ``stop`` is set, then clean up and return.

    A runnable may define ``needs_leader_election`` (default True, as controller-runtime).
    """

    async def start(self, stop: asyncio.Event) -> None: ...


class WebhookHost(Protocol):
    """What ``WebhookBuilder`` needs of a manager: its scheme and webhook server."""

    @property
    def scheme(self) -> Scheme: ...

    @property
    def webhook_server(self) -> WebhookServer: ...


class ManagerProtocol(WebhookHost, Protocol):
    """What ``ControllerBuilder`` needs of a manager (:class:`Manager` is one)."""

    @property
    def cache(self) -> Informers: ...

    def add(self, runnable: Runnable) -> None: ...

    def register_controller_name(self, name: str) -> None: ...


class ManagerError(RuntimeError):
    """The manager was misused or a runnable failed."""


def needs_leader_election(runnable: object) -> bool:
    return bool(getattr(runnable, "needs_leader_election", True))


class _CacheRunnable:
    needs_leader_election = False

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    async def start(self, stop: asyncio.Event) -> None:
        await self.cache.start()
        try:
            await stop.wait()
        finally:
            await self.cache.stop()


class _Group:
    """Runnables started together and stopped together."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runnables: list[Runnable] = []
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def start_all(self) -> None:
        for r in self.runnables[len(self.tasks) :]:
            self.tasks.append(
                asyncio.create_task(r.start(self.stop), name=f"pyctrl-{self.name}-{type(r).__name__}")
            )

    async def stop_all(self, deadline: float) -> None:
        self.stop.set()
        if not self.tasks:
            return
        loop = asyncio.get_running_loop()
        _, pending = await asyncio.wait(self.tasks, timeout=max(0.0, deadline - loop.time()))
        for t in pending:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


class Manager:
    """Shared dependencies and the lifecycle of controllers and other runnables."""

    def __init__(
        self,
        config: Config,
        *,
        scheme: Scheme = default_scheme,
        cache_options: CacheOptions | None = None,
        disable_cache_for: Sequence[Kind] = (),
        metrics_bind_address: str = ":8080",
        metrics_secure_serving: bool = False,
        metrics_filter_provider: FilterProvider | None = None,
        metrics_cert_dir: str | Path | None = None,
        health_probe_bind_address: str = ":8081",
        leader_election: bool = False,
        leader_election_id: str | None = None,
        leader_election_namespace: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        leader_election_release_on_cancel: bool = False,
        graceful_shutdown_timeout: float = 30.0,
        webhook_server: WebhookServer | None = None,
        warm_standby: bool = True,
        sharding: ShardingOptions | None = None,
    ) -> None:
        self.config = config
        self.scheme = scheme
        self.api_client = ApiClient(config, scheme=scheme)
        self.cache = Cache(self.api_client, **(cache_options or {}))
        self.client = SplitClient(self.cache, self.api_client, uncached=disable_cache_for)
        self.api_reader = self.client.api_reader
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.elected = asyncio.Event()
        self.log = get_logger("pyctrl.manager")
        self._metrics_address = parse_bind_address(metrics_bind_address)
        if not metrics_secure_serving and (metrics_filter_provider or metrics_cert_dir):
            raise ManagerError(
                "metrics_filter_provider and metrics_cert_dir need metrics_secure_serving=True "
                "(bearer tokens must not cross plain HTTP)"
            )
        self._metrics_secure = metrics_secure_serving
        self._metrics_filter_provider = metrics_filter_provider
        self._metrics_cert_dir = metrics_cert_dir
        self._probe_address = parse_bind_address(health_probe_bind_address)
        self.healthz_checks: dict[str, Checker] = {"ping": ping}
        self.readyz_checks: dict[str, Checker] = {"ping": ping, "cache-sync": self._cache_synced}
        self.controller_names: set[str] = set()
        self._caches_synced = False
        self._servers = _Group("servers")
        self._webhook_server = webhook_server
        self._webhooks = _Group("webhooks")
        self._caches = _Group("caches")
        self._others_group = _Group("runnables")
        self.warm_standby = warm_standby
        self._warmup_group = _Group("warmup")
        self._elector_group = _Group("leader-election")
        self._leader_group = _Group("leader-runnables")
        self._wake = asyncio.Event()
        self._started = False
        self._running = False
        self.broadcaster = EventBroadcaster(self.api_client)
        self.metrics_server: HTTPServer | None = None
        self.probe_server: HTTPServer | None = None
        self.elector: LeaderElector | None = None
        self.shard_coordinator: ShardCoordinator | None = None
        if sharding is not None:
            from pyctrl.sharding import ShardCoordinator

            self.shard_coordinator = ShardCoordinator(
                self.api_client,
                self.cache,
                sharding,
                namespace=sharding.namespace or _incluster_namespace() or "default",
            )
            self.add(self.shard_coordinator)
            self.readyz_checks["sharding"] = self.shard_coordinator.readyz
        if leader_election:
            if not leader_election_id:
                raise ManagerError("leader_election needs leader_election_id (the Lease name)")
            from pyctrl.leaderelection import LeaderElectionConfig, LeaderElector

            self.elector = LeaderElector(
                self.api_client,
                LeaderElectionConfig(
                    name=leader_election_id,
                    namespace=leader_election_namespace or _incluster_namespace() or "default",
                    lease_duration=lease_duration,
                    renew_deadline=renew_deadline,
                    retry_period=retry_period,
                    release_on_cancel=leader_election_release_on_cancel,
                ),
            )

    # -- registration -------------------------------------------------------------------------
    def add(self, runnable: object) -> None:
        """Add a runnable (``async start(stop)``); after start it is started at once."""
        if not isinstance(runnable, Runnable):
            raise ManagerError(f"not a runnable (needs 'async def start(self, stop)'): {runnable!r}")
        group = self._leader_group if needs_leader_election(runnable) else self._others_group
        group.runnables.append(runnable)
        if self._running and (group is self._others_group or self.elected.is_set()):
            group.start_all()
            self._wake.set()
        elif self._running and group is self._leader_group:
            self._warm_up([runnable])

    def add_healthz_check(self, name: str, check: Checker) -> None:
        self.healthz_checks[name] = check

    def add_readyz_check(self, name: str, check: Checker) -> None:
        self.readyz_checks[name] = check

    async def index_field(self, kind: Kind, field: str, fn: Callable[[Any], list[str]]) -> None:
        """controller-runtime ``FieldIndexer.IndexField``: list the cache by ``field`` values."""
        await self.cache.index_field(kind, field, fn)

    def get_event_recorder_for(self, name: str) -> EventRecorder:
        return self.broadcaster.new_recorder(name)

    def register_controller_name(self, name: str) -> None:
        if name in self.controller_names:
            raise ManagerError(f"a controller named {name!r} already exists; controller names must be unique")
        self.controller_names.add(name)

    async def _cache_synced(self) -> None:
        """Ready once the caches synced at start *and* every informer created since (by
        controllers' sources after election) has synced too."""
        if not self._caches_synced or not await self.cache.wait_for_cache_sync(timeout=0):
            problems = self.cache.unsynced()
            raise RuntimeError("caches not synced yet" + "".join(f"; {p}" for p in problems))

    @property
    def webhook_server(self) -> WebhookServer:
        """controller-runtime ``GetWebhookServer``: the one given, else a default one (:9443,
        certificates in the temp dir's ``k8s-webhook-server/serving-certs``) created now; either
        way it is started with the manager. Its readiness check is ``started_checker()``."""
        if self._webhook_server is None:
            if self._started:
                raise ManagerError("the webhook server must be set up before the manager starts")
            from pyctrl.webhook import Server as WebhookServer

            self._webhook_server = WebhookServer()
        return self._webhook_server

    @property
    def metrics_port(self) -> int | None:
        return self.metrics_server.port if self.metrics_server else None

    @property
    def probe_port(self) -> int | None:
        return self.probe_server.port if self.probe_server else None

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set (or SIGTERM/SIGINT when ``stop`` is None)."""
        if self._started:
            raise ManagerError("manager already started")
        self._started = True
        remove_handlers: Callable[[], None] = lambda: None  # noqa: E731
        if stop is None:
            stop, remove_handlers = self._install_signal_handlers()
        groups = [
            self._servers,
            self._webhooks,
            self._caches,
            self._others_group,
            self._warmup_group,
            self._elector_group,
            self._leader_group,
        ]
        try:
            await self._start_servers()
            if self._webhook_server is not None:
                await self._webhook_server.listen()
                self._webhooks.runnables.append(self._webhook_server)
                self._webhooks.start_all()
            self._caches.runnables.append(_CacheRunnable(self.cache))
            self._caches.start_all()
            await self._wait_caches()
            self._others_group.runnables.insert(0, self.broadcaster)
            self._others_group.start_all()
            self._running = True
            await self._run_until_stopped(stop, groups)
        finally:
            self._running = False
            try:
                await self._shutdown(groups)
            finally:
                remove_handlers()

    def _install_signal_handlers(self) -> tuple[asyncio.Event, Callable[[], None]]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            if stop.is_set():
                raise SystemExit(f"second signal {sig.name}: exiting at once")
            self.log.info("Received signal, stopping", signal=sig.name)
            stop.set()

        signals = (signal.SIGTERM, signal.SIGINT)
        for sig in signals:
            loop.add_signal_handler(sig, on_signal, sig)

        def remove() -> None:
            for sig in signals:
                loop.remove_signal_handler(sig)

        return stop, remove

    async def _start_servers(self) -> None:
        if self._metrics_address is not None:
            provider = self._metrics_filter_provider
            filters = [provider(self.api_client)] if provider is not None else []
            context = serving_context(self._metrics_cert_dir) if self._metrics_secure else None
            app = metrics_app(filters)
            self.metrics_server = HTTPServer("metrics", app, *self._metrics_address, ssl_context=context)
        if self._probe_address is not None:
            app = health_app(self.healthz_checks, self.readyz_checks)
            self.probe_server = HTTPServer("health probe", app, *self._probe_address)
        for server in (self.metrics_server, self.probe_server):
            if server is not None:
                await server.listen()
                https = server.ssl_context is not None
                self.log.info(
                    "Serving", server=server.name, address=f"{server.host}:{server.port}", https=https
                )
                self._servers.runnables.append(server)
        self._servers.start_all()

    async def _wait_caches(self) -> None:
        wait = asyncio.create_task(self.cache.wait_for_cache_sync())
        done, _ = await asyncio.wait([wait, *self._caches.tasks], return_when=asyncio.FIRST_COMPLETED)
        if wait not in done:
            wait.cancel()
            for t in self._caches.tasks:
                t.result()  # re-raise the cache's failure
            raise ManagerError("the cache stopped before syncing")
        if not wait.result():
            raise ManagerError("caches did not sync")
        self._caches_synced = True

    async def _run_until_stopped(self, stop: asyncio.Event, groups: list[_Group]) -> None:
        """Watch every runnable task until ``stop``; a failure or lost leadership raises."""
        stop_task = asyncio.create_task(stop.wait())
        leader_task = asyncio.create_task(self._become_leader())
        finished: set[asyncio.Task[Any]] = set()
        try:
            while not stop.is_set():
                self._wake.clear()
                wake_task = asyncio.create_task(self._wake.wait())
                watched = {stop_task, wake_task, *(t for g in groups for t in g.tasks if t not in finished)}
                if not leader_task.done():
                    watched.add(leader_task)
                done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
                wake_task.cancel()
                for task in done - {stop_task, wake_task}:
                    finished.add(task)
                    self._check_finished(task, stop)
        finally:
            stop_task.cancel()
            leader_task.cancel()

    def _check_finished(self, task: asyncio.Task[Any], stop: asyncio.Event) -> None:
        if task in self._elector_group.tasks:
            from pyctrl.leaderelection import LeaderElectionLost  # loaded with the elector

            self._leader_group.stop.set()
            for t in self._leader_group.tasks:
                t.cancel()  # at once, not gracefully: another candidate may take the lease soon
            task.result()  # raises LeaderElectionLost
            if not stop.is_set():
                raise LeaderElectionLost("leader election ended unexpectedly")
            return
        exc = task.exception()
        if exc is not None:
            raise ManagerError(f"{task.get_name()} failed: {exc}") from exc

    def _warm_up(self, runnables: list[Runnable]) -> None:
        """Start the warm-up of those ``runnables`` that have one (standby only; see the docstring)."""
        if self.elector is None or not self.warm_standby or self.elected.is_set():
            return
        self._warmup_group.runnables.extend(
            _RunnableFunc(r.warm_up) for r in runnables if hasattr(r, "warm_up")
        )
        self._warmup_group.start_all()
        self._wake.set()

    async def _become_leader(self) -> None:
        if self.elector is not None:
            self._warm_up(self._leader_group.runnables)
            self._elector_group.runnables.append(_RunnableFunc(self.elector.run))
            self._elector_group.start_all()
            self._wake.set()
            await self.elector.elected.wait()
            self.log.info("Elected leader", identity=self.elector.config.identity)
        self.elected.set()
        self._leader_group.start_all()
        self._wake.set()

    async def _shutdown(self, groups: list[_Group]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.graceful_shutdown_timeout
        for group in reversed(groups):
            await group.stop_all(deadline)
        with contextlib.suppress(Exception):
            await self.api_client.close()
        self.log.info("Stopped")


class _RunnableFunc:
    """A runnable that awaits ``func(stop)`` (controller-runtime ``manager.RunnableFunc``), started
    outside leader election: a standby's warm-up, the elector itself."""

    needs_leader_election = False

    def __init__(self, func: Callable[[asyncio.Event], Awaitable[None]]) -> None:
        self.func = func

    async def start(self, stop: asyncio.Event) -> None:
        await self.func(stop)


def _incluster_namespace() -> str | None:
    """The pod's namespace when running in a cluster (controller-runtime's default for the lease)."""
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            return f.read().strip() or None
    except OSError:
        return None
