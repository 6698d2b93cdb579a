"""Redis Cluster admin commands of the operator (redis.asyncio), with ``redis_admin``'s guarantees.

Each call takes a ``redis_admin.RedisConnection`` (address, password, io_timeout), opens one
connection, runs its commands and closes it (``redis_admin._call``: connect/socket timeouts, the
whole call cut off at ``2 * io_timeout + 0.5`` s, no retries), and raises
``redis_admin.RedisUnavailable`` / ``RedisCommandError`` (never with the password in the
message). What each wraps:

- :func:`cluster_facts`: ``CLUSTER NODES`` + ``CLUSTER INFO`` + ``DBSIZE`` + ``INFO persistence``
  parsed into ``nodes.NodeFacts``;
- :func:`meet` ``CLUSTER MEET ip port``; :func:`add_slots` ``CLUSTER ADDSLOTSRANGE`` (Redis >= 7);
  :func:`replicate` ``CLUSTER REPLICATE id``; :func:`forget` ``CLUSTER FORGET id`` (an unknown
  node is not an error: forgetting is idempotent); :func:`takeover` ``CLUSTER FAILOVER
  TAKEOVER``; :func:`failover` a planned ``CLUSTER FAILOVER``, polled until done;
  :func:`reset_soft` ``CLUSTER RESET SOFT``.
"""

from __future__ import annotations

import asyncio

from examples.rediscluster.cluster.nodes import NodeFacts, parse_cluster_info, parse_cluster_nodes
from examples.rediscluster.cluster.slots import ranges
from examples.rediscluster.shared.redis_admin import RedisCommandError, RedisConnection, _call, parse_info

__all__ = ["add_slots", "cluster_facts", "failover", "forget", "meet", "replicate", "reset_soft", "takeover"]


async def cluster_facts(conn: RedisConnection) -> NodeFacts:
    """What this node says about the cluster (``RedisCommandError`` if cluster mode is off)."""
    nodes, info, dbsize, persistence = await _call(
        conn,
        ("CLUSTER", "NODES"),
        ("CLUSTER", "INFO"),
        ("DBSIZE",),
        ("INFO", "persistence", "replication"),
    )
    fields = parse_info(str(persistence))
    try:
        me, peers, migrating, importing = parse_cluster_nodes(str(nodes))
    except ValueError as exc:
        raise RedisCommandError(conn.host, conn.port, f"CLUSTER NODES: {exc}") from None
    return NodeFacts(
        node_id=me,
        peers=peers,
        migrating=migrating,
        importing=importing,
        cluster_state=parse_cluster_info(str(info)).get("cluster_state", "fail"),
        keys=int(dbsize),
        loading=fields.get("loading") == "1",
        repl_offset=int(fields.get("slave_repl_offset", fields.get("master_repl_offset", "0"))),
        master_link_up=fields.get("master_link_status") == "up",
    )


async def failover(conn: RedisConnection, within: float) -> None:
    """Planned ``CLUSTER FAILOVER`` (neither FORCE nor TAKEOVER) on a replica: its master stops its
    clients until the replica has its whole offset, then the replica is elected with the master's
    agreement. Returns once the node reports itself a master serving slots; ``RedisCommandError``
    when it does not within ``within`` seconds (its master stays master: nothing to undo)."""
    await _call(conn, ("CLUSTER", "FAILOVER"))
    deadline = asyncio.get_running_loop().time() + within
    while True:
        facts = await cluster_facts(conn)
        if facts.me.is_master and facts.me.slots:
            return
        if asyncio.get_running_loop().time() >= deadline:
            raise RedisCommandError(conn.host, conn.port, f"CLUSTER FAILOVER not done after {within:.0f}s")
        await asyncio.sleep(0.1)  # polling interval while the election runs


async def takeover(conn: RedisConnection) -> None:
    """``CLUSTER FAILOVER TAKEOVER`` on a replica: it claims its master's slots without agreement."""
    await _call(conn, ("CLUSTER", "FAILOVER", "TAKEOVER"))


async def reset_soft(conn: RedisConnection) -> None:
    """``CLUSTER RESET SOFT``: a replica becomes an empty master knowing no other node."""
    await _call(conn, ("CLUSTER", "RESET", "SOFT"))


async def meet(conn: RedisConnection, peer_ip: str, peer_port: int) -> None:
    await _call(conn, ("CLUSTER", "MEET", peer_ip, peer_port))


async def add_slots(conn: RedisConnection, slots: tuple[int, ...]) -> None:
    bounds = [b for a, z in ranges(slots) for b in (a, z)]
    await _call(conn, ("CLUSTER", "ADDSLOTSRANGE", *bounds))


async def replicate(conn: RedisConnection, master_id: str) -> None:
    await _call(conn, ("CLUSTER", "REPLICATE", master_id))


async def forget(conn: RedisConnection, node_id: str) -> None:
    try:
        await _call(conn, ("CLUSTER", "FORGET", node_id))
    except RedisCommandError as exc:
        if "Unknown node" not in str(exc):
            raise
