"""What one Redis Cluster node says about the cluster: ``CLUSTER NODES`` and ``CLUSTER INFO`` parsed.

Frozen data and pure parsing, no I/O (the admin layer, ``cluster.admin``, fetches the text).
``CLUSTER NODES`` lines are ``<id> <ip:port@cport[,hostname]> <flags> <master|-> <ping-sent>
<pong-recv> <config-epoch> <link-state> <slot> ...``; slot entries are ``a-b`` or ``a``, and on the
``myself`` line also ``[s->-<id>]`` (MIGRATING to id) and ``[s-<-<id>]`` (IMPORTING from id).

A reply is bounded before it is believed (a node may run a hostile image): at most
:data:`MAX_NODES` lines and :data:`MAX_REPLY_CHARS` characters, every slot within ``0 .. 16383``,
at most 16384 slots over all lines together (Redis 7 lists each slot under its one owner) and at
most 16384 slot entries; ids of at most 40 characters. Anything else is ``ValueError`` naming
what was exceeded. Slots are held as runs (:class:`~examples.rediscluster.cluster.slots.SlotSet`),
and ids, addresses and flag sets are interned, so the operator's memory for the views of a
600-pod cluster stays in tens of MiB (``benchmarks/slot_views_bench.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from examples.rediscluster.cluster.slots import EMPTY_SLOTS, SLOTS, SlotSet

__all__ = [
    "MAX_NODES",
    "MAX_REPLY_CHARS",
    "NodeFacts",
    "PeerView",
    "parse_cluster_info",
    "parse_cluster_nodes",
]

#: Redis Cluster's design limit is about 1000 nodes; a reply listing more is refused.
MAX_NODES = 1000
#: A reply longer than this is refused (a 1000-node reply with 16384 single-slot entries is ~0.3 M).
MAX_REPLY_CHARS = 4_000_000
_ID_CHARS = 40  # CLUSTER_NAMELEN


@dataclass(frozen=True, slots=True)
class PeerView:
    """One line of ``CLUSTER NODES``: a node as the observer sees it."""

    node_id: str
    ip: str
    port: int
    flags: frozenset[str]
    master_id: str | None
    config_epoch: int
    connected: bool
    #: Any set of slots may be given; it is held as a :class:`SlotSet` (runs).
    slots: AbstractSet[int] = EMPTY_SLOTS

    def __post_init__(self) -> None:
        if not isinstance(self.slots, SlotSet):
            object.__setattr__(self, "slots", SlotSet(self.slots) if self.slots else EMPTY_SLOTS)

    @property
    def is_master(self) -> bool:
        return "master" in self.flags

    @property
    def is_replica(self) -> bool:
        return "slave" in self.flags

    @property
    def failing(self) -> bool:
        """FAIL or PFAIL (``fail?``) in the observer's view, or without an address."""
        return bool(self.flags & {"fail", "fail?", "noaddr"})

    @property
    def handshake(self) -> bool:
        return "handshake" in self.flags


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What one node answered: its view of every node (itself included) and its open slots."""

    node_id: str
    peers: Mapping[str, PeerView]
    migrating: Mapping[int, str] = field(default_factory=dict)  # slot -> target node id
    importing: Mapping[int, str] = field(default_factory=dict)  # slot -> source node id
    cluster_state: str = "fail"
    keys: int = 0
    loading: bool = False
    repl_offset: int = 0  # processed replication offset (slave_repl_offset, or master_repl_offset)
    master_link_up: bool = False  # a replica's ``master_link_status:up`` (INFO replication)

    @property
    def me(self) -> PeerView:
        return self.peers[self.node_id]

    def find(self, ip: str, port: int) -> PeerView | None:
        """The (non-handshake) node this observer knows at ``ip:port``."""
        return next(
            (p for p in self.peers.values() if (p.ip, p.port) == (ip, port) and not p.handshake), None
        )


def _slot_number(text: str) -> int:
    if not text.isdigit() or int(text) >= SLOTS:
        raise ValueError(f"CLUSTER NODES reply has slot {text[:20]!r} outside 0 .. {SLOTS - 1}")
    return int(text)


def _node_id(text: str) -> str:
    if not 0 < len(text) <= _ID_CHARS:
        raise ValueError(f"CLUSTER NODES reply has a node id of {len(text)} characters (at most {_ID_CHARS})")
    return sys.intern(text)


def _slot_token(
    token: str, runs: list[tuple[int, int]], migrating: dict[int, str], importing: dict[int, str]
) -> None:
    if token.startswith("["):
        body = token.strip("[]")
        if "->-" in body:
            slot, _, target = body.partition("->-")
            migrating[_slot_number(slot)] = _node_id(target)
        elif "-<-" in body:
            slot, _, source = body.partition("-<-")
            importing[_slot_number(slot)] = _node_id(source)
        return
    first, _, last = token.partition("-")
    runs.append((_slot_number(first), _slot_number(last or first)))


_FLAGS: dict[str, frozenset[str]] = {}  # interned flag sets: a handful of distinct ones


def _flags(text: str) -> frozenset[str]:
    found = _FLAGS.get(text)
    if found is None:
        if len(_FLAGS) >= 256 or len(text) > 200:  # bounded: a hostile reply cannot grow it
            return frozenset(text.split(","))
        found = _FLAGS[sys.intern(text)] = frozenset(sys.intern(f) for f in text.split(","))
    return found


def parse_cluster_nodes(text: str) -> tuple[str, dict[str, PeerView], dict[int, str], dict[int, str]]:
    """(my id, id -> view, migrating, importing) from a ``CLUSTER NODES`` reply; ValueError for a
    reply past the bounds of the module docstring."""
    if len(text) > MAX_REPLY_CHARS:
        raise ValueError(f"CLUSTER NODES reply of {len(text)} characters (at most {MAX_REPLY_CHARS})")
    lines = text.splitlines()
    if len(lines) > MAX_NODES:
        raise ValueError(f"CLUSTER NODES reply lists {len(lines)} nodes (at most {MAX_NODES})")
    me, peers = "", {}
    migrating: dict[int, str] = {}
    importing: dict[int, str] = {}
    total_slots = total_entries = 0
    for line in lines:
        parts = line.split()
        if len(parts) < 8:
            continue
        total_entries += len(parts) - 8
        if total_entries > SLOTS:
            raise ValueError(f"CLUSTER NODES reply has more than {SLOTS} slot entries")
        node_id, addr, flags = _node_id(parts[0]), parts[1], _flags(parts[2])
        hostport = addr.split("@", 1)[0].split(",", 1)[0]
        ip, _, port = hostport.rpartition(":")
        runs: list[tuple[int, int]] = []
        mine_m: dict[int, str] = {}
        mine_i: dict[int, str] = {}
        for token in parts[8:]:
            _slot_token(token, runs, mine_m, mine_i)
        slots = SlotSet.from_runs(runs) if runs else EMPTY_SLOTS
        total_slots += len(slots)
        if total_slots > SLOTS:
            raise ValueError(f"CLUSTER NODES reply assigns more than {SLOTS} slots")
        if "myself" in flags:
            me, migrating, importing = node_id, mine_m, mine_i
        peers[node_id] = PeerView(
            node_id=node_id,
            ip=sys.intern(ip[:255]),
            port=int(port) if port.isdigit() and len(port) <= 5 else 0,
            flags=flags,
            master_id=None if parts[3] == "-" else _node_id(parts[3]),
            config_epoch=int(parts[6]) if parts[6].isdigit() and len(parts[6]) <= 20 else 0,
            connected=parts[7] == "connected",
            slots=slots,
        )
    if not me:
        raise ValueError("CLUSTER NODES reply has no myself line")
    return me, peers, migrating, importing


def parse_cluster_info(text: str) -> dict[str, str]:
    """``field:value`` lines of ``CLUSTER INFO``."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out
