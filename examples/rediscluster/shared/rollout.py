"""What both modes' rollouts share (StatefulSet ``updateStrategy: OnDelete``, the operator's order).

Mirrors the StatefulSet controller's ``RollingUpdate`` (``pkg/controller/statefulset``): a pod whose
``controller-revision-hash`` label differs from ``status.updateRevision`` is outdated, and a restart
is a deletion the StatefulSet controller answers with a pod from the new template. Each mode decides
its own order (``replication.rollout``, ``cluster.rollout``); this module holds the vocabulary
(:class:`Restart`, :class:`RolloutDecision`), the pure helpers (:func:`started`, :func:`held`,
:func:`revisions_of`), the ``Progressing`` condition, and :class:`PodRollout`, which carries a step
out:

- at most one pod is deleted per step, with the pod's uid as precondition, and no further step is
  taken until the observed pod of that name has another uid (the cache has seen the deletion), so a
  stale cache never restarts two pods;
- one ``RolloutPaused`` Warning when a pause begins (not one per reconcile), one
  ``RolloutComplete`` when the last pod runs the update revision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from examples.rediscluster.api import RedisCluster, RedisClusterStatus
from examples.rediscluster.shared.status import condition
from pyctrl.client import Client, Pod, StatefulSet
from pyctrl.client.errors import Conflict, NotFound
from pyctrl.client.objects import Condition
from pyctrl.client.options import Preconditions
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = [
    "MAX_LAG_BYTES",
    "REVISION_LABEL",
    "PodRollout",
    "Restart",
    "RolloutDecision",
    "held",
    "known_revisions",
    "opening",
    "progressing_condition",
    "revisions_of",
    "started",
    "with_revisions",
]

log = get_logger("rediscluster")

#: the label the StatefulSet controller puts on each pod: the revision of the template it came from
REVISION_LABEL = "controller-revision-hash"
#: how far (replication offset bytes) a replica may trail the master and still count as caught up
MAX_LAG_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Restart:
    """Delete ``pod`` so the StatefulSet recreates it from the update revision."""

    pod: str


@dataclass(frozen=True, slots=True)
class RolloutDecision:
    """Where the rollout stands and its next step (``Restart``, a switchover ``Plan`` or, in cluster
    mode, a ``ShardFailover``; None: nothing to do now)."""

    current_revision: str | None
    update_revision: str | None
    outdated: tuple[str, ...] = ()
    #: a ``Restart``, or the mode's own step (a switchover ``Plan``, a ``ShardFailover``)
    step: object | None = None
    paused: str | None = None  # why no step is taken although pods are outdated
    waiting: str | None = None  # an updated pod is still catching up (the rollout is progressing)

    @property
    def in_progress(self) -> bool:
        return bool(self.outdated)


def _current(revisions: Mapping[str, str | None], update: str, previous: str | None) -> str:
    old = [rev for rev in revisions.values() if rev != update and rev is not None]
    if not old:
        return update
    if previous in old:
        return previous
    return Counter(old).most_common(1)[0][0]


def started(
    revisions: Mapping[str, str | None], update_revision: str, previous_current: str | None
) -> RolloutDecision:
    """The revisions and the outdated pods (highest ordinal first) of a rollout to ``update_revision``,
    no step chosen yet."""
    current = _current(revisions, update_revision, previous_current)
    outdated = tuple(sorted((p for p, rev in revisions.items() if rev != update_revision), key=_ordinal_key))
    return RolloutDecision(current, update_revision, outdated)


def opening(
    revisions: Mapping[str, str | None],
    update_revision: str | None,
    previous_current: str | None,
    unsettled: Mapping[str, str],
    catching_up: Callable[[str], bool],
) -> RolloutDecision:
    """A rollout's decision before its mode picks the step: the revisions and the outdated pods,
    :func:`held` while ``unsettled`` names a pod not back in sync. The mode picks a step only when
    the result has outdated pods and is neither paused nor waiting."""
    if update_revision is None:
        return RolloutDecision(previous_current, None)
    decision = started(revisions, update_revision, previous_current)
    if decision.outdated and unsettled:
        return held(decision, unsettled, catching_up)
    return decision


def held(
    decision: RolloutDecision, why: Mapping[str, str], catching_up: Callable[[str], bool]
) -> RolloutDecision:
    """``decision`` held back by ``why`` (who -> why not in sync): ``waiting`` when every entry is the
    rollout's own doing (``catching_up``), else ``paused``."""
    text = "; ".join(f"{pod}: {reason}" for pod, reason in sorted(why.items()))
    if all(catching_up(key) for key in why):
        return replace(decision, waiting=f"waiting for updated pods to catch up ({text})")
    return replace(decision, paused=f"paused until every pod is back in sync ({text})")


def _ordinal_key(pod: str) -> tuple[int, str]:
    tail = pod.rsplit("-", 1)[-1]
    return (-int(tail) if tail.isdigit() else 0, pod)


