"""The RedisCluster operator's decisions as pure functions (the guide's "The RedisCluster operator" page).

    .venv/bin/python docs/examples/redis_decisions.py

``examples.rediscluster.replication.topology.plan`` takes what the reconcile observed (every pod's Kubernetes
and Redis facts) and the decision recorded in status, and returns the ordered actions; no I/O.
Each scenario below prints its plan.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: examples.rediscluster

from examples.rediscluster.replication.topology import plan, scale_down_victims, switchover
from examples.rediscluster.replication.topology_types import (
    ClusterState,
    NodeObservation,
    Plan,
    Policy,
    RedisFacts,
    Role,
)

LINEAGE = "a" * 40  # the master_replid every node of one replication history shares


def ip(ordinal: int) -> str:
    return f"127.0.1.{ordinal + 1}"


def fresh(ordinal: int) -> NodeObservation:
    """A just-started pod: booted fenced (a replica of an address where nothing listens), no data."""
    facts = RedisFacts(Role.REPLICA, run_id=f"run{ordinal}", master_replid="0" * 40, master_host="127.0.0.0")
    return NodeObservation(f"demo-{ordinal}", ordinal, ip(ordinal), pod_ready=True, redis=facts)


def master(ordinal: int, *, replicas: tuple[int, ...], ready: bool = True) -> NodeObservation:
    online = frozenset((ip(r), 6379) for r in replicas)
    facts = RedisFacts(
        Role.MASTER,
        run_id=f"run{ordinal}",
        master_replid=LINEAGE,
        master_repl_offset=1000,
        connected_replicas=len(replicas),
        keys=42,
        online_replicas=online,
    )
    pod = f"demo-{ordinal}"
    return NodeObservation(pod, ordinal, ip(ordinal), pod_ready=ready, label="master", redis=facts)


def replica(ordinal: int, *, of: int, offset: int, link_up: bool = True) -> NodeObservation:
    facts = RedisFacts(
        Role.REPLICA,
        run_id=f"run{ordinal}",
        master_replid=LINEAGE,
        slave_repl_offset=offset,
        master_host=ip(of),
        master_port=6379,
        master_link_up=link_up,
        master_link_down_since_seconds=None if link_up else 6.0,
        keys=42,
    )
    pod = f"demo-{ordinal}"
    return NodeObservation(pod, ordinal, ip(ordinal), pod_ready=True, label="replica", redis=facts)


def show(title: str, the_plan: Plan) -> None:
    print(f"{title}:")
    for action in the_plan.actions or ["(converged: nothing to do)"]:
        print(f"    {action}")


def main() -> None:
    policy = Policy(down_after=5.0)

    fresh_pods = [fresh(0), fresh(1), fresh(2)]
    show("bootstrap: three fresh pods, nothing recorded", plan(fresh_pods, ClusterState(), policy))

    healthy = [master(0, replicas=(1, 2)), replica(1, of=0, offset=1000), replica(2, of=0, offset=990)]
    recorded = ClusterState("demo-0", master_epoch=1)
    show("steady state", plan(healthy, recorded, policy))

    down = [
        NodeObservation("demo-0", 0, ip(0), pod_ready=False, label="master"),  # no valid reply
        replica(1, of=0, offset=1000, link_up=False),
        replica(2, of=0, offset=990, link_up=False),
    ]
    show("master unreachable for 2 s (down-after 5 s)", plan(down, recorded, policy, master_unhealthy_for=2))
    show("master unreachable for 6 s", plan(down, recorded, policy, master_unhealthy_for=6.0))

    # demo-2 is the master, and a scale-in to 2 pods would remove the highest ordinal: demo-2
    by_two = [replica(0, of=2, offset=1000), replica(1, of=2, offset=990), master(2, replicas=(0, 1))]
    recorded = ClusterState("demo-2", master_epoch=1)
    scale = scale_down_victims(by_two, recorded, replicas=2, policy=policy)
    print(f"scale-in to 2 pods: remove {', '.join(scale.victims)}; the master is among them, so first")
    assert scale.fail_over_first
    assert scale.failover_to is not None
    show(f"  hand it over to {scale.failover_to}", switchover(by_two, recorded, scale.failover_to))


if __name__ == "__main__":
    main()
