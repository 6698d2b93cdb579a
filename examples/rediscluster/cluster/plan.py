"""Redis Cluster topology decisions (``spec.mode: cluster``): pure functions and frozen data, no I/O.

The reconcile observes every pod (Kubernetes facts plus ``CLUSTER NODES``/``CLUSTER INFO`` of its
node), calls :func:`plan`, and carries out the actions in order (``cluster.admin`` for Redis,
the pod patch for labels, ``cluster.mover`` for slot moves in the background). Mirrors what
``redis-cli --cluster create``/``fix``/``rebalance``/``del-node`` decide, as level-triggered rules:

1. **Open slots first.** A slot some node has MIGRATING or IMPORTING (an operator or node crash
   mid-move) gets :class:`MoveSlots` from its owner to the flagged node, and nothing else is done
   to the cluster first: the move is idempotent (what ``--cluster fix`` does when both sides
   agree), so finishing it is always safe.
2. **Meet.** The lowest-ordinal reachable pod (the seed) meets every pod it does not know at the
   pod's *current* IP; once the seed knows all, other nodes meet what they miss. A full restart
   with new IPs is thus re-introduced by node ID (kept in ``nodes.conf``).
3. **Slots nobody serves** go to the master of the shard that last held them (``status.shards``)
   or else of the even layout, with ADDSLOTSRANGE — only while every pod answers (a node we cannot
   ask might claim them) and no slot is claimed by a node outside the pods (its replica may still
   win the election).
4. **Replicas.** Shard ``i`` is the pods with ordinals ``i*(1+r) .. i*(1+r)+r``. Its master is the
   pod serving its slots; only a shard that never had slots gets its lowest ordinal as master.
   Every other pod of the shard replicates that master (CLUSTER REPLICATE). While a shard's slots
   are held by a failing node that a pod replicates, nothing is decided for it: Redis Cluster's
   own election (``cluster-node-timeout`` = ``downAfterMilliseconds``) picks the new master, so a
   returning old master — empty or not — is never made the master; it becomes a replica. The one
   case Redis cannot detect — the old master's pod came back *without data as a new node* at the
   same address, leaving the old ID ``noaddr`` and never FAIL — is a :class:`Takeover` by the
   shard's most up-to-date replica, once every pod answers and none carries the old ID.
   A shard none of whose pods holds its data any more (every pod a fenced replica: see
   ``cluster.resources``) gets its first pod back as an empty master with :class:`Reset`.
5. **Forget** nodes no pod is any more (a pod restarted without persistence comes back with a new
   ID), once they fail and serve no slot — or serve slots no pod can take over (a shard without
   replicas: its slots then go back to the shard's pod by rule 3). Departing shards (scale-in)
   are forgotten once they serve no slot; only then does :attr:`Plan.statefulset_replicas` drop.
6. **Rebalance** (``slots.rebalance``): once every pod answers, every slot is served and every
   shard has a master, :class:`MoveSlots` until each shard holds 16384/N ± 1 — each move only
   once its target's view gives the source the slots the source serves (a node learns a peer's
   slots from its pings, not from the MEET, and an IMPORTING node stops updating the slot's
   owner: importing before it knew would leave the slot unbound there, MIGRATE answered
   ``CLUSTERDOWN Hash slot not served`` for ever).

Role and shard labels follow what Redis reports. Same observations, same plan; a converged cluster
gives an empty plan. The vocabulary (:class:`Member`, the actions, :class:`Plan`) is in
``cluster.plan_types``, re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from examples.rediscluster.cluster.plan_types import (
    Action,
    AddSlots,
    Forget,
    Meet,
    Member,
    MoveSlots,
    Plan,
    Replicate,
    Reset,
    SetLabels,
    Takeover,
    Wait,
)
from examples.rediscluster.cluster.slots import SLOTS, even_layout, pods_for, rebalance, shard_of

__all__ = ["plan"]


@dataclass
class _Cluster:
    members: list[Member]
    shards: int
    replicas_per_shard: int

    def shard(self, m: Member) -> int:
        return shard_of(m.ordinal, self.replicas_per_shard)

    def of_shard(self, shard: int) -> list[Member]:
        return [m for m in self.members if self.shard(m) == shard]

    @property
    def staying(self) -> list[Member]:
        return [m for m in self.members if self.shard(m) < self.shards]

    @property
    def reachable(self) -> list[Member]:
        return [m for m in self.members if m.reachable]

    def by_id(self, node_id: str) -> Member | None:
        return next((m for m in self.members if m.node_id == node_id), None)

    @property
    def all_answer(self) -> bool:
        return all(m.reachable for m in self.members)


def _labels(c: _Cluster) -> list[Action]:
    out: list[Action] = []
    for m in c.members:
        if not m.reachable:
            continue
        role = "master" if m.is_master else "replica"
        if (m.role_label, m.shard_label) != (role, str(c.shard(m))):
            out.append(SetLabels(m.pod, role, c.shard(m)))
    return out


def _open_slots(c: _Cluster) -> list[Action]:
    """Rule 1: finish every move left open (MIGRATING on the owner or IMPORTING on the target)."""
    moves: dict[tuple[str, str], set[int]] = {}
    waits: list[Action] = []
    for m in c.reachable:
        assert m.facts is not None
        flagged: list[tuple[int, Member | None, Member | None]]
        flagged = [(s, m, c.by_id(t)) for s, t in m.facts.migrating.items()]
        flagged += [(s, c.by_id(src), m) for s, src in m.facts.importing.items()]
        for slot, source, target in flagged:
            owner = next((o for o in c.reachable if slot in o.slots), None)
            if owner is None or target is None or not target.reachable:
                waits.append(Wait(f"slot {slot} is open; waiting for its owner and target to answer"))
                continue
            if owner is target:  # already moved: close the flags left on the old owner
                owner = source if source is not None and source.reachable else owner
            moves.setdefault((owner.pod, target.pod), set()).add(slot)
    actions: list[Action] = [
        MoveSlots(s, t, tuple(sorted(v)), repair=True) for (s, t), v in sorted(moves.items())
    ]
    return actions or waits


def _knows(observer: Member, m: Member) -> bool:
    assert observer.facts is not None
    assert m.node_id is not None
    view = observer.facts.peers.get(m.node_id)
    return view is not None and (view.ip, view.port) == (m.ip, m.port)


def _meet(c: _Cluster) -> list[Action]:
    """Rule 2."""
    joining = [(m, m.ip) for m in c.staying if m.reachable and m.ip is not None]
    if not joining:
        return []
    seed = min((m for m, _ in joining), key=lambda m: m.ordinal)
    out: list[Action] = [
        Meet(seed.pod, ip, m.port) for m, ip in joining if m is not seed and not _knows(seed, m)
    ]
    if out:
        return out
    for o, _ in joining:
        out += [Meet(o.pod, ip, m.port) for m, ip in joining if m is not o and not _knows(o, m)]
    return out


def _foreign_claims(c: _Cluster) -> dict[int, str]:
    """Slots that some reachable node's view gives to a node that no pod is (slot -> node id)."""
    ids = {m.node_id for m in c.members if m.node_id}
    out: dict[int, str] = {}
    for m in c.reachable:
        assert m.facts is not None
        for peer in m.facts.peers.values():
            if peer.node_id not in ids and peer.is_master:
                out.update(dict.fromkeys(peer.slots, peer.node_id))
    return out


