"""End to end on real redis-server processes: observe -> plan -> carry out, as the reconcile will.

Each server plays pod ``rc-<i>``; labels live in a dict; the HealthProber runs with a real PING.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from examples.rediscluster.api import RedisClusterSpec
from examples.rediscluster.replication.prober import ClusterKey, HealthProber
from examples.rediscluster.replication.topology import plan, scale_down_victims, switchover
from examples.rediscluster.replication.topology_types import (
    ClusterState,
    Demote,
    Plan,
    Policy,
    Promote,
    RecordMaster,
    ReplicaOf,
    Role,
    SetLabel,
    Switchover,
    Wait,
)
from examples.rediscluster.shared.resources import redis_conf
from pyctrl.testing import eventually
from tests.rediscluster._harness import execute, link_up, observe_all
from tests.rediscluster._servers import RedisServer, RedisServers, free_port

POLICY = Policy(down_after=1.0)
KEY: ClusterKey = ("ns", "rc")
M, R = Role.MASTER, Role.REPLICA


async def converge(
    servers: Sequence[RedisServer], recorded: ClusterState, labels: dict[str, str], p: Plan | None = None
) -> ClusterState:
    """Carry out plans (starting with ``p`` if given) until one is empty; Wait means observe again."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if p is None:
            p = plan(await observe_all(servers, labels), recorded, POLICY)
        if p.converged:
            return recorded
        if isinstance(p.actions[0], Wait):
            await asyncio.sleep(0.05)  # polling the observed state, with the deadline above
        recorded = await execute(p, servers, recorded, labels)
        p = None
    raise AssertionError(f"no convergence within 15 s; last plan {p}")


async def switch_over(
    servers: Sequence[RedisServer], recorded: ClusterState, labels: dict[str, str], to: str
) -> ClusterState:
    """Plan a switchover to ``to`` until it may start (target online at the master), carry it out."""
    planned = Plan()

    async def possible() -> bool:
        nonlocal planned
        planned = switchover(await observe_all(servers, labels), recorded, to)
        return not planned.actions or not isinstance(planned.actions[0], Wait)

    await eventually(possible, within=10.0, what=f"a switchover to {to} to be possible")
    assert planned.actions[0] == RecordMaster(to, recorded.master_epoch + 1)
    assert Switchover(recorded.current_master or "", to) in planned.actions
    return await converge(servers, recorded, labels, planned)


async def all_in_sync(replicas: Sequence[RedisServer]) -> bool:
    return all(await asyncio.gather(*(link_up(r) for r in replicas)))


def write_acknowledged(server: RedisServer, n: int, replicas: int, prefix: str = "k") -> list[str]:
    """Write n keys on ``server``, each followed by WAIT; return the keys WAIT acknowledged."""
    acked = []
    with server.client() as c:
        for i in range(n):
            c.set(f"{prefix}{i}", i)
            if c.execute_command("WAIT", replicas, 1000) >= replicas:
                acked.append(f"{prefix}{i}")
    return acked


def missing(server: RedisServer, keys: list[str]) -> list[str]:
    with server.client() as c:
        return [k for k, v in zip(keys, c.mget(keys), strict=True) if v is None]


async def lagging_cluster(
    redis_servers: RedisServers,
) -> tuple[list[RedisServer], dict[str, str], ClusterState, list[str]]:
    """3 servers bootstrapped by plans; rc-1 misses 200 writes that rc-2 acknowledged (WAIT 1)."""
    servers = redis_servers.start(3)
    s0, s1, s2 = servers
    labels: dict[str, str] = {}
    recorded = await converge(servers, ClusterState(), labels)
    assert recorded == ClusterState("rc-0", 1)
    assert labels == {"rc-0": "master", "rc-1": "replica", "rc-2": "replica"}
    await eventually(lambda: all_in_sync([s1, s2]), within=10.0, what="replicas in sync")
    # rc-1 falls behind: stopped with its replication link cut, it sees none of the next writes.
    s1.sigstop()
    with s0.client() as c:
        c.client_kill_filter(_type="replica")
    await eventually(lambda: link_up(s2), within=10.0, what="rc-2 to reconnect")
    acked = write_acknowledged(s0, 200, 1)
    assert len(acked) == 200
    return servers, labels, recorded, acked


