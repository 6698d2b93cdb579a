"""The sharded coordinator: a controller's objects spread over manager replicas, each object
reconciled by one replica at a time.

controller-runtime has no sharding: past one process, its users run standbys behind leader
election. This module is the missing piece (multicluster-runtime's sharded coordinator does the
same for whole clusters; kubernetes-controller-sharding does it for objects with an external
sharder). Its parts:

- **Membership** (:mod:`pyctrl.sharding.membership`): each replica (*member*) holds a Lease of its
  own labelled with the ring's name, renewed by the leader-election code; every member lists the
  ring's Leases each ``retry_period`` and keeps the set of live members, judged on its own clock.
- **Placement** (:mod:`pyctrl.sharding.hashing`): rendezvous hashing of ``namespace/name`` over
  the live members gives each object a *desired* owner; a membership change moves only the objects
  that must move.
- **Fencing**: the object carries an *ownership annotation* ``shard.pyctrl.io/<controller>:
  <member identity>``. A member reconciles an object only while the object is in its *held* set,
  and an object enters the held set only after a **claim**: a merge patch setting the annotation
  to the member's identity *with the object's resourceVersion as a precondition*. A claim is tried
  only when the member is the desired owner and the annotation is empty, names the member itself,
  or names a member that :meth:`~pyctrl.sharding.membership.Peers.is_gone`. A member that stops
  being the desired owner **releases**: it drops the object from its held set, waits for the
  in-flight reconcile of it to finish, then clears the annotation (again with a resourceVersion
  precondition). Until the release is written the new desired owner waits (polling every
  ``retry_period`` and woken by the annotation's change).

Why no object is ever reconciled by two members at once. Suppose members A and B both hold X.
Each entered its held set through a successful claim; the apiserver orders writes to X by
resourceVersion, and each claim was conditional on the latest version, so the later claim (say
B's) read the version written by A's claim or after it. B's claim was allowed only if the
annotation it read was (a) empty: then A's release was written after A's claim, and A writes it
only after dropping X from its held set and seeing its last reconcile of X finish — A no longer
holds X; or (b) A's identity with A *gone*: A's Lease released (written after A's controllers
stopped) or unchanged for its lease duration on B's clock — by the leader-election argument A
then stopped reconciling ``renew_deadline`` after its last successful renewal started, which is
before B could observe the Lease unchanged for ``lease_duration``; a member that loses its Lease
fences itself at once (held sets cleared, in-flight reconciles cancelled) and the manager stops.
Both cases contradict A holding X. Identities are unique per process (``hostname_uuid``), so a
restarted member never inherits its predecessor's annotation. Membership views may disagree for
a while (two members may both *desire* X); the annotation, not the view, decides who acts.

Liveness: a dead member's objects are claimed once its Lease is seen unchanged for
``lease_duration`` (within ``lease_duration + retry_period`` of its last renewal, plus the claim);
a clean shutdown releases the member Lease (empty holder) so its objects move within one
``retry_period``. Cost: one annotation write per object per change of owner; no write while
membership is stable.

Background work: a reconciler often starts work that outlives a reconcile (a health prober, a
data migration). :meth:`ShardedReconciler.on_release` registers a hook called with the object's
``Request`` whenever the object leaves the member's held set -- handed over (after its in-flight
reconcile ended, before the annotation is cleared), deleted (after the reconcile that found it
gone from the cache), or fenced -- so that work stops
before another member may act on the object.

What the member filters: the ``for_`` kind's events pass the :meth:`ShardedReconciler.predicate`
only for objects the member desires or holds; events of owned kinds map to their owner and are
stopped by the held-set check in :meth:`ShardedReconciler.reconcile` (a request not held returns
at once without calling the reconciler). Every member still caches every object of the kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Gauge

from pyctrl import _access
from pyctrl.cache import Cache
from pyctrl.client.errors import Conflict, KubernetesError, NotFound
from pyctrl.client.interfaces import Client
from pyctrl.client.objects import Lease
from pyctrl.client.patch import PatchType, RawPatch
from pyctrl.client.scheme import Kind as KindType
from pyctrl.client.scheme import kind_gvk
from pyctrl.event import Event, GenericEvent, UpdateEvent, event_key, event_object
from pyctrl.handler import enqueue_request_for_object
from pyctrl.leaderelection import LeaderElectionConfig, LeaderElectionLost, LeaderElector, default_identity
from pyctrl.log import get_logger
from pyctrl.metrics import registry
from pyctrl.predicate import Funcs, Predicate, PredicateLike, as_predicate, passes
from pyctrl.reconcile import Reconciler, Request, Result
from pyctrl.sharding.hashing import object_key, rendezvous_owner
from pyctrl.sharding.membership import RING_LABEL, Peers, member_lease_name
from pyctrl.source import Channel, Kind, Source
from pyctrl.workqueue import Clock, RealClock

__all__ = [
    "OWNER_ANNOTATION_PREFIX",
    "ShardCoordinator",
    "ShardFenced",
    "ShardedReconciler",
    "ShardingOptions",
]

#: ``shard.pyctrl.io/<controller>``: the member identity that holds an object for that controller.
OWNER_ANNOTATION_PREFIX = "shard.pyctrl.io/"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

_members = Gauge(
    "pyctrl_sharding_members", "Live members of the ring seen by this member.", ("ring",), registry=registry
)
_identity = Gauge(
    "pyctrl_sharding_identity",
    "1 while this process is a member of the ring under that identity (the ownership annotation's value).",
    ("ring", "identity"),
    registry=registry,
)
_held = Gauge(
    "pyctrl_sharding_held_objects",
    "Objects this member holds (may reconcile).",
    ("controller",),
    registry=registry,
)


class ShardFenced(RuntimeError):
    """A reconcile was cancelled because this member lost its membership Lease."""


@dataclass(frozen=True)
class ShardingOptions:
    """A ring of managers sharing the ``for_`` objects of their controllers.

    ``ring`` names the ring (a DNS label of at most 40 characters; every replica of one operator
    uses the same); the member Leases live in ``namespace`` (default: the pod's namespace, else
    ``default``). Timings have leader election's meaning and constraints (15/10/2 s by default).
    """

    ring: str
    namespace: str | None = None
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if len(self.ring) > 40 or not _NAME.match(self.ring):
            raise ValueError(
                f"sharding ring {self.ring!r}: must be a DNS label (a-z, 0-9, '-') of at most 40 chars"
            )
        self.lease_config("checked")  # the leader-election constraints on the timings

    def lease_config(self, namespace: str) -> LeaderElectionConfig:
        return LeaderElectionConfig(
            name=member_lease_name(self.ring, self.identity),
            namespace=namespace,
            identity=self.identity,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            release_on_cancel=True,
            labels={RING_LABEL: self.ring},
        )


class ShardCoordinator:
    """One member of a ring: holds its member Lease, watches the others, and owns the
    :class:`ShardedReconciler` of each sharded controller. A manager runnable (not leader-elected)."""

    needs_leader_election = False

    def __init__(
        self,
        client: Client,
        cache: Cache,
        options: ShardingOptions,
        namespace: str,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        self.options = options
        self.namespace = namespace
        self.clock: Clock = clock if clock is not None else RealClock()
        self.identity = options.identity
        self.peers = Peers(options.ring, self.clock, options.lease_duration)
        self.members: frozenset[str] = frozenset()
        self.ready = asyncio.Event()  # our Lease is held and the ring has been listed
        self.gates: list[ShardedReconciler] = []
        self.log = get_logger("pyctrl.sharding", ring=options.ring, identity=options.identity)
        self._members_gauge = _members.labels(options.ring)
        self._tasks: set[asyncio.Task[None]] = set()

    def owner_of(self, namespace: str | None, name: str) -> str | None:
        """The desired owner of an object in the current view (None before the first view)."""
        return rendezvous_owner(object_key(namespace, name), self.members)

    def shard(self, controller: str, kind: KindType, reconciler: Reconciler) -> ShardedReconciler:
        """Wrap ``reconciler`` of ``controller`` (whose ``for_`` kind is ``kind``) in the fence."""
        if not _NAME.match(controller) or len(controller) > 63:
            raise ValueError(
                f"sharded controller {controller!r}: its name is part of an annotation key "
                "(a-z, 0-9, '-', at most 63 characters)"
            )
        gate = ShardedReconciler(self, controller, kind, reconciler)
        self.gates.append(gate)
        return gate

    def gate(self, controller: str) -> ShardedReconciler:
        """The fence of ``controller`` (built by ``ControllerBuilder.complete``); ``KeyError`` if none."""
        for gate in self.gates:
            if gate.controller == controller:
                return gate
        raise KeyError(f"no sharded controller {controller!r} in ring {self.options.ring!r}")

    async def readyz(self) -> None:
        if not self.ready.is_set():
            raise RuntimeError(f"sharding: not a member of ring {self.options.ring!r} yet")

    # -- running ------------------------------------------------------------------------------
    async def start(self, stop: asyncio.Event) -> None:
        """Hold our Lease, refresh the view every retry period until ``stop``; raise
        ``LeaderElectionLost`` (after fencing) when our Lease could not be renewed."""
        elector = LeaderElector(self.client, self.options.lease_config(self.namespace), clock=self.clock)
        member_stop = asyncio.Event()
        run = asyncio.create_task(elector.run(member_stop), name="pyctrl-sharding-lease")
        run.add_done_callback(lambda _: self.fence())
        stopped = asyncio.create_task(stop.wait())
        elected = asyncio.create_task(elector.elected.wait())
        try:
            await asyncio.wait([elected, run, stopped], return_when="FIRST_COMPLETED")
            while elector.is_leader() and not stop.is_set():
                await self._refresh()
                await asyncio.wait([run, stopped], timeout=self.options.retry_period)
        finally:
            stopped.cancel()
            elected.cancel()
            self.fence()
            for gate in self.gates:  # clean stop: controllers stopped already; wait for stragglers
                await gate.drain()
            member_stop.set()  # releases our Lease: peers may claim our objects at once
            await asyncio.wait([run])
            for task in list(self._tasks):
                task.cancel()
        if not stop.is_set():
            run.result()  # LeaderElectionLost
            raise LeaderElectionLost(f"sharding ring {self.options.ring!r}: membership ended")

    def fence(self) -> None:
        """Stop acting at once: no object held, in-flight reconciles cancelled."""
        self.ready.clear()
        _identity.labels(self.options.ring, self.identity).set(0)
        for gate in self.gates:
            gate.fence()

    async def _refresh(self) -> None:
        try:
            leases = await self.client.list(
                Lease, namespace=self.namespace, labels={RING_LABEL: self.options.ring}
            )
        except KubernetesError as exc:
            self.log.info("Listing the ring's Leases failed", error=str(exc))
            return
        self.peers.observe(leases.items)
        members = self.peers.live() | {self.identity}
        if members != self.members or not self.ready.is_set():
            if members != self.members:
                self.log.info("Ring membership changed", members=sorted(members))
            self.members = members
            self._members_gauge.set(len(members))
            _identity.labels(self.options.ring, self.identity).set(1)
            self.ready.set()
            for gate in self.gates:
                self._spawn(gate.rebalance())
        for lease in self.peers.garbage(3 * self.options.lease_duration):
            self._spawn(self._delete(lease))

    async def _delete(self, lease: Lease) -> None:
        with contextlib.suppress(KubernetesError):
            from pyctrl.client.options import Preconditions

            rv = lease.metadata.resource_version
            await self.client.delete(lease, preconditions=Preconditions(resource_version=rv))
            self.log.info("Deleted the Lease of a departed member", lease=lease.metadata.name)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("Sharding task failed", exc_info=task.exception())


class ShardedReconciler:
    """A controller's reconciler behind the fence; also its extra sources and its predicate."""

    def __init__(
        self, coordinator: ShardCoordinator, controller: str, kind: KindType, inner: Reconciler
    ) -> None:
        self.coordinator = coordinator
        self.controller = controller
        self.kind = kind
        self.inner = inner
        self.annotation = OWNER_ANNOTATION_PREFIX + controller
        self.held: set[tuple[str, str]] = set()
        self.in_flight: dict[tuple[str, str], asyncio.Task[Any]] = {}
        self.events: asyncio.Queue[GenericEvent] = asyncio.Queue()
        self.release_hooks: list[Callable[[Request], None]] = []
        self.log = coordinator.log.with_values(controller=controller)
        self._gauge = _held.labels(controller)

    # -- what the builder wires ---------------------------------------------------------------
    def predicate(self) -> Predicate:
        """Events of objects this member desires or holds (everything else is another's)."""

        def mine(event: Event) -> bool:
            c = self.coordinator
            ns, name = event_key(event)
            return c.ready.is_set() and (c.owner_of(ns, name) == c.identity or (ns, name) in self.held)

        return as_predicate(mine)

    def sources(self, predicates: Sequence[PredicateLike] = ()) -> list[Source]:
        """The member's own sources: objects re-enqueued on membership changes, and objects
        whose ownership annotation changed (a release we wait for) when we desire them. Both
        deliver only objects that ``predicates`` (the controller's own for its ``for_`` kind)
        pass as a ``GenericEvent``, so an object the controller filters out (a label selector)
        is never claimed."""
        ps = [as_predicate(p) for p in predicates]

        def selected(obj: Any) -> bool:
            return all(passes(p, GenericEvent(obj)) for p in ps)

        def released(event: UpdateEvent) -> bool:
            old = _access.annotations(event.object_old).get(self.annotation)
            new = _access.annotations(event.object_new).get(self.annotation)
            ns, name = event_key(event)
            mine = self.coordinator.owner_of(ns, name) == self.coordinator.identity
            return old != new and mine and selected(event.object_new)

        never = Funcs(lambda _: False, released, lambda _: False, lambda _: False)
        return [
            Channel(self.events, enqueue_request_for_object(), [lambda e: selected(event_object(e))]),
            Kind(self.coordinator.cache, self.kind, enqueue_request_for_object(), [never]),
        ]

    def on_release(self, hook: Callable[[Request], None]) -> None:
        """Call ``hook(request)`` each time an object leaves this member's held set: handed over
        (after its in-flight reconcile ended, before the ownership annotation is cleared), deleted,
        or every held object when the member is fenced. The place to stop background work the
        reconciler started for the object; a failing hook is logged, never stops the others."""
        self.release_hooks.append(hook)

    def _dropped(self, keys: Iterable[tuple[str, str]]) -> None:
        for ns, name in keys:
            for hook in self.release_hooks:
                try:
                    hook(Request(ns, name))
                except Exception:
                    self.log.error("A release hook failed", object=f"{ns}/{name}", exc_info=True)

    # -- the fence ----------------------------------------------------------------------------
    async def reconcile(self, request: Request) -> Result:
        c, key = self.coordinator, (request.namespace or "", request.name)
        if not c.ready.is_set():
            return Result()  # re-enqueued by the first rebalance
        if c.owner_of(*key) != c.identity:
            if key in self.held:
                await self.release(key)
            return Result()
        if key not in self.held:
            claimed = await self._claim(key)
            if claimed is None:
                return Result()  # not in the cache (deleted): its next creation enqueues it
            if not claimed:
                return Result(requeue_after=c.options.retry_period)
            if c.owner_of(*key) != c.identity or not c.ready.is_set():  # the view moved meanwhile
                await self.release(key)
                return Result()
            self.held.add(key)
            self._gauge.set(len(self.held))
        try:
            return await self._run(key, request)
        finally:
            if key in self.held and await self._cached(key) is None:  # deleted: nothing left to hold
                self.held.discard(key)
                self._gauge.set(len(self.held))
                self._dropped([key])

    async def _cached(self, key: tuple[str, str]) -> Any:
        try:
            return await self.coordinator.cache.get(self.kind, key[1], namespace=key[0] or None)
        except NotFound:
            return None

    async def _claim(self, key: tuple[str, str]) -> bool | None:
        """Write our identity into the annotation if allowed (see the module docstring); False to
        wait for the current owner, None when the object is not in the cache. ``Conflict`` (a
        stale read) propagates: requeued with backoff."""
        c = self.coordinator
        obj = await self._cached(key)
        if obj is None:
            return None
        owner = _access.annotations(obj).get(self.annotation)
        if owner and owner != c.identity and not c.peers.is_gone(owner):
            return False
        rv = _access.resource_version(obj)
        patch = {"metadata": {"resourceVersion": rv, "annotations": {self.annotation: c.identity}}}
        await c.client.patch(obj, RawPatch(PatchType.MERGE, patch))
        if owner and owner != c.identity:
            self.log.info("Took over an object of a departed member", object="/".join(key), previous=owner)
        return True

    async def _run(self, key: tuple[str, str], request: Request) -> Result:
        task = asyncio.ensure_future(self.inner.reconcile(request))
        self.in_flight[key] = task
        try:
            await asyncio.wait([task])
        except BaseException:
            task.cancel()
            raise
        finally:
            if self.in_flight.get(key) is task:
                del self.in_flight[key]
        if task.cancelled():
            raise ShardFenced(f"{'/'.join(key)}: membership lost during the reconcile")
        result: Result = task.result()
        return result

    async def release(self, key: tuple[str, str]) -> None:
        """Stop acting on ``key``, wait for its reconcile to end, then clear the annotation."""
        c = self.coordinator
        self.held.discard(key)
        self._gauge.set(len(self.held))
        task = self.in_flight.get(key)
        if task is not None and task is not asyncio.current_task():
            await asyncio.wait([task])
        if key not in self.held:
            self._dropped([key])
        while key not in self.held and c.ready.is_set():
            try:
                obj = await c.client.get(self.kind, key[1], namespace=key[0] or None)
                if _access.annotations(obj).get(self.annotation) != c.identity:
                    return
                rv = _access.resource_version(obj)
                patch = {"metadata": {"resourceVersion": rv, "annotations": {self.annotation: None}}}
                await c.client.patch(obj, RawPatch(PatchType.MERGE, patch))
                self.log.info("Released an object to its new owner", object="/".join(key))
                return
            except NotFound:
                return
            except Conflict:
                continue
            except KubernetesError as exc:
                self.log.info("Releasing failed; retrying", object="/".join(key), error=str(exc))
                await asyncio.sleep(c.options.retry_period)

    async def rebalance(self) -> None:
        """After a membership change: enqueue objects we now desire, release those we do not."""
        c = self.coordinator
        objects = await c.cache.list(self.kind)
        present = set()
        releases = []
        for obj in objects.items:
            key = (_access.namespace(obj), _access.name(obj))
            present.add(key)
            if c.owner_of(*key) == c.identity:
                if key not in self.held:
                    self.events.put_nowait(GenericEvent(obj))
            elif key in self.held:
                releases.append(self.release(key))
        self._dropped(self.held - present)  # deleted objects
        self.held &= present
        self._gauge.set(len(self.held))
        if releases:
            self.log.info("Handing objects over", count=len(releases), kind=kind_gvk(self.kind).kind)
            await asyncio.gather(*releases)

    def fence(self) -> None:
        dropped, self.held = self.held, set()
        self._gauge.set(0)
        self._dropped(dropped)
        for task in self.in_flight.values():
            task.cancel()

    async def drain(self) -> None:
        if self.in_flight:
            await asyncio.wait(list(self.in_flight.values()))