def _followed(c: _Cluster, node_id: str) -> bool:
    """Some pod replicates ``node_id`` (it may win the election for that node's slots)."""
    return any(m.facts is not None and m.facts.me.master_id == node_id for m in c.reachable)


def _slot_holders(c: _Cluster) -> set[str]:
    """IDs of nodes no pod is that some view still gives slots to (their replicas may take over)."""
    return set(_foreign_claims(c).values())


def _master_of(c: _Cluster, shard: int) -> Member | None:
    """Rule 4: the pod serving the shard's slots; else, when every pod of the shard answers and
    none replicates a node outside the pods that still holds slots (an election or a takeover is
    due), the slot-less master the shard's pods follow, or its lowest-ordinal one; else None."""
    pods = c.of_shard(shard)
    serving = [m for m in pods if m.reachable and m.is_master and m.slots]
    if serving:
        return min(serving, key=lambda m: (-len(m.slots), m.ordinal))
    if not pods or not all(m.reachable for m in pods):
        return None
    followed = [m.facts.me.master_id or "" for m in pods if m.facts is not None and m.facts.me.master_id]
    if set(followed) & _slot_holders(c):
        return None
    masters = [m for m in pods if m.is_master]
    return min(masters, key=lambda m: (-followed.count(m.node_id or ""), m.ordinal), default=None)


