"""Point-in-time recovery end to end: ``spec.backup.archive`` runs the archiver sidecar in real
redis-server pods on the local node (only the master's ships, into a real S3 store, versitygw on
loopback), a planned failover starts a second timeline, and a new RedisCluster with
``spec.restoreFrom.pointInTime`` is seeded at a second T after the failover — every write
acknowledged by either master up to T - 1 is there, none sent from T + 1 on — while a target
outside the archive is refused naming the recoverable range, with no pod becoming master."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from pyctrl.envtest import Environment
from pyctrl.envtest.objectstore import ObjectStore
from pyctrl.testing import eventually
from tests.backup.conftest import object_store
from tests.operator.conftest import Cluster, RunningOperator
from tests.operator.test_backup import (
    QUIET_DOWN_AFTER_MS,
    cmdlines,
    condition,
    create_s3_secret,
    recorded,
    s3_destination,
)

__all__ = ["object_store"]  # the session fixture, used here

pytestmark = pytest.mark.controlplane

ARCHIVE_TIMEOUT = 5  # seconds: the file being written is shipped at least this often


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(text: str | None) -> float:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else 0.0


@dataclass
class Writer:
    """SETs ``k:<n>`` = its send time to whichever pod the status names master, one at a time;
    ``acked[n]`` is the ack's time (None: the write failed and may or may not have happened)."""

    c: Cluster
    sent: list[float] = field(default_factory=list)
    acked: list[float | None] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        client: aioredis.Redis | None = None
        while not self.stop.is_set():
            if client is None:
                master = self.c.status().get("currentMaster")
                client = await self.c.redis(str(master)) if master else None
                if client is None:
                    await asyncio.sleep(0.1)  # no master recorded yet: look again (not a sync point)
                    continue
            n, now = len(self.sent), time.time()
            self.sent.append(now)
            self.acked.append(None)
            try:
                await client.set(f"k:{n}", f"{now:.6f}")
                self.acked[n] = time.time()
            except (aioredis.RedisError, OSError):
                await client.aclose()
                client = None  # a failover: find the new master
            await asyncio.sleep(0.01)
        if client is not None:
            await client.aclose()


async def archiving(c: Cluster, after: float = 0.0, timeline: str | None = None) -> dict[str, Any] | None:
    """status.archive once ContinuousArchiving is True with a last archived second past ``after``
    (and, given ``timeline``, on another timeline)."""
    status = c.status()
    cond, archive = condition(status, "ContinuousArchiving"), status.get("archive") or {}
    if cond is None or cond["status"] != "True" or epoch(archive.get("lastArchivedTime")) <= after:
        return None
    if timeline is not None and archive.get("timeline") == timeline:
        return None
    return dict(archive)


