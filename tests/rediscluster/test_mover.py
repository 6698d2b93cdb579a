"""The background slot mover (``cluster.mover``) against three real cluster-mode redis-servers, no
Kubernetes: every slot and key of a transfer ends on the target with nothing left open, a repeat
is a no-op, and a group of slots shares each step's round trip (Redis's own read counter); and
``outdated``, the pure check that makes the reconcile cancel a job a failover or restart
overtook."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from examples.rediscluster.cluster.mover import Endpoint, Job, SlotMover, Transfer, outdated
from examples.rediscluster.cluster.nodes import NodeFacts, PeerView, parse_cluster_nodes
from examples.rediscluster.cluster.plan_types import Member
from examples.rediscluster.shared.redis_admin import RedisAccess
from pyctrl.envtest import poll_until
from pyctrl.testing import eventually
from tests.rediscluster._servers import RedisServer, RedisServers, free_port

KEY = ("ns", "c")


def _cmd(server: RedisServer, *args: object) -> object:
    with server.client() as c:
        return c.execute_command(*args)


@pytest.fixture
def masters(redis_servers: RedisServers) -> list[RedisServer]:
    """Three met masters: 0-9999 on the first, 10000-16383 on the second, none on the third."""
    servers, bus_ports = [], []
    for _ in range(3):
        bus_ports.append(free_port())  # the default, port + 10000, may be past 65535
        extra = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
        servers += redis_servers.start(1, extra=(*extra, "--cluster-port", str(bus_ports[-1])))
    _cmd(servers[0], "CLUSTER", "ADDSLOTSRANGE", 0, 9999)
    _cmd(servers[1], "CLUSTER", "ADDSLOTSRANGE", 10000, 16383)
    for s, bus in zip(servers[1:], bus_ports[1:], strict=True):
        _cmd(servers[0], "CLUSTER", "MEET", s.host, s.port, bus)

    def formed() -> bool:
        return all(
            "cluster_state:ok" in (info := str(_cmd(s, "CLUSTER", "INFO")))
            and "cluster_known_nodes:3" in info
            for s in servers
        )

    poll_until("the three masters to know each other", formed, 30, interval=0.1)
    return servers


def endpoint(server: RedisServer) -> Endpoint:
    return Endpoint(server.host, server.port, str(_cmd(server, "CLUSTER", "MYID")))


def write(server: RedisServer, data: dict[str, str]) -> None:
    with server.client() as client:
        pipe = client.pipeline(transaction=False)  # one SET per key: MSET would span slots
        for k, v in data.items():
            pipe.set(k, v)
        pipe.execute()


def read(server: RedisServer, keys: list[str]) -> dict[str, str | None]:
    with server.client() as client:
        pipe = client.pipeline(transaction=False)
        for k in keys:
            pipe.get(k)
        return dict(zip(keys, pipe.execute(), strict=True))


def reads(server: RedisServer) -> int:
    """Client reads the server processed so far (``total_reads_processed``; this INFO is one)."""
    with server.client() as c:
        return int(c.info("stats")["total_reads_processed"])


def owners(server: RedisServer) -> tuple[dict[int, str], set[int]]:
    """(slot -> owner id, open slots) in ``server``'s view."""
    _, peers, migrating, importing = parse_cluster_nodes(str(_cmd(server, "CLUSTER", "NODES")))
    owned = {slot: p.node_id for p in peers.values() for slot in p.slots}
    return owned, set(migrating) | set(importing)


async def test_a_transfer_moves_every_slot_and_key_sharing_round_trips_across_a_group_of_slots(
    masters: list[RedisServer],
) -> None:
    a, b, c = masters
    slots = tuple(range(300))
    data = {f"k{i}": f"v{i}" for i in range(4000) if key_slot(f"k{i}".encode()) < 300}
    tag = next(f"t{i}" for i in range(10000) if key_slot(f"t{i}".encode()) < 300)
    data |= {f"{{{tag}}}:{i}": str(i) for i in range(25)}  # one slot holding 2.5 batches of keys
    write(a, data)
    notified: list[tuple[str, str]] = []
    mover = SlotMover(notified.append, batch=10, group=64)
    src, dst = endpoint(a), endpoint(c)
    job = Job("resharding to 3 shards", (Transfer(src, dst, slots),), (src, endpoint(b), dst))
    before = reads(a), reads(c)
    assert mover.submit(KEY, job, RedisAccess())
    assert not mover.submit(KEY, job, RedisAccess())  # one job per cluster at a time
    await eventually(lambda: notified == [KEY], within=60, what="the job to end")
    after = reads(a), reads(c)
    progress = mover.progress(KEY)
    assert progress is not None
    assert progress.finished
    assert not mover.running(KEY)
    assert (progress.slots_done, progress.keys_moved, progress.errors) == (300, len(data), 0)
    # each step is one pipeline per group of 64: about 6 round trips a group, where one slot at a
    # time needs at least 3 reads on the source (MIGRATING, GETKEYSINSLOT, NODE) and 2 on the target
    print(f"reads for {len(slots)} slots: source {after[0] - before[0]}, target {after[1] - before[1]}")
    assert after[0] - before[0] < len(slots), (before, after)
    assert after[1] - before[1] < len(slots), (before, after)
    with c.client() as client:
        assert client.dbsize() == len(data)
    assert read(c, list(data)) == data
    with a.client() as client:
        assert client.dbsize() == 0
    for server in (a, c):  # the two sides were told; the third master learns it (SETSLOT or gossip)
        owned, open_slots = owners(server)
        assert open_slots == set()
        assert {owned[s] for s in slots} == {dst.node_id}
        assert owned[300] == src.node_id

    def b_agrees() -> bool:
        owned, open_slots = owners(b)
        return not open_slots and {owned[s] for s in slots} == {dst.node_id}

    await eventually(b_agrees, within=30, what="the third master to see the new owner")
    # the same job again (a repeat after a crash): every step is skipped or finds nothing to do
    assert mover.submit(KEY, job, RedisAccess())
    await eventually(lambda: notified == [KEY, KEY], within=60, what="the repeated job to end")
    repeat = mover.progress(KEY)
    assert repeat is not None
    assert (repeat.slots_done, repeat.keys_moved, repeat.errors) == (300, 0, 0)
    with c.client() as client:
        assert client.dbsize() == len(data)
    await mover.stop()