class PodRollout:
    """Carries out a mode's rollout decisions: pod deletions (one at a time, uid as precondition),
    and the Events of a pause or a completion (module docstring)."""

    def __init__(self, client: Client, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder
        #: cluster -> (pod, uid) of the last pod deleted, until the cache shows it replaced
        self._deleted: dict[tuple[str, str], tuple[str, str | None]] = {}
        #: clusters whose rollout is paused (one Event when a pause begins, not one per reconcile)
        self._paused: set[tuple[str, str]] = set()

    def _settle(
        self, cluster: RedisCluster, decision: RolloutDecision, pods: Mapping[str, Pod], *, idle: bool
    ) -> RolloutDecision:
        """Events of a pause beginning or a rollout completing; ``decision`` itself when its step is
        to be taken now, else a copy without a step (not idle, a restart still pending, no step)."""
        key = (cluster.namespace, cluster.name)
        if not decision.outdated:
            self._paused.discard(key)
            if _was_progressing(cluster):
                message = f"every pod runs revision {decision.update_revision}"
                self.recorder.event(cluster, "Normal", "RolloutComplete", message)
            return replace(decision, step=None)
        if self._pending_deletion(key, pods):  # our own restart, not a pause
            restarting = self._deleted[key][0]
            return replace(decision, step=None, paused=None, waiting=f"waiting for {restarting} to restart")
        if decision.paused is None:
            self._paused.discard(key)
        elif key not in self._paused:
            self._paused.add(key)
            self.recorder.event(cluster, "Warning", "RolloutPaused", decision.paused)
            log.info(
                "Rollout paused", cluster=cluster.name, namespace=cluster.namespace, reason=decision.paused
            )
        if not idle or decision.step is None:
            return replace(decision, step=None)
        return decision

    def forget(self, namespace: str, name: str) -> None:
        self._deleted.pop((namespace, name), None)
        self._paused.discard((namespace, name))

    def _pending_deletion(self, key: tuple[str, str], pods: Mapping[str, Pod]) -> bool:
        """True while the cache still shows the last deleted pod with its old uid."""
        pending = self._deleted.get(key)
        if pending is None:
            return False
        pod, uid = pending
        live = pods.get(pod)
        if live is not None and live.metadata.uid == uid:
            return True
        del self._deleted[key]
        return False

    async def _restart(
        self, cluster: RedisCluster, pods: Mapping[str, Pod], decision: RolloutDecision, name: str
    ) -> None:
        pod = pods[name]
        done = len(pods) - len(decision.outdated) + 1
        try:
            await self.client.delete(pod, preconditions=Preconditions(uid=pod.metadata.uid))
        except (NotFound, Conflict):
            return  # already gone or replaced: the next reconcile sees it
        self._deleted[(cluster.namespace, cluster.name)] = (name, pod.metadata.uid)
        message = f"restarting {name} for revision {decision.update_revision} ({done} of {len(pods)})"
        self.recorder.event(cluster, "Normal", "RolloutRestartingPod", message)
        log.info("Rollout restarting a pod", cluster=cluster.name, namespace=cluster.namespace, pod=name)

    async def update_revision(self, cluster: RedisCluster) -> str | Literal[False] | None:
        """The StatefulSet's ``status.updateRevision``; False while the StatefulSet controller has
        not seen its latest template yet (or there is no StatefulSet)."""
        try:
            sts = await self.client.get(StatefulSet, cluster.name, namespace=cluster.namespace)
        except NotFound:
            return False
        if sts.status is None or sts.status.observed_generation != sts.metadata.generation:
            return False
        return sts.status.update_revision


def revisions_of(pods: Mapping[str, Pod]) -> dict[str, str | None]:
    """pod -> the revision of the template it was created from."""
    return {name: (pod.metadata.labels or {}).get(REVISION_LABEL) for name, pod in pods.items()}


def known_revisions(cluster: RedisCluster) -> RolloutDecision:
    """What the status knew, while the StatefulSet controller catches up with the template."""
    status = cluster.status
    return (
        RolloutDecision(status.current_revision, status.update_revision)
        if status
        else RolloutDecision(None, None)
    )


def _was_progressing(cluster: RedisCluster) -> bool:
    old = cluster.status.conditions if cluster.status else []
    return any(c.type == "Progressing" and c.status == "True" for c in old)


def progressing_condition(cluster: RedisCluster, decision: RolloutDecision, now: str) -> Condition | None:
    """The ``Progressing`` condition for ``decision`` (None before the first revision is known)."""
    old = cluster.status or RedisClusterStatus()
    if decision.update_revision is None:
        return next((c for c in old.conditions if c.type == "Progressing"), None)
    if not decision.outdated:
        message = f"every pod runs revision {decision.update_revision}"
        return condition(old, "Progressing", False, "RolloutComplete", message, now=now)
    todo = f"{len(decision.outdated)} pod(s) to restart for revision {decision.update_revision}: "
    todo += ", ".join(decision.outdated)
    if decision.paused is not None:
        return condition(old, "Progressing", True, "RolloutPaused", f"{todo}; {decision.paused}", now=now)
    return condition(
        old, "Progressing", True, "RollingUpdate", f"{todo}; {decision.waiting or 'in progress'}", now=now
    )


def with_revisions(status: RedisClusterStatus, decision: RolloutDecision) -> RedisClusterStatus:
    """``status`` reporting the rollout's ``currentRevision`` and ``updateRevision``."""
    revisions = {"current_revision": decision.current_revision, "update_revision": decision.update_revision}
    return status.model_copy(update=revisions)
