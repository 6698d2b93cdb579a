"""What ``kubectl rediscluster status`` and ``explain`` print: pure functions of a
:class:`Snapshot` (the RedisCluster, its pods, Events and RedisBackups as read) and the time.

Guarantees: the output depends only on the snapshot, ``now`` and ``colour``; colour is ANSI
escapes around words only (the text without them is the same); no Secret is read, so none can be
printed; ages are relative to ``now`` (``5s``, ``3m``, ``2h``, ``4d``).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.backup import BackupPhase, RedisBackup
from pyctrl.client import Event, Pod

__all__ = ["ROLE_LABEL", "SHARD_LABEL", "Snapshot", "age", "explain", "render_explain", "render_status"]

ROLE_LABEL = "redis.pyctrl.dev/role"
SHARD_LABEL = "redis.pyctrl.dev/shard"
_RESET = "\033[0m"
_COLOURS = {"good": "\033[32m", "bad": "\033[31m", "warn": "\033[33m", "dim": "\033[2m", "bold": "\033[1m"}
_GOOD = {"Running", "True", "Succeeded", "master", "ok", "Normal"}
_BAD = {"False", "Failed", "Failover", "fail", "Warning"}
_WARN = {"Degraded", "Initializing", "Unknown", "Pending", "Terminating"}
_EVENTS_SHOWN = 6


@dataclass(frozen=True)
class Snapshot:
    cluster: RedisCluster
    pods: Sequence[Pod] = ()
    events: Sequence[Event] = ()
    backups: Sequence[RedisBackup] = ()
    now: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))


def _parse(timestamp: str | None) -> datetime.datetime | None:
    if not timestamp:
        return None
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def age(timestamp: str | None, now: datetime.datetime) -> str:
    """``5s``, ``3m``, ``2h``, ``4d`` (kubectl's coarse style); ``-`` when unknown."""
    when = _parse(timestamp)
    if when is None:
        return "-"
    seconds = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


class _Paint:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, tone: str | None = None) -> str:
        if tone is None:
            tone = "good" if text in _GOOD else "bad" if text in _BAD else "warn" if text in _WARN else None
        if not self.colour or tone is None:
            return text
        return f"{_COLOURS[tone]}{text}{_RESET}"


