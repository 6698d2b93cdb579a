"""The worker's steps of a backup per shard (``backup.sharded``) against real servers: a
cluster-mode redis-server as the shard, a directory as the claim. No Kubernetes here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from examples.rediscluster.backup import worker
from pyctrl.envtest import poll_until
from tests.backup.test_worker import run_worker, termination_log
from tests.rediscluster._servers import RedisServer, RedisServers, free_port

__all__ = ["termination_log"]  # the fixture, used here


def shard_server(servers: RedisServers, slots: tuple[int, int]) -> RedisServer:
    cluster = (
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-require-full-coverage",
        "no",
    )
    (server,) = servers.start(1, extra=(*cluster, "--cluster-port", str(free_port())))
    client = server.client()
    client.execute_command("CLUSTER", "ADDSLOTSRANGE", *slots)  # type: ignore[no-untyped-call]

    def serving() -> bool:
        return "cluster_state:ok" in str(client.execute_command("CLUSTER", "INFO"))  # type: ignore[no-untyped-call]

    poll_until(f"{server.name}: cluster_state:ok", serving, 30, interval=0.1)  # it waits ~2 s after start
    return server


def keys_in(client: redis.Redis, first: int, last: int, n: int) -> dict[str, str]:
    """``n`` keys whose slots lie in ``first..last``, written to ``client``."""
    data: dict[str, str] = {}
    i = 0
    while len(data) < n:
        key = f"k{i}"
        if first <= int(client.execute_command("CLUSTER", "KEYSLOT", key)) <= last:  # type: ignore[no-untyped-call]
            data[key] = f"v{i}"
        i += 1
    pipe = client.pipeline(transaction=False)
    for k, v in data.items():
        pipe.set(k, v)
    pipe.execute()
    return data


def shard_backup(server: RedisServer, claim: Path, index: int, expect: str, results: Path) -> list[str]:
    host, port = server.address
    return [
        "backup",
        "--source-host",
        host,
        "--source-port",
        str(port),
        "--shard",
        str(index),
        "--check-host",
        host,
        "--check-port",
        str(port),
        "--expect-slots",
        expect,
        "--result-file",
        str(results / f"shard-{index}.json"),
        "--pvc-mount",
        str(claim),
        "--pvc-claim",
        "backups",
        "--path",
        f"nightly/shard-{index}.rdb",
    ]


def test_a_shard_whose_master_serves_other_slots_than_recorded_is_not_backed_up(
    redis_servers: RedisServers, termination_log: Path, tmp_path: Path
) -> None:
    server = shard_server(redis_servers, (0, 99))
    results = tmp_path / "results"
    results.mkdir()
    code, result = run_worker(
        *shard_backup(server, tmp_path, 0, "0-199", results), termination_log=termination_log
    )
    assert code == worker.EXIT_RETRY
    assert "serves slots 0-99" in str(result["error"])
    assert "resharded during the backup" in str(result["error"])
    assert not (results / "shard-0.json").exists()  # nothing for the manifest to list
    code, result = run_worker(
        *shard_backup(server, tmp_path, 0, "0-99", results), termination_log=termination_log
    )
    assert code == 0, result
    assert result["slots"] == ["0-99"]
    assert json.loads((results / "shard-0.json").read_text()) == {
        k: v for k, v in result.items() if k != "peakRssBytes"
    }


def test_a_restore_seeds_each_shards_first_pod_from_the_manifest_and_refuses_a_bad_one(
    redis_servers: RedisServers, termination_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = [shard_server(redis_servers, (0, 8191)), shard_server(redis_servers, (8192, 16383))]
    data = [keys_in(shards[0].client(), 0, 8191, 50), keys_in(shards[1].client(), 8192, 16383, 70)]
    results = tmp_path / "results"
    results.mkdir()
    for i, (server, expect) in enumerate(zip(shards, ("0-8191", "8192-16383"), strict=True)):
        code, result = run_worker(
            *shard_backup(server, tmp_path, i, expect, results), termination_log=termination_log
        )
        assert code == 0, result
    claim = ["--pvc-mount", str(tmp_path), "--pvc-claim", "backups", "--path", "nightly/manifest.json"]
    code, stored = run_worker(
        "manifest",
        "--results",
        str(results),
        "--shards",
        "2",
        "--cluster",
        "shop",
        "--namespace",
        "ns",
        "--backup",
        "nightly",
        *claim,
        termination_log=termination_log,
    )
    assert code == 0, stored
    manifest = json.loads((tmp_path / "nightly" / "manifest.json").read_text())
    assert [(s["shard"], s["slots"]) for s in manifest["shards"]] == [(0, ["0-8191"]), (1, ["8192-16383"])]
    restore = ["restore", "--sha256", str(stored["sha256"]), "--replicas-per-shard", "1", *claim]
    for pod, seeded in (("copy-0", 0), ("copy-1", None), ("copy-2", 1), ("copy-4", None)):
        target = tmp_path / pod / "dump.rdb"
        target.parent.mkdir()
        monkeypatch.setenv("POD_NAME", pod)
        code, result = run_worker(*restore, "--target", str(target), termination_log=termination_log)
        assert code == 0, (pod, result)
        if seeded is None:  # a replica (copy-1) or a shard the backup does not have (copy-4)
            assert result["skipped"] is True
            assert not target.exists()
            continue
        assert result["shard"] == seeded
        server = RedisServer(pod, target.parent)
        redis_servers.servers.append(server)
        server.start()  # loads dump.rdb: the shard's keys, and only those
        assert server.client().mget(list(data[seeded])) == list(data[seeded].values())
        assert server.client().dbsize() == len(data[seeded])
    manifest_file = tmp_path / "nightly" / "manifest.json"
    manifest_file.write_text(manifest_file.read_text().replace("8191", "8190", 1))  # edited: not its SHA-256
    monkeypatch.setenv("POD_NAME", "copy-0")
    target = tmp_path / "bad" / "dump.rdb"
    target.parent.mkdir()
    code, result = run_worker(*restore, "--target", str(target), termination_log=termination_log)
    assert code == worker.EXIT_PERMANENT
    assert "does not match" in str(result["error"])
    assert not target.exists()
