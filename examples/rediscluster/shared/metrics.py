"""The operator's own Prometheus metrics, served with pyctrl's on the manager's ``/metrics``.

Per RedisCluster (labels ``namespace``, ``name``), as an SRE alerts on them:

- ``rediscluster_failovers_total`` — promotions of a replica in place of a failed or unhealthy
  master (planned switchovers at scale-in are not failovers);
- ``rediscluster_phase{phase}`` — 1 for the current phase, 0 for the others (kube-state-metrics
  style, so ``rediscluster_phase{phase="Degraded"} == 1`` is an alert rule);
- ``rediscluster_ready_replicas`` / ``rediscluster_desired_replicas`` — ready pods vs
  ``spec.replicas``;
- ``rediscluster_master_epoch`` — the failover epoch recorded in status;
- ``rediscluster_failover_phase_seconds{phase}`` — how long each phase of a failover took
  (``detection``: the master unhealthy until the decision; ``decision``: observing and planning;
  ``epoch_write``; ``promotion``; ``repointing``: every replica re-pointed and the master
  labelled), a histogram per phase;
- ``rediscluster_masters`` — pods whose Redis reports ``role:master`` (1 when healthy; 0 is "no
  master", 2 or more "two masters");
- ``rediscluster_replication_links_down`` — replicas whose link to their master is down;
- ``rediscluster_hibernated`` — 1 while the cluster hibernates on purpose: from the moment its
  pods are being stopped (``redis.pyctrl.dev/hibernation: on``) until, woken, its master serves
  again (the condition ``Hibernated`` True), else 0; the alert rules about masters, replication,
  readiness and backups are silenced by it (``unless on (namespace, name) ... == 1``).

Values are set from the status each reconcile computes (so only the leader reports them), and a
deleted RedisCluster's series are removed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import Counter, Gauge, Histogram

from examples.rediscluster.api import RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.shared.facts import RedisFacts, Role
from pyctrl.metrics import registry

__all__ = [
    "FAILOVER_PHASES",
    "counter",
    "forget",
    "gauge",
    "observe_failover",
    "observe_failover_phase",
    "observe_nodes",
    "observe_status",
    "remove",
]

_LABELS = ("namespace", "name")


def gauge(name: str, documentation: str, *labels: str) -> Gauge:
    """A gauge on the manager's registry, labelled namespace, name and ``labels``."""
    return Gauge(name, documentation, (*_LABELS, *labels), registry=registry)


def counter(name: str, documentation: str, *labels: str) -> Counter:
    """A counter on the manager's registry, labelled namespace, name and ``labels``."""
    return Counter(name, documentation, (*_LABELS, *labels), registry=registry)


failovers = counter(
    "rediscluster_failovers_total", "Replicas promoted in place of a failed or unhealthy master."
)
phase = gauge("rediscluster_phase", "1 for the RedisCluster's current phase, 0 for the others.", "phase")
ready_replicas = gauge("rediscluster_ready_replicas", "Ready Redis pods.")
desired_replicas = gauge("rediscluster_desired_replicas", "spec.replicas.")
master_epoch = gauge("rediscluster_master_epoch", "The failover epoch recorded in status.")
masters = gauge("rediscluster_masters", "Pods whose Redis reports role:master.")
links_down = gauge(
    "rediscluster_replication_links_down", "Replicas whose replication link to their master is down."
)
hibernated = gauge(
    "rediscluster_hibernated",
    "1 while the RedisCluster hibernates, is stopping for hibernation or waking from it, else 0.",
)
#: The phases of ``rediscluster_failover_phase_seconds``, in the order they happen.
FAILOVER_PHASES = ("detection", "decision", "epoch_write", "promotion", "repointing")
failover_phase = Histogram(
    "rediscluster_failover_phase_seconds",
    "Seconds each phase of a failover took.",
    (*_LABELS, "phase"),
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=registry,
)


def observe_failover(namespace: str, name: str) -> None:
    failovers.labels(namespace, name).inc()


def observe_failover_phase(namespace: str, name: str, phase: str, seconds: float) -> None:
    failover_phase.labels(namespace, name, phase).observe(seconds)


def observe_status(namespace: str, name: str, desired: int, status: RedisClusterStatus) -> None:
    for p in RedisClusterPhase:
        phase.labels(namespace, name, p.value).set(1 if p is status.phase else 0)
    ready_replicas.labels(namespace, name).set(status.ready_replicas)
    desired_replicas.labels(namespace, name).set(desired)
    master_epoch.labels(namespace, name).set(status.master_epoch)
    resting = any(c.type == "Hibernated" and c.status == "True" for c in status.conditions)
    hibernated.labels(namespace, name).set(1 if resting else 0)


class _Answered(Protocol):
    """A pod as the metrics see it: what its Redis answered (None: no valid reply)."""

    @property
    def redis(self) -> RedisFacts | None: ...


def observe_nodes(namespace: str, name: str, nodes: Iterable[_Answered]) -> None:
    """Masters and broken replication links among the pods that answered ``INFO``."""
    answered = [n.redis for n in nodes if n.redis is not None]
    masters.labels(namespace, name).set(sum(r.role is Role.MASTER for r in answered))
    down = sum(r.role is Role.REPLICA and not r.master_link_up for r in answered)
    links_down.labels(namespace, name).set(down)


def forget(namespace: str, name: str) -> None:
    """Drop a deleted RedisCluster's series."""
    for p in RedisClusterPhase:
        remove(phase, namespace, name, p.value)
    per_cluster = (failovers, ready_replicas, desired_replicas, master_epoch, masters, links_down, hibernated)
    for metric in per_cluster:
        remove(metric, namespace, name)
    for failover_step in FAILOVER_PHASES:
        remove(failover_phase, namespace, name, failover_step)


def remove(metric: Counter | Gauge | Histogram, *labels: str) -> None:
    """Drop one series (nothing when it was never observed)."""
    with contextlib.suppress(KeyError):  # never observed
        metric.remove(*labels)