async def test_a_failing_step_is_retried_for_its_group_and_counted_losing_nothing(
    masters: list[RedisServer],
) -> None:
    a, b, c = masters
    slots = tuple(range(40))
    data = {f"k{i}": f"v{i}" for i in range(1000) if key_slot(f"k{i}".encode()) < 40}
    write(a, data)
    _cmd(c, "CONFIG", "SET", "maxmemory-policy", "noeviction")
    _cmd(c, "CONFIG", "SET", "maxmemory", "1")  # the target refuses every key: MIGRATE gets -OOM
    notified: list[tuple[str, str]] = []
    mover = SlotMover(notified.append, group=16)
    src, dst = endpoint(a), endpoint(c)
    mover.submit(KEY, Job("resharding", (Transfer(src, dst, slots),), (src, endpoint(b), dst)), RedisAccess())
    try:

        def failing() -> bool:
            p = mover.progress(KEY)
            return p is not None and p.errors >= 2 and "OOM" in (p.last_error or "")

        await eventually(failing, within=30, what="the OOM to be retried and reported")
        progress = mover.progress(KEY)
        assert progress is not None
        assert progress.slots_done == 0
        assert mover.running(KEY)
        _cmd(c, "CONFIG", "SET", "maxmemory", "0")
        await eventually(lambda: notified == [KEY], within=60, what="the job to end once MIGRATE works")
    finally:
        await mover.stop()
    assert (progress.slots_done, progress.keys_moved) == (40, len(data))
    assert read(c, list(data)) == data
    with a.client() as client:
        assert client.dbsize() == 0
    assert owners(a)[1] == owners(c)[1] == set()


@pytest.mark.parametrize(("batch", "group"), [(0, 64), (1000, 0)])
def test_a_batch_or_group_below_one_is_refused(batch: int, group: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        SlotMover(lambda key: None, batch=batch, group=group)


A, B, C = "A" * 40, "B" * 40, "C" * 40  # node IDs


def _member(ordinal: int, node_id: str | None, slots: range = range(0), *, master: bool = True) -> Member:
    """Pod ``m-<ordinal>`` at 10.0.0.<ordinal>; ``node_id`` None: it does not answer."""
    ip = f"10.0.0.{ordinal}"
    facts = None
    if node_id is not None:
        me = PeerView(
            node_id,
            ip,
            6379,
            frozenset({"myself", "master" if master else "slave"}),
            None if master else "other",
            0,
            True,
            frozenset(slots),
        )
        facts = NodeFacts(node_id, {node_id: me})
    return Member(f"m-{ordinal}", ordinal, ip, 6379, True, facts=facts)


def _job() -> Job:
    """Slots 0-9 from node A (m-0) to node C (m-2); m-1 (node B) serves 10-16383."""
    a, b, c = (Endpoint(f"10.0.0.{i}", 6379, n) for i, n in enumerate((A, B, C)))
    return Job("resharding to 3 shards", (Transfer(a, c, tuple(range(10))),), (a, b, c))


@pytest.mark.parametrize(
    ("members", "why"),
    [
        # half moved, every node where the job expects it: the job goes on
        (
            [_member(0, A, range(5, 10)), _member(1, B, range(10, 100)), _member(2, C)],
            None,
        ),
        # the source does not answer (a slow or restarting pod): the mover's retries wait for it
        ([_member(0, None), _member(1, B, range(10, 100)), _member(2, C)], None),
        # the source failed over and answers as a replica
        (
            [_member(0, A, master=False), _member(1, B), _member(2, C)],
            "is a replica now",
        ),
        # the source is down and another master (its replica, elected) serves the unmoved slots
        (
            [_member(0, None), _member(1, B, range(5, 100)), _member(2, C)],
            "serves 5 of the slots",
        ),
        # the source's pod came back as a new node
        ([_member(0, "D" * 40, range(5, 10)), _member(1, B), _member(2, C)], "no pod's node"),
        # the target's pod restarted with its nodes.conf at a new address
        ([_member(0, A), _member(1, B), _member(9, C)], "answers at 10.0.0.9:6379"),
    ],
)
def test_a_running_job_is_outdated_once_a_failover_or_restart_changed_its_source_or_target(
    members: list[Member], why: str | None
) -> None:
    reason = outdated(_job(), members)
    if why is None:
        assert reason is None
    else:
        assert reason is not None
        assert why in reason