async def test_failover_promotes_the_most_advanced_replica_and_loses_no_acknowledged_write(
    redis_servers: RedisServers,
) -> None:
    servers, labels, recorded, acked = await lagging_cluster(redis_servers)
    s0, s1, s2 = servers
    prober = HealthProber(lambda key: None, interval=0.05)
    endpoints = {f"rc-{i}": s.admin(io_timeout=0.2) for i, s in enumerate(servers)}
    prober.watch(KEY, endpoints, master="rc-0", down_after=POLICY.down_after)
    await prober.start()
    try:
        await eventually(
            lambda: _true(prober.last_valid_reply(KEY, "rc-0") is not None), within=10.0, what="a first reply"
        )
        await asyncio.to_thread(s0.shutdown_nosave)  # off the loop: the prober keeps probing
        killed = time.monotonic()
        s1.sigcont()

        # Inside the window (a loaded machine may take longer than down-after to observe: the
        # prober's own figure is then capped to a moment inside it).
        inside = min(prober.master_unhealthy_for(KEY), POLICY.down_after / 2)
        early = plan(await observe_all(servers, labels), recorded, POLICY, master_unhealthy_for=inside)
        assert isinstance(early.actions[0], Wait), "no promotion inside the down-after window"

        await eventually(
            lambda: _true(prober.master_down(KEY)), within=10.0, what="the master to be declared down"
        )
        detected = time.monotonic() - killed
        observed = await observe_all(servers, labels)
        offsets = {n.pod: n.redis.offset for n in observed if n.redis}
        assert offsets["rc-2"] > offsets["rc-1"]
        started = time.perf_counter()
        decided = plan(observed, recorded, POLICY, master_unhealthy_for=prober.master_unhealthy_for(KEY))
        decision_ms = (time.perf_counter() - started) * 1000
        assert decided.actions == (
            RecordMaster("rc-2", 2),
            SetLabel("rc-0", R),
            Promote("rc-2"),
            ReplicaOf("rc-1", "rc-2"),
            SetLabel("rc-2", M),
        )
        started = time.perf_counter()
        recorded = await execute(decided, servers, recorded, labels)
        acting_ms = (time.perf_counter() - started) * 1000
        prober.watch(KEY, endpoints, master="rc-2", down_after=POLICY.down_after)
        assert (await s2.admin().observe()).role is Role.MASTER
        await eventually(lambda: link_up(s1), within=10.0, what="rc-1 to sync from rc-2")
        assert missing(s2, acked) == []
        assert missing(s1, acked) == []
        assert write_acknowledged(s2, 10, 1, prefix="after") == [f"after{i}" for i in range(10)]

        await asyncio.to_thread(s0.start)  # the old master returns: empty, and (as it boots) a master
        back = plan(await observe_all(servers, labels), recorded, POLICY)
        assert back.actions == (Demote("rc-0", "rc-2"),)
        recorded = await execute(back, servers, recorded, labels)
        await eventually(lambda: link_up(s0), within=10.0, what="rc-0 to sync from rc-2")
        assert plan(await observe_all(servers, labels), recorded, POLICY).converged
        assert missing(s0, acked) == []
        timing = f"plan {decision_ms:.2f} ms, promote+re-point {acting_ms:.1f} ms"
        print(f"\nfailover: down declared {detected:.2f}s after SHUTDOWN (down_after 1s); {timing}")
    finally:
        await prober.stop()


async def _true(value: bool) -> bool:
    return value


async def test_an_empty_restarted_master_is_not_a_sync_source(redis_servers: RedisServers) -> None:
    servers = redis_servers.start(3)
    s0, s1, s2 = servers
    labels: dict[str, str] = {}
    recorded = await converge(servers, ClusterState(), labels)
    await eventually(lambda: all_in_sync([s1, s2]), within=10.0, what="replicas in sync")
    acked = write_acknowledged(s0, 100, 2)
    assert len(acked) == 100

    s0.shutdown_nosave()
    s0.start(port=free_port())  # restarted empty, with a new address (a new pod IP)
    observed = await observe_all(servers, labels)
    assert observed[0].redis is not None
    assert observed[0].redis.keys == 0
    decided = plan(observed, recorded, POLICY)  # the master answers: no down window involved
    first = decided.actions[0]
    assert isinstance(first, RecordMaster)
    assert first.pod in {"rc-1", "rc-2"}
    assert Promote(first.pod) in decided.actions
    assert not [a for a in decided.actions if isinstance(a, ReplicaOf | Demote) and a.master == "rc-0"]
    recorded = await converge(servers, recorded, labels, decided)
    assert recorded == ClusterState(first.pod, 2)
    await eventually(
        lambda: all_in_sync([s for i, s in enumerate(servers) if f"rc-{i}" != first.pod]),
        within=10.0,
        what="everyone in sync",
    )
    for server in servers:
        assert missing(server, acked) == []