def _reset(c: _Cluster) -> list[Action]:
    """Rule 4c: a shard whose every pod is a fenced replica (restarted without data; see
    ``cluster.resources``) and none of which can take over (no copy of its slots survived:
    ``replicasPerShard: 0`` or every pod lost its data) gets its first pod back as an empty master
    (``CLUSTER RESET SOFT``), so the slots are served again, empty."""
    if not c.all_answer:
        return []
    holders = _slot_holders(c)
    ids = {m.node_id for m in c.members}
    out: list[Action] = []
    for shard in range(c.shards):
        pods = c.of_shard(shard)
        if not pods or any(m.is_master for m in pods):
            continue
        masters = [m.facts.me.master_id for m in pods if m.facts is not None]
        if all(x is not None and x not in ids and x not in holders for x in masters):
            out.append(Reset(pods[0].pod))
    return out


def _claimed(c: _Cluster) -> set[int]:
    """Slots any node claims or any reachable node's view assigns."""
    out: set[int] = set()
    for m in c.members:
        out.update(m.slots)
        if m.facts is not None:
            for peer in m.facts.peers.values():
                out.update(peer.slots)
    return out


def _assign(c: _Cluster, recorded: Mapping[int, Iterable[int]]) -> list[Action]:
    """Rule 3."""
    free = set(range(SLOTS)) - _claimed(c)
    if not free:
        return []
    if not c.all_answer:
        return [Wait(f"{len(free)} slots unassigned; waiting for every pod to answer")]
    home = {slot: shard for shard, slots in recorded.items() if shard < c.shards for slot in slots}
    for shard, layout in enumerate(even_layout(c.shards)):
        for slot in layout:
            home.setdefault(slot, shard)
    per_pod: dict[str, list[int]] = {}
    for slot in sorted(free):
        master = _master_of(c, home[slot])
        if master is None:
            return [Wait(f"shard {home[slot]} has no master to take its unassigned slots yet")]
        per_pod.setdefault(master.pod, []).append(slot)
    return [AddSlots(pod, tuple(slots)) for pod, slots in sorted(per_pod.items())]


def _replicate(c: _Cluster) -> list[Action]:
    """Rule 4."""
    out: list[Action] = []
    for shard in range(max([c.shards, *(c.shard(m) + 1 for m in c.members)])):
        master = _master_of(c, shard)
        if master is None or master.node_id is None:
            continue
        for m in c.of_shard(shard):
            if m is master or not m.reachable or m.slots:
                continue
            assert m.facts is not None
            if m.facts.me.master_id != master.node_id and master.node_id in m.facts.peers:
                out.append(Replicate(m.pod, master.node_id))
    return out


def _takeover(c: _Cluster) -> list[Action]:
    """Rule 4b: a shard whose slots are held by a node that no pod is any more (every pod answers,
    none has its ID: its pod restarted without data and came back as a new node) while some of
    its pods replicate that node. Redis Cluster cannot fail it over by itself: the new node
    answers at the old address, so the old ID is only ``noaddr``, never probed, never FAIL. The
    operator knows it is gone for good and lets the most up-to-date replica take over."""
    if not c.all_answer:
        return []
    foreign = set(_foreign_claims(c).values())
    out: list[Action] = []
    for shard in range(c.shards):
        if any(m.is_master and m.slots for m in c.of_shard(shard)):
            continue
        followers = [m for m in c.of_shard(shard) if m.facts is not None and m.facts.me.master_id in foreign]
        if followers:
            best = max(followers, key=lambda m: (m.facts.repl_offset if m.facts else 0, -m.ordinal))
            assert best.facts is not None
            out.append(Takeover(best.pod, best.facts.me.master_id or ""))
    return out