def _table(rows: list[list[str]], paint: _Paint, painted: Sequence[int] = ()) -> list[str]:
    """Left-aligned columns; cells in ``painted`` columns coloured by value (widths from plain text)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = []
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - len(cell))
            text = paint(cell, "bold") if n == 0 else paint(cell) if i in painted else cell
            cells.append(text + pad)
        lines.append("  ".join(cells).rstrip())
    return lines


def _pod_ready(pod: Pod) -> bool:
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or [])


def _pod_state(pod: Pod) -> str:
    """The pod's phase, or why its container waits (CrashLoopBackOff, CreateContainerConfigError)."""
    status = pod.status
    if status is None:
        return "Pending"
    if pod.metadata.deletion_timestamp:
        return "Terminating"
    for c in getattr(status, "container_statuses", None) or []:
        waiting = (c.state or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return str(waiting["reason"])
    return status.phase or "Pending"


def _ordinal(pod: Pod) -> tuple[int, str]:
    """StatefulSet order: ``rc-2`` before ``rc-10``."""
    _, _, tail = pod.name.rpartition("-")
    return (int(tail) if tail.isdigit() else -1, pod.name)


def _restarts(pod: Pod) -> int:
    statuses = getattr(pod.status, "container_statuses", None) if pod.status else None
    return sum(c.restart_count for c in statuses or [])


def _events(snapshot: Snapshot) -> list[Event]:
    """Newest first; Events of the same second in a stable order (reason, then message)."""

    def when(e: Event) -> str:
        return e.last_timestamp or e.event_time or e.metadata.creation_timestamp or ""

    by_text = sorted(snapshot.events, key=lambda e: (e.reason or "", e.message or ""))
    return sorted(by_text, key=when, reverse=True)


def _event_age(e: Event, now: datetime.datetime) -> str:
    return age(e.last_timestamp or e.event_time or e.metadata.creation_timestamp, now)


def _backups(snapshot: Snapshot) -> list[RedisBackup]:
    return sorted(snapshot.backups, key=lambda b: b.metadata.creation_timestamp or "", reverse=True)


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _header(snapshot: Snapshot, paint: _Paint) -> list[str]:
    c, now = snapshot.cluster, snapshot.now
    spec, status = c.spec, c.status
    phase = status.phase.value if status else "Unknown"
    cluster_mode = spec.mode == "cluster"
    size = (
        f"{spec.shards} shards x {_count(1 + spec.replicas_per_shard, 'pod')}"
        if cluster_mode
        else _count(spec.replicas, "pod")
    )
    lines = [f"{paint('RedisCluster', 'bold')} {c.namespace}/{c.name}  {spec.mode}, {size}  {paint(phase)}"]
    if status is None:
        return [
            *lines,
            "  no status yet: the operator has not reconciled this cluster",
            f"  image {spec.image}",
        ]
    generation, seen = c.metadata.generation, status.observed_generation
    stale = "" if seen == generation else f" {paint('(spec not yet seen)', 'warn')}"
    if cluster_mode:  # a master per shard, no cluster-wide master or epoch
        desired = spec.shards * (1 + spec.replicas_per_shard)
        ready_shards = sum(1 for shard in status.shards or [] if shard.ready)
        tone = "good" if ready_shards == spec.shards else "bad"
        lead = f"shards ready {paint(f'{ready_shards}/{spec.shards}', tone)}"
    else:
        desired = spec.replicas
        master = status.current_master or "none"
        lead = (
            f"master {paint(master, 'good' if status.current_master else 'bad')}  epoch {status.master_epoch}"
        )
    lines.append(
        f"  {lead}  ready {status.ready_replicas}/{desired}"
        f"  generation {generation} (observed {_or_dash(seen)}){stale}"
        f"  synced {age(status.last_sync_timestamp, now)} ago"
    )
    if status.resharding:
        lines.append(f"  {paint(status.resharding, 'warn')}")
    return [*lines, f"  image {spec.image}"]


def _pods(snapshot: Snapshot, paint: _Paint) -> list[str]:
    status = snapshot.cluster.status
    sharded = snapshot.cluster.spec.mode == "cluster"  # a SHARD column: which shard a pod belongs to
    rows = [
        ["POD", *(["SHARD"] if sharded else []), "ROLE", "READY", "STATUS", "RESTARTS", "NODE", "IP", "AGE"]
    ]
    for pod in sorted(snapshot.pods, key=_ordinal):
        labels = pod.metadata.labels or {}
        role = labels.get(ROLE_LABEL, "-")
        if status is not None and pod.name == status.current_master:
            role = "master"
        rows.append(
            [
                pod.name,
                *([labels.get(SHARD_LABEL, "-")] if sharded else []),
                role,
                "yes" if _pod_ready(pod) else "no",
                _pod_state(pod),
                str(_restarts(pod)),
                (pod.spec.node_name if pod.spec else None) or "-",
                (pod.status.pod_ip if pod.status else None) or "-",
                age(pod.metadata.creation_timestamp, snapshot.now),
            ]
        )
    painted = (2, 4) if sharded else (1, 3)
    return _table(rows, paint, painted=painted) if len(rows) > 1 else ["no pods"]


def _shards(snapshot: Snapshot, paint: _Paint) -> list[str]:
    status = snapshot.cluster.status
    if status is None or not status.shards:
        return []
    lines = [
        "",
        f"cluster_state {paint(status.cluster_state or '-')}"
        f"  slots assigned {_or_dash(status.slots_assigned)}"
        f"  ok {_or_dash(status.slots_ok)}  to move {status.slots_to_move or 0}",
    ]
    rows = [["SHARD", "MASTER", "REPLICAS", "SLOTS", "COUNT", "READY"]]
    for shard in status.shards:
        replicas, slots = ",".join(shard.replicas) or "-", ",".join(shard.slots) or "-"
        ready = "yes" if shard.ready else "no"
        rows.append([str(shard.index), shard.master or "-", replicas, slots, str(shard.slot_count), ready])
    return lines + _table(rows, paint)


def _backup_lines(snapshot: Snapshot, paint: _Paint) -> list[str]:
    backups = _backups(snapshot)
    spec = snapshot.cluster.spec
    schedule = spec.backup.schedule if spec.backup is not None else None
    head = f"Backups ({len(backups)})" + (f", schedule {schedule!r}" if schedule else ", no schedule")
    lines = ["", paint(head, "bold")]
    for b in backups[:3]:
        phase = b.status.phase.value if b.status else BackupPhase.PENDING.value
        where = (b.status.location if b.status else None) or "-"
        when = (b.status.completion_time if b.status else None) or b.metadata.creation_timestamp
        lines.append(f"  {b.name}  {paint(phase)}  {age(when, snapshot.now)} ago  {where}")
    return lines


def _condition_lines(snapshot: Snapshot, paint: _Paint) -> list[str]:
    status, now = snapshot.cluster.status, snapshot.now
    rows = [["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]]
    for x in status.conditions if status else []:
        rows.append([x.type, x.status, x.reason or "-", age(x.last_transition_time, now), x.message or ""])
    table = [f"  {line}" for line in _table(rows, paint, painted=(1,))] if len(rows) > 1 else ["  none"]
    return ["", paint("Conditions", "bold"), *table]


def _event_lines(snapshot: Snapshot, paint: _Paint) -> list[str]:
    lines = ["", paint("Recent events", "bold")]
    for e in _events(snapshot)[:_EVENTS_SHOWN]:
        count = f" (x{e.count})" if e.count and e.count > 1 else ""
        when = _event_age(e, snapshot.now)
        lines.append(f"  {when:>4}  {paint(e.type or 'Normal')}  {e.reason}: {e.message}{count}")
    return lines if len(lines) > 2 else [*lines, "  none"]


def render_status(snapshot: Snapshot, *, colour: bool = False) -> str:
    """The ``status`` screen: header, pods, shards (cluster mode), backups, conditions, Events."""
    paint = _Paint(colour)
    lines = [*_header(snapshot, paint), "", *_pods(snapshot, paint), *_shards(snapshot, paint)]
    lines += (
        _backup_lines(snapshot, paint) + _condition_lines(snapshot, paint) + _event_lines(snapshot, paint)
    )
    return "\n".join(lines) + "\n"


_REASONS = {
    "InvalidSpec": (
        "The spec cannot be run as written, so the operator applied none of it: fix what the message "
        "names (a missing Secret can simply be created; the operator reads it again within seconds)."
    ),
    "Unschedulable": (
        "Pods cannot be placed on a node: see the scheduler's message (resources, affinity, taints)."
    ),
    "ReplicasNotReady": "Some pods are not ready or not replicating from the master yet.",
    "Initializing": (
        "The cluster has not had a master yet: pods are starting or the first master is being chosen."
    ),
    "Failover": "The recorded master does not answer as master: the operator is failing over.",
    "Degraded": "The cluster serves, with fewer ready replicas than the spec asks for.",
}
_WAITING = {
    "CreateContainerConfigError": "a Secret or ConfigMap the pod needs is missing",
    "CrashLoopBackOff": "Redis keeps exiting: see `kubectl logs`",
    "ImagePullBackOff": "the image cannot be pulled",
    "ErrImagePull": "the image cannot be pulled",
}


def _status_reasons(snapshot: Snapshot) -> list[str] | None:
    """Reasons from the status (None when it says Ready)."""
    c, status = snapshot.cluster, snapshot.cluster.status
    if status is None:
        if any(e.type == "Warning" for e in snapshot.events):
            return [f"RedisCluster {c.namespace}/{c.name} has no status yet; the operator's Events say why:"]
        return [
            f"RedisCluster {c.namespace}/{c.name} has no status: the operator has never reconciled it. "
            f"Is the operator running, and does it watch namespace {c.namespace!r}?"
        ]
    ready = next((x for x in status.conditions if x.type == "Ready"), None)
    if ready is not None and ready.status == "True":
        return None
    reasons: list[str] = []
    if status.observed_generation is not None and status.observed_generation != c.metadata.generation:
        reasons.append(
            f"The operator has not yet acted on the latest spec (generation {c.metadata.generation}, "
            f"status from {status.observed_generation}): it may be busy or not running."
        )
    for cond in status.conditions:
        failing = cond.status != "True" if cond.type != "Degraded" else cond.status == "True"
        if failing:
            reasons.append(
                f"{cond.type} is {cond.status} ({cond.reason or 'no reason'}): {cond.message or ''}".rstrip()
            )
            reasons += [_REASONS[cond.reason]] if cond.reason in _REASONS else []
    if ready is None:
        reasons.append(
            f"Phase {status.phase.value}: " + _REASONS.get(status.phase.value, "no Ready condition yet.")
        )
    return reasons


def explain(snapshot: Snapshot) -> list[str]:
    """Why the cluster is not Ready, one plain sentence each (empty when it is Ready): the status'
    failing conditions and what they mean, pods that cannot start, the operator's Warning Events."""
    reasons = _status_reasons(snapshot)
    if reasons is None:
        return []
    for pod in sorted(snapshot.pods, key=lambda p: p.name):
        state = _pod_state(pod)
        if state in _WAITING:
            reasons.append(f"Pod {pod.name} is {state}: {_WAITING[state]}.")
        elif state == "Pending":
            reasons.append(f"Pod {pod.name} is Pending (not scheduled or not started).")
    seen: set[tuple[str | None, str | None]] = set()
    for e in _events(snapshot):
        if e.type == "Warning" and (e.reason, e.message) not in seen and len(seen) < 3:
            seen.add((e.reason, e.message))
            times = f" ({e.count} times)" if e.count and e.count > 1 else ""
            reasons.append(
                f"The operator reported {e.reason} {_event_age(e, snapshot.now)} ago{times}: {e.message}"
            )
            hint = _REASONS.get(e.reason or "")
            if hint and hint not in reasons:
                reasons.append(hint)
    if len(reasons) == 0 and snapshot.cluster.status is not None:
        reasons.append(
            f"Phase {snapshot.cluster.status.phase.value}, and no condition, pod or Event says why."
        )
    return list(dict.fromkeys(reasons))  # a hint given once


def render_explain(snapshot: Snapshot, *, colour: bool = False) -> str:
    paint = _Paint(colour)
    c = snapshot.cluster
    reasons = explain(snapshot)
    if not reasons:
        message = next((x.message for x in c.status.conditions if x.type == "Ready"), "") if c.status else ""
        return f"RedisCluster {c.namespace}/{c.name} is {paint('Ready', 'good')}: {message}\n"
    lines = [f"RedisCluster {c.namespace}/{c.name} is {paint('not Ready', 'bad')}:"]
    lines += [f"  - {r}" for r in reasons]
    return "\n".join(lines) + "\n"