async def test_restart_between_record_and_promote_resumes_the_same_decision(
    redis_servers: RedisServers,
) -> None:
    servers = redis_servers.start(3)
    s0, s1, s2 = servers
    labels: dict[str, str] = {}
    recorded = await converge(servers, ClusterState(), labels)
    await eventually(lambda: all_in_sync([s1, s2]), within=10.0, what="replicas in sync")
    s0.shutdown_nosave()

    decided = plan(await observe_all(servers, labels), recorded, POLICY, master_unhealthy_for=60)
    record = decided.actions[0]
    assert isinstance(record, RecordMaster)
    recorded = await execute(Plan((record,)), servers, recorded, labels)  # then the operator dies

    # A new operator: no probe history (unhealthy 0), only the recorded decision in status.
    resumed = plan(await observe_all(servers, labels), recorded, POLICY)
    assert Promote(record.pod) in resumed.actions
    assert not [a for a in resumed.actions if isinstance(a, RecordMaster)]
    assert resumed == plan(await observe_all(servers, labels), recorded, POLICY)
    recorded = await converge(servers, recorded, labels, resumed)
    assert recorded == ClusterState(record.pod, 2)


async def test_scale_in_hands_the_master_over_before_removing_it(redis_servers: RedisServers) -> None:
    servers = redis_servers.start(3)
    s0, s1, s2 = servers
    labels: dict[str, str] = {}
    recorded = await converge(servers, ClusterState(), labels)
    await eventually(lambda: all_in_sync([s1, s2]), within=10.0, what="replicas in sync")
    # Move the master to the highest ordinal first, by a planned switchover.
    recorded = await switch_over(servers, recorded, labels, "rc-2")
    assert recorded == ClusterState("rc-2", 2)
    assert labels["rc-2"] == "master"
    await eventually(lambda: all_in_sync([s0, s1]), within=10.0, what="replicas in sync")
    acked = write_acknowledged(s2, 100, 2)
    assert len(acked) == 100

    decision = scale_down_victims(await observe_all(servers, labels), recorded, 2, POLICY)
    assert decision.victims == ("rc-2",)
    assert decision.fail_over_first
    assert decision.failover_to in {"rc-0", "rc-1"}
    recorded = await switch_over(servers, recorded, labels, decision.failover_to)
    assert recorded == ClusterState(decision.failover_to, 3)
    assert not scale_down_victims(await observe_all(servers, labels), recorded, 2, POLICY).fail_over_first
    assert missing(servers[int(decision.failover_to[-1])], acked) == []


def _operator_directives(name: str) -> tuple[str, ...]:
    """``--name value`` of a directive in the operator's redis.conf (persistence off, the default)."""
    lines = [line.split(" ", 1) for line in redis_conf(RedisClusterSpec()).splitlines()]
    return tuple(part for key, value in lines if key == name for part in (f"--{key}", value))


async def test_a_master_that_once_full_synced_as_a_replica_restarts_empty_not_with_that_stale_copy(
    redis_servers: RedisServers,
) -> None:
    """The crash the failover benchmark caught: rc-0 had been a replica (its full sync wrote
    dump.rdb), became master, took writes, crashed and restarted. With the operator's
    ``rdb-del-sync-files yes`` it restarts empty, so it is an empty restart and never a source."""
    servers = redis_servers.start(3, extra=_operator_directives("rdb-del-sync-files"))
    s0, s1, s2 = servers
    assert _operator_directives("rdb-del-sync-files") == ("--rdb-del-sync-files", "yes")
    with s1.client() as c:  # rc-1 is the first master; rc-0 full-syncs from it
        c.set("old", "1")
    with s0.client() as c:
        c.execute_command("REPLICAOF", *map(str, s1.address))
    await eventually(lambda: link_up(s0), within=10.0, what="rc-0 synced from rc-1")
    assert not (s0.dir / "dump.rdb").exists()  # the sync's RDB was deleted once loaded
    for s in (s0, s1, s2):
        with s.client() as c:
            c.execute_command("REPLICAOF", "NO", "ONE")
    labels: dict[str, str] = {}
    recorded = await converge(servers, ClusterState(), labels)
    assert recorded.current_master == "rc-0"
    await eventually(lambda: all_in_sync([s1, s2]), within=10.0, what="replicas in sync")
    acked = write_acknowledged(s0, 50, 2)
    s0.shutdown_nosave()
    # a new address: here nothing boots it fenced, so at the old one its replicas would resync at once
    s0.start(port=free_port())
    observed = await observe_all(servers, labels)
    assert observed[0].redis is not None
    assert observed[0].redis.keys == 0
    decided = plan(observed, recorded, POLICY)
    assert decided.actions[0] in (RecordMaster("rc-1", 2), RecordMaster("rc-2", 2))
    recorded = await converge(servers, recorded, labels, decided)
    await eventually(
        lambda: all_in_sync([s for i, s in enumerate(servers) if f"rc-{i}" != recorded.current_master]),
        within=10.0,
        what="everyone in sync with the new master",
    )
    for server in servers:
        assert missing(server, acked) == []
