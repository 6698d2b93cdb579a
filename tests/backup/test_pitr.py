"""Continuous AOF archiving (``backup.archive``) and restore to a second (``backup.pitr``) against a
real redis-server (multi-part AOF, ``#TS`` annotations), the archiver as its own process, the real
S3 store (versitygw on loopback) and ``redis-check-aof``. No Kubernetes."""

from __future__ import annotations

import hashlib
import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from examples.rediscluster.backup.aof import AppendOnlyFiles
from examples.rediscluster.backup.archive import (
    ArchivedFile,
    ArchiveStore,
    Segment,
    TimelineIndex,
    archive_prefix,
)
from examples.rediscluster.backup.pitr import PitrError, recoverable_ranges, restore_to_time
from pyctrl.envtest import poll_until
from pyctrl.envtest.objectstore import ObjectStore
from tests.backup._archiving import AOF_ARGS, CLUSTER, NAMESPACE, ArchiverProcess, Writer
from tests.backup.conftest import BUCKET
from tests.rediscluster._servers import RedisServer, RedisServers, free_port


def _archive(store: ObjectStore, monkeypatch: pytest.MonkeyPatch, prefix: str) -> ArchiveStore:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", store.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", store.secret_key)
    return ArchiveStore.connect(store.endpoint, BUCKET, archive_prefix(prefix, NAMESPACE, CLUSTER))


def _http_status(archiver: ArchiverProcess) -> dict[str, Any]:
    """``GET /status`` of the archiver; ``/metrics`` must carry the same lag."""
    base = f"http://127.0.0.1:{archiver.status_port}"
    with urllib.request.urlopen(f"{base}/status", timeout=10) as resp:
        status = dict(json.loads(resp.read()))
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    assert "rediscluster_archive_lag_seconds " in metrics
    assert "rediscluster_archive_last_archived_timestamp_seconds " in metrics
    return status


def _cut_last_segment_mid_command(store: ArchiveStore, timeline: str) -> None:
    """Drop the last 5 bytes of the last archived segment (a read that caught a partial write)."""
    index = store.read_index(timeline)
    assert index is not None
    seg = [f for f in index.files if f.kind == "incr"][-1].segments[-1]
    obj = store.object(seg.key)
    data = obj.client.get_object(Bucket=obj.bucket, Key=obj.key)["Body"].read()[:-5]
    obj.client.put_object(Bucket=obj.bucket, Key=obj.key, Body=data)
    seg.size, seg.sha256 = len(data), hashlib.sha256(data).hexdigest()
    store.write_index(index)


def _wait_until(moment: float) -> None:
    """Let the writer run until the wall clock reaches ``moment`` (time is what is under test)."""
    poll_until(f"the clock to reach {moment:.0f}", lambda: time.time() >= moment, 120, interval=0.1)


def _restored_keys(servers: RedisServers, aof_parent: Path) -> dict[int, str]:
    server = RedisServer("restored", aof_parent, extra=AOF_ARGS)
    servers.servers.append(server)
    server.start()
    client = server.client()
    found = {int(str(k).split(":")[1]): str(client.get(k)) for k in client.scan_iter("k:*", count=1000)}
    server.terminate()
    return found


def _check_cut(found: dict[int, str], writer: Writer, target: int) -> None:
    """Keys 0..m, no hole, each with its value; all acked by T-1 are in, none sent from T+1 on."""
    assert found, "nothing restored"
    last = max(found)
    assert sorted(found) == list(range(last + 1)), "the restored writes have a hole"
    for n, value in found.items():
        assert value == f"{writer.sent[n]:.6f}"
    acked_before = [n for n, t in enumerate(writer.acked) if t <= target - 1]
    assert acked_before
    assert max(acked_before) <= last, (max(acked_before), last)
    assert writer.sent[last] < target + 1, (writer.sent[last], target)
    assert last < len(writer.sent) - 1  # the cut is inside the writes, not after all of them


