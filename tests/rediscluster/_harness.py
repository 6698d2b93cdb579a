"""Async test helpers: poll with a deadline, observe servers as pods, carry out plans.

``execute`` does what the operator's reconcile does with a plan (RecordMaster, then Redis admin
calls in order, stopping at Wait), minus Kubernetes: labels land in a dict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from examples.rediscluster.replication.topology_types import (
    ClusterState,
    Demote,
    NodeObservation,
    Plan,
    Promote,
    RecordMaster,
    ReplicaOf,
    SetLabel,
    Switchover,
    Wait,
)
from examples.rediscluster.shared import redis_admin
from tests.rediscluster._servers import RedisServer


def pod_name(i: int) -> str:
    return f"rc-{i}"


async def observe_all(servers: Sequence[RedisServer], labels: dict[str, str]) -> list[NodeObservation]:
    """Each server as pod ``rc-<i>``; its pod is Ready while Redis answers."""

    async def one(i: int, s: RedisServer) -> NodeObservation:
        try:
            facts = await s.admin(io_timeout=0.5).observe()
        except redis_admin.RedisUnavailable:
            facts = None
        name = pod_name(i)
        return NodeObservation(name, i, s.host, s.port, facts is not None, labels.get(name), redis=facts)

    return list(await asyncio.gather(*(one(i, s) for i, s in enumerate(servers))))


async def execute(
    p: Plan, servers: Sequence[RedisServer], recorded: ClusterState, labels: dict[str, str]
) -> ClusterState:
    """Carry ``p`` out against the servers; return the recorded state after it."""
    by_pod = {pod_name(i): s for i, s in enumerate(servers)}
    for action in p.actions:
        match action:
            case RecordMaster(pod=pod, epoch=epoch):
                recorded = ClusterState(pod, epoch)
            case Promote(pod=pod):
                s = by_pod[pod]
                await s.admin().promote()
            case ReplicaOf(pod=pod, master=master) | Demote(pod=pod, master=master):
                s, m = by_pod[pod], by_pod[master]
                await s.admin().replica_of(m.admin())
            case Switchover(pod=pod, to=to):
                s, t = by_pod[pod], by_pod[to]
                await s.admin().failover_to(t.admin())
            case SetLabel(pod=pod, role=role):
                labels[pod] = str(role)
            case Wait():
                break
    return recorded


async def link_up(server: RedisServer) -> bool:
    facts = await server.admin().observe()
    return facts.master_link_up
