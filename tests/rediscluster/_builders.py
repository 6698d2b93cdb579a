"""Observation builders and a plan simulator for the pure topology tests.

Pods are ``rc-<i>`` at ``10.0.0.<i>:6379``; ``simulate`` applies a plan the way Redis would react
(a promoted node keeps its data, a re-pointed replica syncs its master's dataset and replid).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from examples.rediscluster.replication.topology_types import (
    ClusterState,
    Demote,
    NodeObservation,
    Plan,
    Promote,
    RecordMaster,
    RedisFacts,
    ReplicaOf,
    Role,
    SetLabel,
    Switchover,
    Wait,
)

REPLID = "a" * 40
OTHER_REPLID = "b" * 40


def pod(i: int) -> str:
    return f"rc-{i}"


def ip(i: int) -> str:
    return f"10.0.0.{i + 1}"


def master(
    i: int,
    *,
    keys: int = 10,
    replid: str = REPLID,
    replid2: str = "0" * 40,
    offset: int = 1000,
    replicas: int = 2,
    ready: bool = True,
    label: str | None = "master",
    uptime: int = 3600,
    run_id: str | None = None,
    failover_state: str = "no-failover",
    online: tuple[int, ...] = (),
    terminating: bool = False,
) -> NodeObservation:
    facts = RedisFacts(
        role=Role.MASTER,
        run_id=run_id or f"run-{i}",
        master_replid=replid,
        master_replid2=replid2,
        master_repl_offset=offset,
        connected_replicas=replicas,
        keys=keys,
        uptime_seconds=uptime,
        failover_state=failover_state,
        online_replicas=frozenset((ip(j), 6379) for j in online),
    )
    return NodeObservation(
        pod(i), i, ip(i), pod_ready=ready, label=label, terminating=terminating, redis=facts
    )


def replica(
    i: int,
    of: int,
    *,
    offset: int = 1000,
    replid: str = REPLID,
    priority: int = 100,
    link_up: bool = True,
    down_since: float | None = None,
    keys: int = 10,
    ready: bool = True,
    label: str | None = "replica",
    run_id: str | None = None,
    master_ip: str | None = None,
    loading: bool = False,
    terminating: bool = False,
) -> NodeObservation:
    facts = RedisFacts(
        role=Role.REPLICA,
        run_id=run_id or f"run-{i}",
        master_replid=replid,
        master_repl_offset=offset,
        slave_repl_offset=offset,
        master_host=master_ip or ip(of),
        master_port=6379,
        master_link_up=link_up,
        master_link_down_since_seconds=None if link_up else (math.inf if down_since is None else down_since),
        replica_priority=priority,
        keys=keys,
        loading=loading,
    )
    return NodeObservation(
        pod(i), i, ip(i), pod_ready=ready, label=label, terminating=terminating, redis=facts
    )


def gone(i: int, *, label: str | None = "replica", with_ip: bool = True) -> NodeObservation:
    """A pod whose Redis gives no valid reply (crashed, hung, or no IP yet)."""
    return NodeObservation(pod(i), i, ip(i) if with_ip else None, pod_ready=False, label=label)


def healthy(n: int, master_at: int = 0) -> list[NodeObservation]:
    """A converged cluster of ``n`` pods with ``rc-<master_at>`` master."""
    others = tuple(j for j in range(n) if j != master_at)
    return [
        master(i, replicas=n - 1, online=others) if i == master_at else replica(i, master_at)
        for i in range(n)
    ]


def simulate(
    p: Plan, observations: Iterable[NodeObservation], recorded: ClusterState
) -> tuple[list[NodeObservation], ClusterState]:
    """Apply ``p`` as the operator plus Redis would (stopping at ``Wait``)."""
    nodes = {n.pod: n for n in observations}

    def facts(name: str) -> RedisFacts:
        r = nodes[name].redis
        assert r is not None, f"plan acts on unreachable {name}"
        return r

    def follow(name: str, leader: str) -> None:
        m = facts(leader)
        me = (nodes[name].ip or "", nodes[name].port)
        nodes[leader] = dataclasses.replace(
            nodes[leader], redis=dataclasses.replace(m, online_replicas=m.online_replicas | {me})
        )
        nodes[name] = dataclasses.replace(
            nodes[name],
            redis=dataclasses.replace(
                facts(name),
                role=Role.REPLICA,
                master_host=nodes[leader].ip,
                master_port=nodes[leader].port,
                master_link_up=True,
                master_link_down_since_seconds=None,
                master_replid=m.master_replid,
                master_repl_offset=m.offset,
                slave_repl_offset=m.offset,
                keys=m.keys,
            ),
        )

    def lead(name: str) -> None:
        r = facts(name)
        nodes[name] = dataclasses.replace(
            nodes[name],
            redis=dataclasses.replace(
                r,
                role=Role.MASTER,
                master_host=None,
                master_port=None,
                master_link_up=False,
                master_link_down_since_seconds=None,
                master_replid2=r.master_replid,
                online_replicas=frozenset(),
                master_replid="p" * 39 + name[-1],
                slave_repl_offset=None,
                master_repl_offset=r.offset,
            ),
        )

    for action in p.actions:
        match action:
            case RecordMaster(pod=name, epoch=epoch):
                assert epoch == recorded.master_epoch + 1, "epochs grow by one"
                recorded = ClusterState(name, epoch)
            case Promote(pod=name):
                lead(name)
            case ReplicaOf(pod=name, master=leader) | Demote(pod=name, master=leader):
                follow(name, leader)
            case Switchover(pod=old, to=new):
                lead(new)
                follow(old, new)
            case SetLabel(pod=name, role=role):
                nodes[name] = dataclasses.replace(nodes[name], label=str(role))
            case Wait():
                break
    return sorted(nodes.values(), key=lambda n: n.ordinal), recorded


def masters(observations: Iterable[NodeObservation]) -> set[str]:
    return {n.pod for n in observations if n.reachable and n.role is Role.MASTER}


def with_facts(n: NodeObservation, **changes: object) -> NodeObservation:
    """``n`` with some of its Redis facts replaced."""
    assert n.redis is not None
    return dataclasses.replace(n, redis=dataclasses.replace(n.redis, **changes))  # type: ignore[arg-type]