def _corrupt_one_and_fail(store: ArchiveStore, segments: list[Segment], target: int, parent: Path) -> None:
    """Flip a byte of one archived segment: the restore fails naming it and leaves nothing."""
    corrupt = segments[len(segments) // 2]
    obj = store.object(corrupt.key)
    data = bytearray(obj.client.get_object(Bucket=obj.bucket, Key=obj.key)["Body"].read())
    data[len(data) // 2] ^= 0xFF
    obj.client.put_object(Bucket=obj.bucket, Key=obj.key, Body=bytes(data))
    target_dir = parent / "appendonlydir"
    with pytest.raises(PitrError, match=re.escape(corrupt.key) + r": SHA-256 .*\(corrupt\)"):
        restore_to_time(store, target, AppendOnlyFiles(target_dir))
    assert not target_dir.exists()
    assert not (parent / "appendonlydir.pitr-partial").exists()


def _check_index(index: TimelineIndex) -> list[ArchivedFile]:
    """Base 1 first, base 2 from the rewrite; increment 1 closed, 2 being written, in segments."""
    bases = [f for f in index.files if f.kind == "base"]
    incr = [f for f in index.files if f.kind == "incr"]
    assert [b.seq for b in bases] == [1, 2]
    assert index.files[0] is bases[0]
    assert [f.seq for f in incr] == [1, 2]
    assert incr[0].closed
    assert not incr[1].closed
    assert len(incr[1].segments) > 1  # the file being written went in segments
    return incr


def test_writes_archived_across_a_rewrite_restore_to_a_second_and_a_corrupt_object_is_named(
    object_store: ObjectStore, redis_servers: RedisServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (server,) = redis_servers.start(1, extra=AOF_ARGS)
    archiver = ArchiverProcess(server.dir, object_store, BUCKET, prefix="rewrite/")
    writer = Writer(server.client())
    try:
        archiver.start()
        poll_until("the first base archived", lambda: bool(archiver.status().get("firstRecoverableTime")), 60)
        started = time.time()
        writer.start()
        _wait_until(started + 5)
        assert server.client().bgrewriteaof()
        poll_until(
            "the rewrite to finish",
            lambda: (
                server.client().info("persistence")["aof_rewrite_in_progress"] == 0
                and server.client().info("persistence")["aof_last_bgrewrite_status"] == "ok"
            ),
            60,
        )
        target = int(time.time()) + 3
        _wait_until(target + 4)
        writer.stop()
        poll_until("the archive to pass T+2", lambda: archiver.last_archived() >= target + 2, 60)
        assert archiver.process is not None
        cmdline = Path(f"/proc/{archiver.process.pid}/cmdline").read_bytes()
        archiver.stop()
    finally:
        writer.stop()
        archiver.stop()
    for secret in (object_store.secret_key, object_store.access_key):
        assert secret.encode() not in cmdline
        assert secret not in archiver.log_path.read_text()
        assert secret not in archiver.status_file.read_text()

    store = _archive(object_store, monkeypatch, "rewrite/")
    (index,) = recoverable_ranges(store)
    incr = _check_index(index)

    # through the newest base (2, written by the rewrite) and through the first one: the same cut
    for base_seq in (2, 1):
        out = tmp_path / f"restore-{base_seq}"
        result = restore_to_time(store, target, AppendOnlyFiles(out / "appendonlydir"), base_seq=base_seq)
        assert result.base.endswith(f"/base/{base_seq}.rdb")
        assert result.kept_bytes < result.replayed_bytes
        assert not result.fixed_tail
        _check_cut(_restored_keys(redis_servers, out), writer, target)

    first, last = index.first_recoverable_time, index.last_archived_time
    assert first is not None
    assert last is not None
    for outside in (first - 10, last + 10):
        with pytest.raises(PitrError, match=r"outside the recoverable range: timeline .* to "):
            restore_to_time(store, outside, AppendOnlyFiles(tmp_path / "refused" / "appendonlydir"))
    assert not (tmp_path / "refused").exists()

    # the last segment ending inside a command: the restore drops that partial command only
    _cut_last_segment_mid_command(store, index.timeline)
    partial = restore_to_time(store, last, AppendOnlyFiles(tmp_path / "partial" / "appendonlydir"))
    assert partial.fixed_tail
    found = _restored_keys(redis_servers, tmp_path / "partial")
    assert sorted(found) == list(range(max(found) + 1))
    assert max(found) >= max(n for n, t in enumerate(writer.acked) if t <= target + 1)

    _corrupt_one_and_fail(store, incr[1].segments, last, tmp_path / "corrupt")


def test_a_store_outage_is_reported_caught_up_and_a_restarted_archiver_resumes_its_timeline(
    redis_servers: RedisServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = ObjectStore(tmp_path / "s3")
    s3.start()
    (server,) = redis_servers.start(1, extra=AOF_ARGS)
    archiver = ArchiverProcess(server.dir, s3, BUCKET, status_port=free_port())
    writer = Writer(server.client())
    try:
        s3.create_bucket(BUCKET)
        archiver.start()
        writer.start()
        poll_until("a first archived second", lambda: archiver.last_archived() > 0, 60)
        timeline = archiver.status()["timeline"]
        s3.stop()
        down = time.time()
        poll_until(
            "the outage and the lag reported",
            lambda: (
                bool(archiver.status().get("storeError"))
                and archiver.status()["lagSeconds"] >= 4
                and archiver.status()["pendingBytes"] > 0
            ),
            60,
        )
        assert server.client().set("during-outage", "1")  # Redis keeps serving
        served = _http_status(archiver)
        assert served["storeError"]
        assert served["lagSeconds"] >= 4
        s3.start()
        up = time.time()
        poll_until(
            "the archive to catch up",
            lambda: archiver.status().get("storeError") is None and archiver.last_archived() >= up + 1,
            90,
        )
        assert archiver.status()["lagSeconds"] < up + 1 - down + 10  # the lag went down again
        archiver.stop()  # SIGTERM: ships what is left
        _wait_until(time.time() + 2)
        archiver.start()  # a restart: the same timeline, resumed from the store's index
        restart = time.time()
        poll_until("the restarted archiver to ship", lambda: archiver.last_archived() >= restart + 1, 60)
        assert archiver.status()["timeline"] == timeline
        writer.stop()
        archiver.stop()
    except BaseException:
        s3.cleanup()
        raise
    finally:
        writer.stop()
        archiver.stop()
    try:
        assert "resumed" in archiver.log_path.read_text()
        store = _archive(s3, monkeypatch, "clusters/")
        (index,) = recoverable_ranges(store)
        assert index.timeline == timeline
        target = int(down + up) // 2  # a second the store was down
        out = tmp_path / "restore"
        restore_to_time(store, target, AppendOnlyFiles(out / "appendonlydir"))
        _check_cut(_restored_keys(redis_servers, out), writer, target)
    finally:
        s3.cleanup()


def test_only_the_master_ships_a_promotion_starts_a_new_timeline_and_retention_drops_old_ones(
    redis_servers: RedisServers, object_store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The role gate (a downward-API labels file): as a replica the archiver ships nothing; as
    master it opens a timeline (base first); demoted it stops; promoted again it starts a NEW
    timeline, and retention (2 s here) deletes the old one, never the current one."""
    (server,) = redis_servers.start(1, extra=AOF_ARGS)
    labels = tmp_path / "labels"
    labels.write_text('app.kubernetes.io/name="redis"\nredis.pyctrl.dev/role="replica"\n')
    prefix = "gate/"
    archiver = ArchiverProcess(
        server.dir,
        object_store,
        BUCKET,
        prefix=prefix,
        extra=["--role-file", str(labels), "--retention-days", str(2 / 86400)],
    )
    store = _archive(object_store, monkeypatch, prefix)
    client = server.client()
    try:
        archiver.start()
        client.set("before", "1")
        poll_until("the replica's status", lambda: archiver.status().get("role") == "replica", 60)
        _wait_until(time.time() + 2)  # a few polls as a replica
        assert archiver.status()["active"] is False
        assert store.timelines() == []  # a replica ships nothing
        labels.write_text('redis.pyctrl.dev/role="master"\n')
        poll_until("a first archived second", lambda: archiver.last_archived() > 0, 60)
        first = archiver.status()["timeline"]
        index = store.read_index(first)
        assert index is not None
        assert index.files[0].kind == "base"
        labels.write_text('redis.pyctrl.dev/role="replica"\n')
        poll_until("the archiver idle", lambda: archiver.status().get("active") is False, 60)
        labels.write_text('redis.pyctrl.dev/role="master"\n')
        poll_until(
            "a second timeline",
            lambda: archiver.status().get("timeline") not in (None, first) and archiver.last_archived() > 0,
            60,
        )
        second = archiver.status()["timeline"]
        poll_until("retention to delete the first timeline", lambda: store.timelines() == [second], 60)
    finally:
        archiver.stop()
    log = archiver.log_path.read_text()
    assert "promoted to master" in log
    assert f"retention: timeline {first} deleted" in log