def _forget(c: _Cluster) -> list[Action]:
    """Rule 5 (every pod must answer: only then is a node that no pod is known to be gone)."""
    if not c.all_answer:
        return []
    departing = {m.node_id for m in c.members if c.shard(m) >= c.shards and m.node_id}
    ids = {m.node_id for m in c.members if m.node_id}
    foreign = _foreign_claims(c)
    out: list[Action] = []
    for m in c.staying:
        assert m.facts is not None
        for peer in m.facts.peers.values():
            if peer.node_id in (m.node_id, m.facts.me.master_id):
                continue
            if peer.node_id in departing:  # once no departing node serves a slot
                gone = not any(o.slots for o in c.members if o.node_id in departing)
            elif peer.node_id not in ids:
                owns = any(s for s, n in foreign.items() if n == peer.node_id)
                gone = peer.failing and (not owns or not _followed(c, peer.node_id))
            else:
                continue
            if gone:
                out.append(Forget(m.pod, peer.node_id))
    return out


def _rebalance(c: _Cluster) -> list[Action]:
    """Rule 6."""
    if not c.all_answer:
        return []
    owned: dict[int, set[int]] = {}
    pod_of: dict[int, Member] = {}
    for m in c.members:
        if m.is_master and m.slots:
            owned.setdefault(c.shard(m), set()).update(m.slots)
            pod_of[c.shard(m)] = m
    for shard in range(c.shards):
        master = _master_of(c, shard)
        if master is None:
            return [Wait(f"shard {shard} has no master yet")]
        pod_of.setdefault(shard, master)
        owned.setdefault(shard, set())
    grouped: dict[tuple[int, int], list[int]] = {}
    for move in rebalance(owned, c.shards):
        grouped.setdefault((move.source, move.target), []).append(move.slot)
    for src, dst in grouped:  # an IMPORTING node stops learning the slot's owner: it must know it
        source, target = pod_of[src], pod_of[dst]
        assert target.facts is not None
        view = target.facts.peers.get(source.node_id or "")
        if view is None or view.slots != source.slots:
            return [Wait(f"{target.pod} does not know the slots {source.pod} serves yet")]
    return [
        MoveSlots(pod_of[src].pod, pod_of[dst].pod, tuple(slots))
        for (src, dst), slots in sorted(grouped.items())
    ]


def _statefulset_replicas(c: _Cluster) -> int:
    want = pods_for(c.shards, c.replicas_per_shard)
    leaving = [m for m in c.members if c.shard(m) >= c.shards]
    if not leaving:
        return want
    ids = {m.node_id for m in leaving}
    still_known = any(
        m.facts is None
        or m.slots
        or any(o.facts is not None and m.node_id in o.facts.peers for o in c.staying)
        for m in leaving
    )
    if still_known or not ids:
        return max(want, max(m.ordinal for m in c.members) + 1)
    return want


def plan(
    members: Sequence[Member],
    shards: int,
    replicas_per_shard: int,
    *,
    recorded: Mapping[int, Iterable[int]] | None = None,
) -> Plan:
    """The ordered actions that take the observed cluster towards ``shards`` balanced shards.

    ``recorded``: shard index -> slots it served when status was last written (where slots that
    nobody serves any more go back to)."""
    names = [m.pod for m in members]
    if len(set(names)) != len(names):
        raise ValueError("a pod observed twice")
    c = _Cluster(sorted(members, key=lambda m: m.ordinal), shards, replicas_per_shard)
    labels = _labels(c)
    for rule in (
        _open_slots,
        _meet,
        _takeover,
        _forget,
        _reset,
        lambda c: _assign(c, recorded or {}),
        _replicate,
        _rebalance,
    ):
        actions = rule(c)
        if actions:
            return Plan((*labels, *actions), _statefulset_replicas(c))
    return Plan(tuple(labels), _statefulset_replicas(c))