def check_sidecar(pod: dict[str, Any]) -> None:
    """The archiver: restricted, S3 keys by reference only."""
    sidecar = next(c for c in pod["spec"]["containers"] if c["name"] == "archiver")
    assert sidecar["securityContext"]["runAsNonRoot"] is True
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    assert sidecar["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    env = {e["name"]: e for e in sidecar["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "s3-creds"
    assert "value" not in env["AWS_ACCESS_KEY_ID"]


async def write_across_a_failover(
    src: Cluster, envtest: Environment, first: dict[str, Any]
) -> tuple[Writer, dict[str, Any], int]:
    """Writes on the master, a planned failover (the master's pod deleted), writes on the new
    master; (the writer, the new timeline's status.archive, T: a second after the failover)."""
    old_master = str(src.status()["currentMaster"])
    writer = Writer(src)
    writing = asyncio.create_task(writer.run())
    try:
        await eventually(lambda: len(writer.sent) > 200, within=60, what="writes on the first master")
        envtest.http.request("DELETE", f"/api/v1/namespaces/{src.namespace}/pods/{old_master}")

        async def failed_over() -> bool:
            return src.status().get("currentMaster") not in (None, old_master)

        await eventually(failed_over, within=90, what="src failed over", interval=0.5)
        second = await eventually(
            partial(archiving, src, time.time(), first["timeline"]),
            within=90,
            what="the new master archiving a new timeline",
            interval=0.5,
        )
        assert second["pod"] == src.status()["currentMaster"]
        before = len(writer.sent)
        await eventually(lambda: len(writer.sent) > before + 200, within=60, what="writes on the new master")
        target = int(time.time())  # T: after the failover, while writes go on
        await eventually(lambda: time.time() >= target + 3, within=10, what="writes past T")
    finally:
        writer.stop.set()
        await writing
    assert any(t is not None and t <= target - 1 for t in writer.acked[:before])  # both masters' writes
    return writer, second, target


async def check_restored(dst: Cluster, writer: Writer, target: int) -> None:
    """Every pod of ``dst``: each key holds its value, none sent from T + 1 on, every one acked by
    T - 1 present."""
    for name in dst.pods():  # the seeded master and the replica synced from it
        client = await dst.redis(name)
        found = sorted([int(str(k).split(":")[1]) async for k in client.scan_iter("k:*", count=1000)])
        values = await client.mget([f"k:{n}" for n in found]) if found else []
        await client.aclose()
        assert found, f"{name}: nothing restored"
        for n, value in zip(found, values, strict=True):
            assert value == f"{writer.sent[n]:.6f}"
            assert writer.sent[n] < target + 1, (n, writer.sent[n], target)  # none after T + 1
        have = set(found)
        missing = [
            n for n, t in enumerate(writer.acked) if t is not None and t <= target - 1 and n not in have
        ]
        assert not missing, f"{name}: acked by T - 1 yet not restored: {missing[:10]}"


async def test_archiving_across_a_failover_and_a_restore_to_a_second_after_it(
    operator: RunningOperator,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    object_store: ObjectStore,
) -> None:
    create_s3_secret(envtest, namespace, object_store.access_key, object_store.secret_key)
    destination = s3_destination(object_store)
    src = cluster_factory("src")
    await src.create_ready(
        2,
        enablePersistence=True,
        storageSize="256Mi",
        downAfterMilliseconds=QUIET_DOWN_AFTER_MS,
        backup={"destination": destination, "archive": {"archiveTimeoutSeconds": ARCHIVE_TIMEOUT}},
        within=180,
    )
    first = await eventually(partial(archiving, src), within=90, what="src archiving", interval=0.5)
    assert first["pod"] == src.status()["currentMaster"]
    check_sidecar(src.pods()[first["pod"]])
    writer, second, target = await write_across_a_failover(src, envtest, first)
    await eventually(
        partial(archiving, src, target + 1), within=60, what="the archive past T + 1", interval=0.5
    )

    restore = {"archive": {"clusterName": "src", "s3": destination["s3"]}}
    dst = cluster_factory("dst")
    dst.create(
        replicas=2,
        enablePersistence=True,
        storageSize="256Mi",
        downAfterMilliseconds=QUIET_DOWN_AFTER_MS,
        restoreFrom={**restore, "pointInTime": rfc3339(target)},
    )
    early = cluster_factory("early")
    early.create(
        replicas=1,
        enablePersistence=True,
        storageSize="256Mi",
        restoreFrom={**restore, "pointInTime": "2020-01-01T00:00:00Z"},
    )
    await eventually(partial(dst.ready, 2), within=180, what="dst Running", interval=0.5)

    async def restored() -> dict[str, Any] | None:
        cond = condition(dst.status(), "Restored")
        return cond if cond is not None and cond["status"] == "True" else None

    done = await eventually(restored, within=60, what="dst Restored", interval=0.5)
    assert rfc3339(target) in done["message"]
    await check_restored(dst, writer, target)
    await recorded(envtest, namespace, "dst", "Restored")

    async def refused() -> dict[str, Any] | None:
        cond = condition(early.status(), "Restored")
        return cond if cond is not None and cond["reason"] == "RestoreFailed" else None

    failed = await eventually(refused, within=120, what="early: RestoreFailed", interval=0.5)
    assert "outside the recoverable range" in failed["message"], failed
    assert first["timeline"] in failed["message"]
    assert second["timeline"] in failed["message"]
    assert early.status().get("currentMaster") is None  # nothing promoted
    await recorded(envtest, namespace, "early", "RestoreFailed")
    # the S3 secret key: nowhere but in its Secret (argv, status, Events)
    assert not [c for c in cmdlines() if object_store.secret_key.encode() in c]
    events = envtest.http.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    visible = json.dumps([src.status(), dst.status(), early.status(), events])
    assert object_store.secret_key not in visible
    logs = ""  # the archivers' logs (the local node's log files)
    for pod in src.pods().values():
        logs += (Path(pod["metadata"]["annotations"]["pyctrl.dev/log-dir"]) / "archiver.log").read_text()
    assert f"timeline {second['timeline']}: started (promoted to master" in logs
    assert object_store.secret_key not in logs
