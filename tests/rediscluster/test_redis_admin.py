"""redis_admin against real redis-server processes (plus INFO parsing on captured text)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
from dataclasses import replace

import pytest
import redis.asyncio as aioredis
import redis.exceptions

from examples.rediscluster.replication.topology_types import Role
from examples.rediscluster.shared import redis_admin
from examples.rediscluster.shared.redis_admin import RedisCommandError, RedisConnection, RedisUnavailable
from examples.rediscluster.shared.security.users import OPERATOR_RULES, OPERATOR_USER
from pyctrl.testing import eventually
from tests.rediscluster._harness import link_up
from tests.rediscluster._servers import RedisServer, RedisServers, free_port

SECRET = "s3cr3t-Pa55word-xyz"


async def replicate(replica: RedisServer, master: RedisServer) -> None:
    await replica.admin().replica_of(master.admin())
    await eventually(lambda: link_up(replica), within=10.0, what=f"{replica.name} link up")


# --- INFO parsing (pure) -------------------------------------------------------------------------

REPLICA_NEVER_SYNCED = """# Server\r
run_id:3ad2dbc6dc77edcf86d7e84247cb535f332863c1\r
uptime_in_seconds:12\r
# Persistence\r
loading:0\r
# Replication\r
role:slave\r
master_host:10.0.0.1\r
master_port:6379\r
master_link_status:down\r
slave_read_repl_offset:1\r
slave_repl_offset:1\r
master_link_down_since_seconds:-1\r
slave_priority:10\r
connected_slaves:0\r
master_failover_state:no-failover\r
master_replid:1234000000000000000000000000000000000000\r
master_replid2:0000000000000000000000000000000000000000\r
master_repl_offset:0\r
# Keyspace\r
db0:keys=3,expires=0,avg_ttl=0\r
db5:keys=4,expires=1,avg_ttl=10\r
"""


def test_parse_facts_of_a_replica_that_never_synced() -> None:
    facts = redis_admin.parse_facts(redis_admin.parse_info(REPLICA_NEVER_SYNCED))
    assert facts.role is Role.REPLICA
    assert (facts.master_host, facts.master_port, facts.master_link_up) == ("10.0.0.1", 6379, False)
    assert facts.master_link_down_since_seconds == math.inf
    assert facts.master_replid == "1234000000000000000000000000000000000000"  # digits stay a string
    assert (facts.slave_repl_offset, facts.replica_priority, facts.keys) == (1, 10, 7)
    assert (facts.uptime_seconds, facts.loading) == (12, False)


def test_parse_facts_of_a_master() -> None:
    text = "role:master\nconnected_slaves:2\nmaster_repl_offset:99\nloading:1\n"
    text += "master_failover_state:waiting-for-sync\n"
    text += "slave0:ip=10.0.0.2,port=6379,state=online,offset=99,lag=0\n"
    text += "slave1:ip=10.0.0.3,port=6380,state=wait_bgsave,offset=0,lag=0\n"
    facts = redis_admin.parse_facts(redis_admin.parse_info(text))
    assert facts.role is Role.MASTER
    assert (facts.master_host, facts.slave_repl_offset, facts.offset) == (None, None, 99)
    assert (facts.connected_replicas, facts.loading, facts.keys) == (2, True, 0)
    assert facts.failover_state == "waiting-for-sync"
    assert facts.online_replicas == {("10.0.0.2", 6379)}


def _monitoring(server: RedisServer) -> bool:
    with server.client() as c:
        return any("O" in str(client["flags"]) for client in c.client_list())


def _connections(server: RedisServer) -> int:
    """How many connections ``server`` has accepted, this one included."""
    with server.client() as c:
        return int(c.info("stats")["total_connections_received"])


async def _listed_online(master: RedisServer, replica: tuple[str, int]) -> bool:
    return replica in (await master.admin().observe()).online_replicas


# --- real servers --------------------------------------------------------------------------------


async def test_observe_parses_master_and_replica_roles(redis_servers: RedisServers) -> None:
    m, r = redis_servers.start(2)
    await replicate(r, m)
    master = await m.admin().observe()
    replica = await r.admin().observe()
    assert master.role is Role.MASTER
    assert master.connected_replicas == 1
    assert len(master.run_id) == 40
    assert replica.role is Role.REPLICA
    assert (replica.master_host, replica.master_port) == (m.host, m.port)
    assert replica.master_link_up
    assert replica.master_link_down_since_seconds is None
    assert replica.master_replid == master.master_replid
    assert replica.replica_priority == 100
    assert replica.slave_repl_offset is not None
    assert replica.run_id != master.run_id
    await eventually(
        lambda: _listed_online(m, (r.host, r.port)), within=10.0, what="the master to list its replica online"
    )


async def test_replica_of_syncs_and_writes_replicate(redis_servers: RedisServers) -> None:
    m, r = redis_servers.start(2)
    with m.client() as c:
        c.set("before", "1")
    await replicate(r, m)
    with m.client() as c:
        for i in range(50):
            c.set(f"k{i}", i)
        assert c.execute_command("WAIT", 1, 1000) == 1
    with r.client() as c:
        assert c.get("before") == "1"
        assert c.get("k49") == "49"
    facts = await r.admin().observe()
    assert facts.keys == 51
    assert facts.offset == (await m.admin().observe()).offset


async def test_promote_makes_a_replica_master_and_keeps_its_lineage(redis_servers: RedisServers) -> None:
    m, r = redis_servers.start(2)
    await replicate(r, m)
    old_replid = (await m.admin().observe()).master_replid
    await r.admin().promote()
    facts = await r.admin().observe()
    assert facts.role is Role.MASTER
    assert facts.master_replid2 == old_replid
    with r.client() as c:
        assert c.set("writable", "yes")


async def test_failover_to_hands_the_master_over_without_losing_writes(redis_servers: RedisServers) -> None:
    m, r = redis_servers.start(2)
    await replicate(r, m)
    with m.client() as c:
        for i in range(100):
            c.set(f"k{i}", i)
    # FAILOVER refuses a target the master does not list online yet (topology waits for that too)
    await eventually(
        lambda: _listed_online(m, (r.host, r.port)), within=10.0, what="the replica online at the master"
    )
    await m.admin().failover_to(r.admin())

    async def handed_over() -> bool:
        new, old = await r.admin().observe(), await m.admin().observe()
        return new.role is Role.MASTER and old.role is Role.REPLICA and old.failover_state == "no-failover"

    await eventually(handed_over, within=10.0, what="FAILOVER TO to finish")
    assert await m.admin().failover_state() == "no-failover"
    old = await m.admin().observe()
    assert (old.master_host, old.master_port) == (r.host, r.port)
    with r.client() as c:
        assert c.dbsize() == 100


async def test_failover_to_pauses_writes_checks_the_target_offset_then_forces_the_handover(
    redis_servers: RedisServers,
) -> None:
    """The master runs CLIENT PAUSE WRITE, FAILOVER and CLIENT UNPAUSE once each; MONITOR shows no
    write executed from the pause on (the FAILOVER ... FORCE is sent only once the target has
    processed the frozen offset, so Redis need not wait for the replica's once-a-second ACK); the
    handover polls each server on one connection (a connection per poll lengthened the pause
    under load); and every write a concurrent writer had acknowledged is on the new master."""
    m, r = redis_servers.start(2)
    await replicate(r, m)
    await eventually(
        lambda: _listed_online(m, (r.host, r.port)), within=10.0, what="the replica online at the master"
    )
    seen: list[str] = []
    acked: list[int] = []

    async def monitor() -> None:
        client = aioredis.Redis(host=m.host, port=m.port, decode_responses=True)
        async with client, client.monitor() as mon:
            while True:
                seen.append(str((await mon.next_command())["command"]))

    async def write() -> None:
        async with aioredis.Redis(host=m.host, port=m.port, decode_responses=True) as c:
            for i in itertools.count():
                try:
                    await c.set(f"w{i}", i)
                except redis.exceptions.ReadOnlyError:
                    return  # the old master is a replica now
                acked.append(i)

    watcher = asyncio.create_task(monitor())
    await eventually(lambda: _monitoring(m), within=10.0, what="MONITOR on")
    writer = asyncio.create_task(write())
    try:
        await eventually(lambda: len(acked) >= 50, within=10.0, what="writes flowing")
        before = {"master": _connections(m), "target": _connections(r)}
        await m.admin().failover_to(r.admin())
        # after - before - 1: the reading connection of ``after`` itself counts too
        opened = {
            "master": _connections(m) - before["master"] - 1,
            "target": _connections(r) - before["target"] - 1,
        }
        await asyncio.wait_for(writer, timeout=10.0)
        await eventually(lambda: "INFO replication" in seen, within=10.0, what="the pause's INFO seen")
    finally:
        for task in (watcher, writer):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, redis.exceptions.RedisError):
                await task
    # MONITOR hides admin commands (CLIENT PAUSE, FAILOVER): the INFO sent with the pause marks it
    paused_at = seen.index("INFO replication")
    assert not [c for c in seen[paused_at:] if c.startswith("SET")]
    with m.client() as c:
        stats = c.info("commandstats")
    assert {k: stats[f"cmdstat_{k}"]["calls"] for k in ("client|pause", "failover", "client|unpause")} == {
        "client|pause": 1,
        "failover": 1,
        "client|unpause": 1,
    }
    assert opened == {"master": 1, "target": 2}  # the target's: the handover's and the old master's link
    assert (await r.admin().observe()).role is Role.MASTER
    with r.client() as c:
        assert c.mget([f"w{i}" for i in acked]) == [str(i) for i in acked]


async def test_the_operators_acl_user_may_run_every_command_of_a_switchover_and_a_failover(
    redis_servers: RedisServers,
) -> None:
    """With spec.users the operator logs in as its own ACL user (users.OPERATOR_RULES): the planned
    switchover (CLIENT PAUSE, INFO, FAILOVER, CLIENT UNPAUSE), the promotion and the re-pointing
    must all be allowed to it — a command missing from its rules fails the handover with NOPERM."""
    m, r = redis_servers.start(2)
    for server in (m, r):
        with server.client() as c:
            c.execute_command("ACL", "SETUSER", OPERATOR_USER, "on", ">operator-pw", *OPERATOR_RULES.split())

    def as_operator(server: RedisServer) -> RedisConnection:
        return replace(server.admin(), username=OPERATOR_USER, password="operator-pw")

    await as_operator(r).replica_of(as_operator(m))
    await eventually(
        lambda: _listed_online(m, (r.host, r.port)), within=10.0, what="the replica online at the master"
    )
    await as_operator(m).failover_to(as_operator(r))  # planned switchover: m -> r
    assert (await as_operator(r).observe()).role is Role.MASTER
    await eventually(lambda: link_up(m), within=10.0, what="the old master replicating the new one")
    await as_operator(m).promote()  # a crash failover's promotion, then r re-pointed at it
    await as_operator(r).replica_of(as_operator(m))
    assert (await as_operator(m).observe()).role is Role.MASTER


async def test_bgsave_is_started_then_tracked_without_blocking(redis_servers: RedisServers) -> None:
    (s,) = redis_servers.start(1)
    with s.client() as c:
        c.mset({f"k{i}": i for i in range(3000)})
        c.config_set("rdb-key-save-delay", 1000)  # a ~3 s save: still running when bgsave returns
    before = await s.admin().bgsave_status()
    assert not before.in_progress
    assert before.changes_since_last_save == 3000
    assert await s.admin().bgsave() is True
    # returned at once: the save it started is still running
    assert await s.admin().bgsave() is False  # already running: nothing new started
    assert (await s.admin().bgsave_status()).in_progress

    async def done() -> bool:
        return not (await s.admin().bgsave_status()).in_progress

    await eventually(done, within=30.0, what="BGSAVE to finish")
    after = await s.admin().bgsave_status()
    assert after.last_status == "ok"
    assert after.changes_since_last_save == 0
    assert after.last_save_time >= before.last_save_time
    assert (s.dir / "dump.rdb").stat().st_size > 0


async def test_configure_sets_min_replicas_to_write(redis_servers: RedisServers) -> None:
    (s,) = redis_servers.start(1)
    await s.admin().configure({"min-replicas-to-write": 1, "min-replicas-max-lag": 10})
    with s.client() as c, pytest.raises(Exception, match="NOREPLICAS"):
        c.set("k", "v")
    with pytest.raises(RedisCommandError, match="CONFIG SET no-such-setting was refused"):
        await s.admin().configure({"no-such-setting": "1"})


async def test_nothing_listening_is_unavailable_fast() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(RedisUnavailable, match=f"127.0.0.1:{port}"):
        await RedisConnection("127.0.0.1", port, io_timeout=0.5).observe()
    assert time.monotonic() - started < 3.0  # refused at once; the bound only catches a retry loop


async def test_a_hung_server_times_out_within_the_bound(redis_servers: RedisServers) -> None:
    (s,) = redis_servers.start(1)
    s.sigstop()  # the fixture resumes it in teardown
    hung = s.admin(io_timeout=0.3)
    for call in (hung.observe, hung.ping, hung.promote):
        started = time.monotonic()
        with pytest.raises(RedisUnavailable):
            await call()
        # connect + one command, each bounded by io_timeout, plus slack for a loaded machine;
        # without the timeouts the call would hang as long as the server does
        assert time.monotonic() - started < 2 * 0.3 + 2.0


async def test_auth_works_and_the_password_never_appears_in_errors(redis_servers: RedisServers) -> None:
    m, r = redis_servers.start(2, password=SECRET)  # requirepass + masterauth
    await replicate(r, m)  # the replica authenticates to its master with masterauth
    assert (await RedisConnection(r.host, r.port, SECRET).observe()).master_link_up
    await m.admin().ping()

    errors: list[Exception] = []
    for password in (None, "wrong-" + SECRET, SECRET + "-wrong"):
        with pytest.raises(RedisCommandError) as caught:
            await RedisConnection(m.host, m.port, password).observe()
        errors.append(caught.value)
    r.sigstop()
    with pytest.raises(RedisUnavailable) as hung:
        await r.admin(io_timeout=0.2).replica_of(m.admin())
    errors.append(hung.value)
    with pytest.raises(RedisUnavailable) as refused:
        await RedisConnection("127.0.0.1", free_port(), SECRET).promote()
    errors.append(refused.value)
    with pytest.raises(RedisCommandError) as config:
        await RedisConnection(m.host, m.port, "wrong-" + SECRET).configure({"masterauth": 5})
    errors.append(config.value)
    for error in errors:
        assert SECRET not in str(error)
        assert SECRET not in repr(error)
        assert error.__cause__ is None
        assert error.__context__ is None or error.__suppress_context__


def test_a_connection_value_never_shows_its_password() -> None:
    conn = RedisConnection("127.0.0.1", 6379, SECRET, io_timeout=0.5)
    assert SECRET not in repr(conn)
    assert SECRET not in str(conn)
    assert "127.0.0.1" in repr(conn)
    assert conn == RedisConnection("127.0.0.1", 6379, SECRET, io_timeout=0.5)  # a value: compares by fields
