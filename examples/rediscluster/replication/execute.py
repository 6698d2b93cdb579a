"""Carrying out a ``topology.Plan``: the status write, the Redis commands and the pod labels.

Guarantees of :meth:`PlanExecutor.execute`:

- the plan's actions run in :func:`stages`, one stage after another; the actions of one stage run
  at once (a failover's critical path is then one status write, one promotion and one round of
  re-pointing, however many replicas there are). ``RecordMaster`` is a stage of its own, written
  to status (optimistic lock: a stale view gets Conflict and the reconcile requeues) *before* any
  Redis command, so a restarted operator resumes the same decision;
- order kept from the plan: the label leaves a pod that answers before any Redis command (a pod
  that does not answer takes no writes, so its relabel runs beside the promotion); every
  ``ReplicaOf``/``Demote`` and the master label come after the promotion, together. Redis itself
  continues a re-pointed replica with a partial resync (PSYNC from the promoted replica's
  replication history) whenever its offset is in that history;
- a stage in which a Redis action failed (``RedisAdminError``) is the last one: the other actions
  of that stage still complete, the reconcile requeues and plans again from what it then
  observes; ``Wait`` stops the sequence without acting;
- Events: ``MasterElected`` (first master), ``FailoverCompleted`` (a promotion in place of another
  master, also counted in ``rediscluster_failovers_total``), ``SwitchoverStarted`` (``FAILOVER TO``,
  recorded once the target is master: a ``Switchover`` is carried out to its end, so the master
  label that follows it in the plan moves in the same reconcile);
  they are queued to the event broadcaster, never awaited on the path;
- a failover's phases (:class:`PhaseTimer`: detection, decision, epoch write, promotion,
  re-pointing) are logged in one line and observed in ``rediscluster_failover_phase_seconds``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.replication.observe import Observed
from examples.rediscluster.replication.topology_types import (
    Action,
    Demote,
    Plan,
    Promote,
    RecordMaster,
    ReplicaOf,
    Role,
    SetLabel,
    Switchover,
    Wait,
)
from examples.rediscluster.shared import metrics
from examples.rediscluster.shared.redis_admin import RedisAdminError
from examples.rediscluster.shared.resources import ROLE_LABEL
from pyctrl.client import Client
from pyctrl.client.patch import MergeFrom, PatchType, RawPatch
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = ["PhaseTimer", "PlanExecutor", "stages"]

log = get_logger("rediscluster")

_BARRIERS = (RecordMaster, Switchover, Wait)


def stages(actions: Sequence[Action], unreachable: frozenset[str] = frozenset()) -> list[tuple[Action, ...]]:
    """Group ``actions`` (a plan's, in order) into stages run one after another (module docstring).

    Between two barriers (``RecordMaster``, ``Switchover``, ``Wait``: each a stage of its own) the
    actions fall into up to three stages, in this order: labels leaving pods that answer; the
    promotion with the labels leaving ``unreachable`` pods; after it, re-pointing and the master
    label.
    """
    out: list[tuple[Action, ...]] = []
    segment: list[list[Action]] = [[], [], []]

    def flush() -> None:
        out.extend(tuple(stage) for stage in segment if stage)
        for stage in segment:
            stage.clear()

    for action in actions:
        match action:
            case RecordMaster() | Switchover() | Wait():
                flush()
                out.append((action,))
            case SetLabel(pod=pod, role=role) if role is not Role.MASTER:
                segment[1 if pod in unreachable else 0].append(action)
            case Promote():
                segment[1].append(action)
            case _:  # ReplicaOf, Demote, the master label
                segment[2].append(action)
    flush()
    return out


@dataclass
class PhaseTimer:
    """The phases of one reconcile's failover, in seconds (module docstring).

    ``detection`` is how long the master had been unhealthy when the reconcile decided; the
    others run from the reconcile's start: ``decision`` (observe and plan), ``epoch_write``,
    ``promotion``, ``repointing`` (all replicas re-pointed and the master labelled).
    """

    detection: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    old_master: str | None = None  # the recorded master when the plan began
    new_master: str | None = None  # the pod promoted, once it is
    _last: float = field(default_factory=time.monotonic)

    def decided(self, detection: float) -> PhaseTimer:
        """The plan is made: ``detection`` is how long the master had been unhealthy, and the
        ``decision`` phase ends now."""
        self.detection = detection
        self.mark("decision")
        return self

    def mark(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = now - self._last
        self._last = now

    def report(self, cluster: RedisCluster) -> None:
        figures = {"detection": self.detection, **self.phases}
        for phase, seconds in figures.items():
            metrics.observe_failover_phase(cluster.namespace, cluster.name, phase, seconds)
        log.info(
            "Failover phases",
            cluster=cluster.name,
            namespace=cluster.namespace,
            old_master=self.old_master,
            new_master=self.new_master,
            **{f"{phase}_s": round(seconds, 3) for phase, seconds in figures.items()},
        )


class PlanExecutor:
    """Executes plans for the reconciler with its client and recorder."""

    def __init__(self, client: Client, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder

    async def execute(
        self, cluster: RedisCluster, observed: Observed, plan: Plan, timer: PhaseTimer | None = None
    ) -> tuple[bool, RedisCluster]:
        """(whether anything was done, the cluster as stored after a status write)."""
        timer = timer or PhaseTimer()
        timer.old_master = cluster.status.current_master if cluster.status else None
        try:
            return await self._run_stages(cluster, observed, plan, timer)
        finally:
            if timer.new_master is not None and timer.old_master not in (None, timer.new_master):
                timer.mark("repointing")  # done, or failed and left to the next reconcile
                timer.report(cluster)

    async def _run_stages(
        self, cluster: RedisCluster, observed: Observed, plan: Plan, timer: PhaseTimer
    ) -> tuple[bool, RedisCluster]:
        acted = False
        unreachable = frozenset(n.pod for n in observed.nodes if not n.reachable)
        for stage in stages(plan.actions, unreachable):
            if isinstance(stage[0], Wait):
                log.info("Waiting", cluster=cluster.name, namespace=cluster.namespace, reason=stage[0].reason)
                break
            if isinstance(stage[0], RecordMaster):
                cluster = await self._record_master(cluster, stage[0].pod, stage[0].epoch)
                timer.mark("epoch_write")
                acted = True
                continue
            outcomes = await asyncio.gather(
                *(self._act(cluster, observed, action) for action in stage), return_exceptions=True
            )
            acted = True
            failed = False
            for action, outcome in zip(stage, outcomes, strict=True):
                if isinstance(outcome, RedisAdminError):
                    failed = True
                    log.info(
                        "Redis action failed; will retry",
                        cluster=cluster.name,
                        action=type(action).__name__,
                        error=str(outcome),
                    )
                elif isinstance(outcome, BaseException):
                    raise outcome
                elif isinstance(action, Promote):
                    timer.new_master = action.pod
                    self._announce(cluster, timer.old_master, action.pod, plan.reason)
                    timer.mark("promotion")
            if failed:
                return True, cluster
        return acted, cluster

    async def _act(self, cluster: RedisCluster, observed: Observed, action: Action) -> None:
        match action:
            case Promote(pod=pod):
                await observed.connection(pod).promote()
            case ReplicaOf(pod=pod, master=master) | Demote(pod=pod, master=master):
                await observed.connection(pod).replica_of(observed.connection(master))
            case Switchover(pod=pod, to=to):
                await observed.connection(pod).failover_to(observed.connection(to))
                self.recorder.event(
                    cluster, "Normal", "SwitchoverStarted", f"handing the master over from {pod} to {to}"
                )
            case SetLabel(pod=pod, role=role):
                await self.client.patch(
                    observed.pods[pod],
                    RawPatch(PatchType.MERGE, {"metadata": {"labels": {ROLE_LABEL: str(role)}}}),
                )

    def _announce(self, cluster: RedisCluster, old: str | None, new: str, reason: str = "") -> None:
        epoch = cluster.status.master_epoch if cluster.status else 0
        if old is None or old == new:
            self.recorder.event(cluster, "Normal", "MasterElected", f"{new} is the master (epoch {epoch})")
        else:
            why = f": {reason}" if reason else ""
            self.recorder.event(
                cluster,
                "Normal",
                "FailoverCompleted",
                f"promoted {new} in place of {old} (epoch {epoch}){why}",
            )
            metrics.observe_failover(cluster.namespace, cluster.name)

    async def _record_master(self, cluster: RedisCluster, pod: str, epoch: int) -> RedisCluster:
        """Persist the decision before acting on it (optimistic lock: a stale view gets Conflict)."""
        before = cluster.model_copy(deep=True)
        status = cluster.status.model_copy() if cluster.status else RedisClusterStatus()
        status.current_master = pod
        status.master_epoch = epoch
        status.phase = RedisClusterPhase.FAILOVER if epoch > 1 else RedisClusterPhase.INITIALIZING
        cluster.status = status
        stored: RedisCluster = await self.client.status().patch(
            cluster, MergeFrom(before, optimistic_lock=True)
        )
        log.info(
            "Recorded master decision",
            cluster=cluster.name,
            namespace=cluster.namespace,
            master=pod,
            epoch=epoch,
        )
        return stored
