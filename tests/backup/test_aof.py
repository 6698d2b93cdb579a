"""A restore into a Redis running with persistence (``appendonly yes``): the checked RDB becomes the
base of the AOF that Redis loads (``backup.aof``), against a real redis-server. No Kubernetes."""

from __future__ import annotations

from pathlib import Path

from tests.backup.test_worker import load_keys, run_worker, termination_log
from tests.rediscluster._servers import RedisServer, RedisServers

__all__ = ["termination_log"]  # the fixture, used here


def test_a_restore_with_persistence_seeds_the_aof_redis_loads_and_leaves_an_existing_one_alone(
    redis_servers: RedisServers, termination_log: Path, tmp_path: Path
) -> None:
    (source,) = redis_servers.start(1)
    data = load_keys(source.client(), 3000)
    claim = ["--pvc-mount", str(tmp_path), "--pvc-claim", "backups", "--path", "nightly.rdb"]
    code, stored = run_worker(
        "backup",
        "--source-host",
        source.host,
        "--source-port",
        str(source.port),
        *claim,
        termination_log=termination_log,
    )
    assert code == 0, stored
    data_dir = tmp_path / "pod-data"
    data_dir.mkdir()
    restore = ["restore", "--target", str(data_dir / "dump.rdb"), "--sha256", str(stored["sha256"])]
    restore += ["--aof-dir", str(data_dir / "appendonlydir"), *claim]
    code, result = run_worker(*restore, termination_log=termination_log)
    assert code == 0, result
    assert not (data_dir / "dump.rdb").exists()  # it is the AOF's base now
    server = RedisServer("restored", data_dir, extra=("--appendonly", "yes"))
    redis_servers.servers.append(server)
    server.start()
    client = server.client()
    assert client.dbsize() == len(data)
    pipe = client.pipeline(transaction=False)
    for k in data:
        pipe.get(k)
    assert dict(zip(data, pipe.execute(), strict=True)) == data
    client.set("written-after", "1")  # the AOF goes on from the seeded base
    server.terminate()
    code, result = run_worker(*restore, termination_log=termination_log)
    assert code == 0, result
    assert result["skipped"] is True  # the volume holds an AOF: the pod keeps its data
    server.start()
    assert server.client().get("written-after") == "1"
    assert server.client().dbsize() == len(data) + 1
