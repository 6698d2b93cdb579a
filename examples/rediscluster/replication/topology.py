"""Redis topology decisions of the RedisCluster operator: pure functions and frozen data, no I/O.

The reconcile observes every pod (Kubernetes facts plus what Redis says), calls :func:`plan`, persists
a leading :class:`RecordMaster` in status, then carries out the other actions in order with
``redis_admin``. Nothing here talks to Redis or Kubernetes (STYLE point 10), so every rule is a
table-driven unit test. REFERENCE "Redis failover essentials" rules and where they live:

- *Never promote on one bad probe*: :class:`DownDetector` reports how long an endpoint has had no
  valid reply; :func:`plan` fails over only when ``master_unhealthy_for >= down_after`` **and** the
  current observation still shows the master unreachable or its pod NotReady.
- *Rank candidates*: :func:`choose_failover_candidate` skips replica-priority 0, loading, terminating
  and long-disconnected replicas (Sentinel: link down longer than ``link_down_factor * down_after``
  plus the master's downtime); offsets are compared only within one ``master_replid`` group; order is
  lowest priority, highest processed offset, lowest run id.
- *Record, promote, verify, re-point*: a change of master (bootstrap, failover, switchover) always
  starts with ``RecordMaster(pod, epoch + 1)``, then ``Promote`` (the executor verifies
  ``role:master``), then ``ReplicaOf``/``Demote`` of the others. A restarted operator finds the
  recorded master still a replica and resumes the same decision (``Switchover`` when the old
  master is alive and in sync).
- *Fence the old master / one master only*: every reachable master other than the recorded one is
  demoted (``Demote``: REPLICAOF the recorded master); the master label leaves every other pod
  before any Redis command.
- *Empty restarted master*: a recorded master answering with no keys while replicas of an older
  lineage still hold keys is never made a sync source; the best of those replicas is promoted.
- *Stale pod IPs*: a replica follows the master only if ``master_host:master_port`` is the master
  pod's current IP and port; otherwise it is re-pointed.
- *Scale-in never removes the master*: :func:`scale_down_victims` asks for a planned switchover
  (:func:`switchover`, ``FAILOVER TO``) first; a master whose pod is terminating (a node drain)
  is handed over the same way by :func:`evacuate`.

Plans are deterministic (same inputs, same plan) and a converged cluster yields an empty plan.
The data types (observations, actions, :class:`DownDetector`) live in ``topology_types`` and are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

__all__ = [
    "bootstrap",
    "choose_failover_candidate",
    "evacuate",
    "fence",
    "fenced_master_handover",
    "is_empty_restart",
    "plan",
    "scale_down_victims",
    "switchover",
]

from examples.rediscluster.replication.topology_types import (
    Action,
    ClusterState,
    Demote,
    NodeObservation,
    Plan,
    Policy,
    Promote,
    RecordMaster,
    ReplicaOf,
    Role,
    ScaleDown,
    SetLabel,
    Switchover,
    Wait,
)


def _index(observations: Iterable[NodeObservation]) -> dict[str, NodeObservation]:
    nodes: dict[str, NodeObservation] = {}
    for n in sorted(observations, key=lambda o: (o.ordinal, o.pod)):
        if n.pod in nodes:
            raise ValueError(f"pod {n.pod} observed twice")
        nodes[n.pod] = n
    return nodes


def _rank(n: NodeObservation) -> tuple[int, int, str]:
    assert n.redis is not None
    return (n.redis.replica_priority, -n.redis.offset, n.redis.run_id)


def _serving_key(n: NodeObservation) -> tuple[int, int, int]:
    r = n.redis
    return (-r.connected_replicas, -r.keys, n.ordinal) if r is not None else (0, 0, n.ordinal)


def bootstrap(observations: Iterable[NodeObservation]) -> str | None:
    """The first master of a cluster without a recorded one.

    Losing status must never wipe a dataset: when some reachable node holds keys, a master among
    them is adopted (most replicas, most keys), else the best-ranked replica among them. Only a
    cluster without data starts from the pod with ordinal 0. None while a pod is loading its
    dataset (it may hold the data) or when no such pod answers.
    """
    nodes = [n for n in _index(observations).values() if n.reachable and n.redis]
    if any(n.redis and n.redis.loading for n in nodes):
        return None
    holders = [n for n in nodes if n.redis and n.redis.keys]
    if masters := [n for n in holders if n.role is Role.MASTER]:
        return min(masters, key=_serving_key).pod
    if holders:  # a terminating holder only when no other holds data: better than wiping it
        return min(holders, key=lambda n: (n.terminating, *_rank(n))).pod
    return next((n.pod for n in nodes if n.ordinal == 0), None)


def is_empty_restart(master: NodeObservation, observations: Iterable[NodeObservation]) -> bool:
    """``master`` answers with no keys while a replica of another lineage still holds keys.

    That is a master restarted without persistence: it must never become the sync source, since
    syncing from it would wipe the replicas. A replica of the master's own lineage (its replid or
    replid2) is not a witness: it already has what the master has. The restarted master may answer
    as a master or — booted *fenced*, as the operator's pods are (a replica of an address where
    nothing listens, its link down) — as a replica following no node of the cluster.
    """
    m = master.redis
    if m is None or m.keys or m.loading:
        return False
    if m.role is Role.REPLICA and (m.master_link_up or any(master.follows(n) for n in observations)):
        return False  # a replica of a live cluster node: a promotion in progress, not a restart
    return any(
        n.pod != master.pod
        and n.redis is not None
        and n.redis.role is Role.REPLICA
        and n.redis.keys > 0
        and n.redis.master_replid not in (m.master_replid, m.master_replid2)
        for n in observations
    )


def choose_failover_candidate(
    observations: Iterable[NodeObservation],
    old_master: str | None,
    policy: Policy,
    *,
    master_unhealthy_for: float = 0.0,
    exclude_replid: str | None = None,
) -> NodeObservation | None:
    """The replica to promote in place of ``old_master``, or None when no replica is eligible.

    Eligible: reachable replica, not fenced, not terminating, not loading, replica-priority != 0, not
    itself an empty restart (:func:`is_empty_restart`: syncing from it would wipe the keys another
    lineage still holds), link to its master down no longer than
    ``master_unhealthy_for + link_down_factor * down_after``, and not of the ``exclude_replid``
    lineage. Replicas are grouped by ``master_replid`` (offsets of different
    lineages are not comparable); the group that followed ``old_master`` wins, then the larger group.
    Within a group: lowest replica-priority, highest processed offset, lowest run id.
    """
    nodes = _index(observations)
    old = nodes.get(old_master) if old_master is not None else None
    max_down = master_unhealthy_for + policy.link_down_factor * policy.down_after
    groups: dict[str, list[NodeObservation]] = {}
    for n in nodes.values():
        r = n.redis
        if n.pod == old_master or not n.reachable or n.terminating or r is None or r.role is not Role.REPLICA:
            continue
        if (
            r.loading
            or r.replica_priority == 0
            or r.master_replid == exclude_replid
            or n.pod in policy.fenced
            or is_empty_restart(n, nodes.values())  # empty while another lineage holds keys
        ):
            continue
        down_for = r.master_link_down_since_seconds
        if not r.master_link_up and (down_for is None or down_for > max_down):
            continue
        groups.setdefault(r.master_replid, []).append(n)
    if not groups:
        return None

    def group_key(members: list[NodeObservation]) -> tuple[bool, int, int, str]:
        best = min(members, key=_rank)
        followed_old = old is not None and any(m.follows(old) for m in members)
        return (not followed_old, -len(members), _rank(best)[0], _rank(best)[2])

    chosen: list[NodeObservation] = min(groups.values(), key=group_key)
    return min(chosen, key=_rank)


def _converge(
    nodes: dict[str, NodeObservation],
    master: str,
    epoch: int | None,
    handover_from: NodeObservation | None = None,
) -> Plan:
    """Actions that make ``master`` the only master and every other reachable node its replica.

    ``epoch`` (a new decision) puts ``RecordMaster`` first. Labels leave the other pods before any
    Redis command, so no Service selects two masters; the master label comes last, after Promote.
    With ``handover_from`` the master is made by ``Switchover`` instead (carried out to its end:
    the master label follows it at once). That master's other replicas are first re-pointed to
    the new one (chained below it while it is still a replica: same replication ID, a partial
    resync), so the new master has them the moment it takes over, even if the old master leaves
    right away (a drained node) — writes acknowledged by ``WAIT`` do not stall waiting for them.
    """
    m = nodes[master]
    actions: list[Action] = [RecordMaster(master, epoch)] if epoch is not None else []
    others = [n for n in nodes.values() if n.pod != master]
    actions += [SetLabel(n.pod, Role.REPLICA) for n in others if n.label != Role.REPLICA]
    live = [n for n in others if n.reachable and n.redis is not None and not n.redis.loading]
    chained = [n for n in live if handover_from is not None and n.follows(handover_from)]
    if handover_from is not None:
        actions += [ReplicaOf(n.pod, master) for n in chained]
        actions.append(Switchover(handover_from.pod, master))
    elif m.role is not Role.MASTER:
        actions.append(Promote(master))
    for n in live:
        if n is handover_from or n in chained:
            continue
        if n.role is Role.MASTER:
            actions.append(Demote(n.pod, master))
        elif not n.follows(m):
            actions.append(ReplicaOf(n.pod, master))
    if m.label != Role.MASTER:
        actions.append(SetLabel(master, Role.MASTER))
    return Plan(tuple(actions))


def _resume(nodes: dict[str, NodeObservation], target: NodeObservation, epoch: int | None = None) -> Plan:
    """Make replica ``target`` the master (``epoch``: record that decision first).

    When it replicates, link up, from a live master that lists it online, hand over with
    ``Switchover`` (FAILOVER waits for the replica to catch up: no write loss); otherwise promote
    it and fence every other master.
    """
    old = next((n for n in nodes.values() if n.role is Role.MASTER and target.follows(n)), None)
    if old is None or old.redis is None or target.redis is None or not target.redis.master_link_up:
        return _converge(nodes, target.pod, epoch)
    if old.redis.failover_state != "no-failover":
        return _wait(f"switchover {old.pod} -> {target.pod} in progress ({old.redis.failover_state})")
    if (target.ip, target.port) not in old.redis.online_replicas:  # FAILOVER would refuse it
        return _converge(nodes, target.pod, epoch)
    return _converge(nodes, target.pod, epoch, handover_from=old)


def _wait(reason: str) -> Plan:
    return Plan((Wait(reason),))


def _fail_over(
    nodes: dict[str, NodeObservation],
    recorded: ClusterState,
    policy: Policy,
    why: str,
    *,
    unhealthy_for: float,
    exclude_replid: str | None = None,
) -> Plan:
    if not policy.enable_auto_failover:
        return _wait(f"{why}; automatic failover is disabled")
    candidate = choose_failover_candidate(
        nodes.values(),
        recorded.current_master,
        policy,
        master_unhealthy_for=unhealthy_for,
        exclude_replid=exclude_replid,
    )
    if candidate is None:
        return _wait(f"{why}; no eligible replica to promote")
    epoch = recorded.master_epoch + 1
    if exclude_replid is not None:  # never hand over from (or sync with) the excluded lineage
        chosen = _converge(nodes, candidate.pod, epoch)
    else:
        chosen = _resume(nodes, candidate, epoch)
    return chosen if chosen.reason or _is_wait(chosen) else replace(chosen, reason=why)


def _is_wait(p: Plan) -> bool:
    return bool(p.actions) and isinstance(p.actions[0], Wait)


def plan(
    observations: Sequence[NodeObservation],
    recorded: ClusterState,
    policy: Policy,
    *,
    master_unhealthy_for: float = 0.0,
) -> Plan:
    """The ordered actions that take the observed cluster to the recorded (or a new) master.

    ``master_unhealthy_for``: seconds the recorded master has had no valid reply or a NotReady pod
    (the larger of the two signals; see :class:`DownDetector`). A recorded master that is still a
    replica (a promotion recorded but not carried out) is promoted whatever its readiness.
    """
    nodes = _index(observations)
    name = recorded.current_master
    if name is None:
        first = bootstrap(nodes.values())
        if first is None:
            return _wait("bootstrap: waiting for pod ordinal 0 to answer and every pod to load its data")
        if first in policy.fenced:
            r = nodes[first].redis
            if r is not None and r.keys:  # it may hold the only data: never wipe it, never elect it
                return _wait(f"bootstrap: {first} holds the data but it is fenced")
            empty = [n.pod for n in nodes.values() if n.pod not in policy.fenced and n.reachable]
            if not empty:
                return _wait("bootstrap: every pod that answers is fenced")
            first = empty[0]  # no data anywhere: the lowest ordinal that is not fenced
        return _converge(nodes, first, recorded.master_epoch + 1)
    master = nodes.get(name)
    m = master.redis if master is not None and master.reachable else None
    if master is None or m is None or (m.role is Role.MASTER and not master.pod_ready):
        if master_unhealthy_for < policy.down_after:
            return _wait(
                f"master {name} unhealthy for {master_unhealthy_for:.1f}s < down-after {policy.down_after:g}s"
            )
        return _fail_over(
            nodes, recorded, policy, f"master {name} is down", unhealthy_for=master_unhealthy_for
        )
    if m.loading:
        return _wait(f"master {name} is loading its dataset")
    if is_empty_restart(master, nodes.values()):
        return _fail_over(
            nodes,
            recorded,
            policy,
            f"master {name} restarted empty while replicas hold data",
            unhealthy_for=max(master_unhealthy_for, float(m.uptime_seconds)),
            exclude_replid=m.master_replid,
        )
    if m.role is Role.REPLICA:
        return _resume(nodes, master)
    return _converge(nodes, name, None)


def switchover(observations: Sequence[NodeObservation], recorded: ClusterState, to: str) -> Plan:
    """A planned handover of the recorded master to replica ``to`` (``FAILOVER TO``, Redis >= 6.2)."""
    nodes = _index(observations)
    if recorded.current_master == to:
        return Plan()
    master = nodes.get(recorded.current_master or "")
    target = nodes.get(to)
    if master is None or master.role is not Role.MASTER or not master.reachable:
        return _wait(f"switchover to {to}: the recorded master is not serving")
    r = target.redis if target is not None and target.reachable else None
    if target is None or r is None or not target.follows(master) or not r.master_link_up:
        return _wait(f"switchover to {to}: it is not an in-sync replica of {master.pod}")
    if master.redis is None or (target.ip, target.port) not in master.redis.online_replicas:
        return _wait(f"switchover to {to}: {master.pod} does not list it online yet")
    if r.replica_priority == 0 or target.terminating:
        return _wait(f"switchover to {to}: it may not become master")
    return _resume(nodes, target, recorded.master_epoch + 1)


def _best_in_sync(
    master: NodeObservation,
    policy: Policy,
    among: Iterable[NodeObservation],
) -> NodeObservation | None:
    """The best replica among ``among`` that follows ``master`` with its link up (None: none yet)."""
    in_sync = [n for n in among if n.follows(master) and n.redis is not None and n.redis.master_link_up]
    return choose_failover_candidate([*in_sync, master], master.pod, policy)


def scale_down_victims(
    observations: Sequence[NodeObservation], recorded: ClusterState, replicas: int, policy: Policy
) -> ScaleDown:
    """The pods a StatefulSet scale-in to ``replicas`` removes (highest ordinals first).

    The master is never removed: when it is among them, ``fail_over_first`` is set and
    ``failover_to`` names the best surviving replica (None when none is eligible yet).
    """
    if replicas < 1:
        raise ValueError("a RedisCluster keeps at least one pod (its master)")
    nodes = _index(observations)
    victims = tuple(n.pod for n in sorted(nodes.values(), key=lambda n: -n.ordinal) if n.ordinal >= replicas)
    if recorded.current_master not in victims:
        return ScaleDown(victims)
    master = nodes[recorded.current_master]
    best = _best_in_sync(master, policy, (n for n in nodes.values() if n.ordinal < replicas))
    return ScaleDown(victims, True, best.pod if best is not None else None)


def evacuate(observations: Sequence[NodeObservation], recorded: ClusterState, policy: Policy) -> Plan | None:
    """A planned switchover off a master whose pod is terminating (drain, eviction, rolling update).

    None unless the recorded master's pod is terminating and its Redis still answers as master
    (whatever the pod's readiness): a terminating master that stopped serving is a failover for
    :func:`plan`. Otherwise the best in-sync replica whose pod is not terminating takes over
    through :func:`switchover` (``FAILOVER TO``: writes pause while it catches up, none is lost),
    or the plan waits for one — the pod's preStop hook keeps the master serving meanwhile, for a
    bounded time. A replica on another node than the master's is preferred to one beside it: a
    drain evicts every pod of the node, so the master handed to its neighbour would be handed over
    a second time a moment later.
    """
    nodes = _index(observations)
    master = nodes.get(recorded.current_master or "")
    if master is None or not master.terminating or not master.reachable or master.role is not Role.MASTER:
        return None
    elsewhere = [n for n in nodes.values() if master.node is None or n.node != master.node]
    best = _best_in_sync(master, policy, elsewhere) or _best_in_sync(master, policy, nodes.values())
    if best is None:
        return _wait(f"master {master.pod} is terminating; no in-sync replica to hand it over to yet")
    return switchover(observations, recorded, best.pod)


def fenced_master_handover(
    observations: Sequence[NodeObservation], recorded: ClusterState, policy: Policy
) -> Plan | None:
    """A planned switchover off a recorded master that is fenced (None when it is not fenced).

    The best in-sync replica that is not fenced takes over through :func:`switchover`
    (``FAILOVER TO``: no acknowledged write is lost), or the plan waits for one; meanwhile the
    master keeps serving (and its label: fencing never leaves the cluster without a master).
    """
    master = recorded.current_master
    if master is None or master not in policy.fenced:
        return None
    nodes = _index(observations)
    m = nodes.get(master)
    if m is None or not m.reachable or m.role is not Role.MASTER:
        return None  # not serving: plan() fails it over (never to a fenced pod)
    best = _best_in_sync(m, policy, nodes.values())
    if best is None:
        return _wait(
            f"master {master} is fenced; no in-sync replica that is not fenced to hand it over to yet"
        )
    return switchover(observations, recorded, best.pod)


def fence(
    the_plan: Plan,
    observations: Sequence[NodeObservation],
    master: str | None,
    fenced_label: str,
    fenced: frozenset[str],
) -> Plan:
    """``the_plan`` with the fenced pods' labels: a fenced pod other than ``master`` wears
    ``fenced_label`` instead of the replica label (first, before any Redis command: it leaves the
    Services at once). A fenced master keeps its label until it is handed over."""
    nodes = _index(observations)
    actions: list[Action] = []
    for action in the_plan.actions:
        if isinstance(action, SetLabel) and action.pod in fenced and action.role is Role.REPLICA:
            if nodes[action.pod].label != fenced_label:
                actions.append(SetLabel(action.pod, fenced_label))
            continue
        actions.append(action)
    relabelled = {a.pod for a in actions if isinstance(a, SetLabel)}
    first = [
        SetLabel(n.pod, fenced_label)
        for n in nodes.values()
        if n.pod in fenced and n.pod != master and n.pod not in relabelled and n.label != fenced_label
    ]
    return Plan((*first, *actions), reason=the_plan.reason)
