"""What one Redis Cluster node says about the cluster: ``CLUSTER NODES`` and ``CLUSTER INFO`` parsed.

Frozen data and pure parsing, no I/O (the admin layer, ``cluster.admin``, fetches the text).
``CLUSTER NODES`` lines are ``<id> <ip:port@cport[,hostname]> <flags> <master|-> <ping-sent>
<pong-recv> <config-epoch> <link-state> <slot> ...``; slot entries are ``a-b`` or ``a``, and on the
``myself`` line also ``[s->-<id>]`` (MIGRATING to id) and ``[s-<-<id>]`` (IMPORTING from id).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["NodeFacts", "PeerView", "parse_cluster_info", "parse_cluster_nodes"]


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
    slots: frozenset[int] = frozenset()

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


def _slot_token(token: str, slots: set[int], migrating: dict[int, str], importing: dict[int, str]) -> None:
    if token.startswith("["):
        body = token.strip("[]")
        if "->-" in body:
            slot, _, target = body.partition("->-")
            migrating[int(slot)] = target
        elif "-<-" in body:
            slot, _, source = body.partition("-<-")
            importing[int(slot)] = source
        return
    first, _, last = token.partition("-")
    slots.update(range(int(first), int(last or first) + 1))


def parse_cluster_nodes(text: str) -> tuple[str, dict[str, PeerView], dict[int, str], dict[int, str]]:
    """(my id, id -> view, migrating, importing) from a ``CLUSTER NODES`` reply."""
    me, peers = "", {}
    migrating: dict[int, str] = {}
    importing: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        node_id, addr, flags = parts[0], parts[1], frozenset(parts[2].split(","))
        hostport = addr.split("@", 1)[0].split(",", 1)[0]
        ip, _, port = hostport.rpartition(":")
        slots: set[int] = set()
        mine_m: dict[int, str] = {}
        mine_i: dict[int, str] = {}
        for token in parts[8:]:
            _slot_token(token, slots, mine_m, mine_i)
        if "myself" in flags:
            me, migrating, importing = node_id, mine_m, mine_i
        peers[node_id] = PeerView(
            node_id=node_id,
            ip=ip,
            port=int(port) if port.isdigit() else 0,
            flags=flags,
            master_id=None if parts[3] == "-" else parts[3],
            config_epoch=int(parts[6]) if parts[6].isdigit() else 0,
            connected=parts[7] == "connected",
            slots=frozenset(slots),
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
