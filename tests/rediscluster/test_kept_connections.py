"""The prober's kept connections (redis_admin.KeptConnection and the HealthProber's pool), on real
redis-server processes: probes reuse one connection per pod, a restarted Redis costs no failed
probe, a hung one still fails within the bound, and every kept connection is closed when its pod
or cluster goes, when the pool is full no more are kept, and on stop."""

from __future__ import annotations

import asyncio

import pytest

from examples.rediscluster.replication.prober import ClusterKey, HealthProber
from examples.rediscluster.shared.redis_admin import KeptConnection, RedisUnavailable
from pyctrl.testing import eventually
from tests.rediscluster._servers import RedisServer, RedisServers

KEY: ClusterKey = ("ns", "cache")
OTHER: ClusterKey = ("ns", "other")


def connections_received(server: RedisServer) -> int:
    with server.client() as c:
        return int(c.info("stats")["total_connections_received"])


def clients(server: RedisServer) -> int:
    """Clients connected to ``server``, not counting the one asking."""
    with server.client() as c:
        return int(c.info("clients")["connected_clients"]) - 1


async def _true(value: bool) -> bool:
    return value


async def test_pings_reuse_one_connection_and_survive_a_restart(redis_servers: RedisServers) -> None:
    (server,) = redis_servers.start(1, password="s3cret-kept")
    kept = KeptConnection(server.admin(0.5))
    try:
        before = connections_received(server)
        for _ in range(20):
            await kept.ping()
        assert connections_received(server) - before == 2  # 20 PINGs: the kept connection, and this check's
        server.shutdown_nosave()
        server.start()  # same port: the kept connection is stale
        await kept.ping()  # retried once on a fresh connection: no failed probe
        assert kept.open
    finally:
        await kept.aclose()
    assert not kept.open
    with pytest.raises(RedisUnavailable, match="closed"):
        await kept.ping()  # closed for good: opens nothing


async def test_a_hung_redis_fails_within_the_bound_and_the_connection_is_dropped(
    redis_servers: RedisServers,
) -> None:
    (server,) = redis_servers.start(1)
    kept = KeptConnection(server.admin(0.2))
    try:
        await kept.ping()
        server.sigstop()
        with pytest.raises(RedisUnavailable):
            await asyncio.wait_for(kept.ping(), 2 * 0.2 + 0.5 + 5)  # 5 s slack for a loaded machine
        assert not kept.open  # the next probe starts on a fresh connection
        server.sigcont()
        await kept.ping()
    finally:
        await kept.aclose()


async def test_the_prober_keeps_one_connection_per_pod_and_closes_them_when_pods_go(
    redis_servers: RedisServers,
) -> None:
    a, b, c = redis_servers.start(3)
    prober = HealthProber(lambda _: None, interval=0.02, max_kept=2)
    endpoints = {"rc-0": a.admin(0.5), "rc-1": b.admin(0.5)}
    prober.watch(KEY, endpoints, master="rc-0", down_after=5)
    prober.watch(OTHER, {"other-0": c.admin(0.5)}, master="other-0", down_after=5)
    await prober.start()
    try:
        await eventually(lambda: _true(prober.kept_connections == 2), within=10, what="two kept")
        first = {s.name: connections_received(s) for s in (a, b, c)}
        await eventually(
            lambda: _true(prober.last_valid_reply(OTHER, "other-0") is not None),
            within=10,
            what="the third pod answering",
        )
        probed = prober.last_valid_reply(KEY, "rc-0")
        await eventually(
            lambda: _true(prober.last_valid_reply(KEY, "rc-0") != probed), within=10, what="more probes"
        )
        # the pool is full (max_kept=2): the third pod's probes open a connection each; the kept
        # pods' probes opened none
        grew = {s.name: connections_received(s) - first[s.name] for s in (a, b, c)}
        assert grew[a.name] == grew[b.name] == 1, grew  # only the counting client's
        assert grew[c.name] > 1, grew
        assert clients(a) == clients(b) == 1

        prober.watch(KEY, {"rc-0": a.admin(0.5)}, master="rc-0", down_after=5)  # rc-1 left
        await eventually(lambda: _true(clients(b) == 0), within=10, what="rc-1's connection closed")
        prober.forget(KEY)  # deleted, or handed to another replica
        await eventually(lambda: _true(clients(a) == 0), within=10, what="the cluster's connections closed")
        assert prober.probed == {OTHER}
        await eventually(lambda: _true(prober.kept_connections == 1), within=10, what="other-0 kept now")
        assert clients(c) == 1
    finally:
        await prober.stop()
    assert prober.kept_connections == 0
    assert clients(c) == 0  # closed by stop(), before it returned
