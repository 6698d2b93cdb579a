"""The backup worker against real servers: redis-server as the source, versitygw as the S3 store,
a directory as the claim. No Kubernetes here: these pin the worker's own guarantees (complete,
checksummed, nothing partial ever stored, secrets only from the environment)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
from pathlib import Path

import pytest
import redis

from examples.rediscluster.backup import worker
from examples.rediscluster.backup.rdb import RdbError, RdbStream
from pyctrl.envtest import poll_until
from pyctrl.envtest.objectstore import ObjectStore
from tests._certs import CertAuthority
from tests.backup.conftest import BUCKET
from tests.rediscluster._servers import RedisServer, RedisServers, free_port


def load_keys(client: redis.Redis, n: int) -> dict[str, str]:
    data = {f"key:{i}": f"value-{i}-{'v' * (i % 17)}" for i in range(n)}
    pipe = client.pipeline(transaction=False)
    for i, (k, v) in enumerate(data.items()):
        pipe.set(k, v)
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    return data


def run_worker(*argv: str, termination_log: Path) -> tuple[int, dict[str, object]]:
    code = worker.main(list(argv))
    return code, json.loads(termination_log.read_text())


@pytest.fixture
def termination_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "termination-log"
    monkeypatch.setenv("TERMINATION_LOG", str(path))
    return path


@pytest.fixture
def s3_env(object_store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", object_store.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", object_store.secret_key)
    return object_store


def s3_args(store: ObjectStore, key: str, bucket: str = BUCKET) -> list[str]:
    return ["--s3-endpoint", store.endpoint, "--s3-bucket", bucket, "--s3-key", key]


def start_from_rdb(servers: RedisServers, rdb: Path, name: str) -> RedisServer:
    """A fresh redis-server whose dir holds ``rdb`` as dump.rdb (what the restore init step leaves)."""
    server = RedisServer(name, servers.base / name)
    server.dir.mkdir(parents=True)
    os.link(rdb, server.dir / "dump.rdb")
    servers.servers.append(server)
    server.start()
    return server


def test_a_backup_to_s3_holds_every_key_with_the_size_and_sha256_it_reports(
    redis_servers: RedisServers,
    s3_env: ObjectStore,
    termination_log: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    (source,) = redis_servers.start(1, password="pw-1")
    data = load_keys(source.client(), 100_000)
    monkeypatch.setenv("REDIS_PASSWORD", "pw-1")
    code, result = run_worker(
        "backup",
        "--source-host",
        source.host,
        "--source-port",
        str(source.port),
        *s3_args(s3_env, "ns/full.rdb"),
        termination_log=termination_log,
    )
    assert code == 0, result
    body = s3_env.client().get_object(Bucket=BUCKET, Key="ns/full.rdb")["Body"].read()
    assert int(str(result.pop("peakRssBytes"))) > 0
    assert result == {
        "location": f"s3://{BUCKET}/ns/full.rdb",
        "sizeBytes": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
    }
    dump = tmp_path / "full.rdb"
    dump.write_bytes(body)
    restored = start_from_rdb(redis_servers, dump, "restored").client()
    assert restored.dbsize() == len(data)
    pipe = restored.pipeline(transaction=False)
    for k in data:
        pipe.get(k)
    assert dict(zip(data, pipe.execute(), strict=True)) == data


def test_a_pvc_backup_restores_only_when_its_sha256_matches(
    redis_servers: RedisServers, termination_log: Path, tmp_path: Path
) -> None:
    (source,) = redis_servers.start(1)
    load_keys(source.client(), 2000)
    claim = tmp_path / "claim"
    claim.mkdir()
    pvc = ["--pvc-mount", str(claim), "--pvc-claim", "backups", "--path", "nightly/one"]
    code, result = run_worker(
        "backup", "--source-host", source.host, "--source-port", str(source.port), *pvc,
        termination_log=termination_log,
    )  # fmt: skip
    assert code == 0, result
    stored = claim / "nightly" / "one"
    assert result["sha256"] == hashlib.sha256(stored.read_bytes()).hexdigest()
    assert result["location"] == "pvc://backups/nightly/one"
    assert sorted(p.name for p in stored.parent.iterdir()) == ["one"]  # no .partial left
    target = tmp_path / "data" / "dump.rdb"
    target.parent.mkdir()
    sha = str(result["sha256"])
    code, _ = run_worker(
        "restore", "--target", str(target), "--sha256", sha, *pvc, termination_log=termination_log
    )
    assert code == 0
    assert target.read_bytes() == stored.read_bytes()
    target.unlink()
    corrupt = bytearray(stored.read_bytes())
    corrupt[len(corrupt) // 2] ^= 0x01  # one flipped bit
    stored.write_bytes(bytes(corrupt))
    code, result = run_worker(
        "restore", "--target", str(target), "--sha256", sha, *pvc, termination_log=termination_log
    )
    assert code == worker.EXIT_PERMANENT
    assert "does not match" in str(result["error"])
    assert list(target.parent.iterdir()) == []  # neither the corrupt file nor a partial one


def test_bad_destinations_fail_with_their_reason_and_store_nothing(
    redis_servers: RedisServers,
    s3_env: ObjectStore,
    termination_log: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    (source,) = redis_servers.start(1)
    load_keys(source.client(), 100)
    src = ["--source-host", source.host, "--source-port", str(source.port)]
    code, result = run_worker(
        "backup", *src, *s3_args(s3_env, "k.rdb", "no-such-bucket"), termination_log=termination_log
    )
    assert (code, result) == (
        worker.EXIT_PERMANENT,
        {"error": f"bucket 'no-such-bucket' does not exist at {s3_env.endpoint}"},
    )
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    code, result = run_worker("backup", *src, *s3_args(s3_env, "k.rdb"), termination_log=termination_log)
    assert code == worker.EXIT_PERMANENT
    assert "rejected the credentials" in str(result["error"])
    assert "not-the-secret" not in termination_log.read_text()
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_env.secret_key)
    unreachable = ["--s3-endpoint", "http://127.0.0.1:9", "--s3-bucket", BUCKET, "--s3-key", "k.rdb"]
    code, result = run_worker("backup", *src, *unreachable, termination_log=termination_log)
    assert (code, result) == (
        worker.EXIT_RETRY,
        {"error": f"s3://{BUCKET}/k.rdb: cannot reach http://127.0.0.1:9"},
    )
    missing_claim = ["--pvc-mount", str(tmp_path / "not-mounted"), "--pvc-claim", "c", "--path", "p"]
    code, result = run_worker("backup", *src, *missing_claim, termination_log=termination_log)
    assert code == worker.EXIT_PERMANENT
    assert "not mounted" in str(result["error"])
    listed = s3_env.client().list_objects_v2(Bucket=BUCKET, Prefix="k.rdb")
    assert listed.get("KeyCount", 0) == 0


def test_a_snapshot_cut_short_is_never_stored(
    redis_servers: RedisServers, s3_env: ObjectStore, termination_log: Path, tmp_path: Path
) -> None:
    # 1 ms per key while the snapshot is written: the transfer lasts seconds, long enough to cut
    (source,) = redis_servers.start(1, extra=("--rdb-key-save-delay", "1000"))
    load_keys(source.client(), 20_000)
    src = ["--source-host", source.host, "--source-port", str(source.port)]
    claim = tmp_path / "claim"
    claim.mkdir()

    def kill_when_syncing() -> None:
        def syncing() -> bool:
            info = redis.Redis(source.host, source.port, socket_timeout=2).info("persistence")
            return bool(info.get("rdb_bgsave_in_progress"))

        poll_until("the snapshot to be under way", syncing, 30, interval=0.02)
        assert source.proc is not None
        os.kill(source.proc.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_syncing)
    killer.start()
    code, result = run_worker(
        "backup", *src, "--pvc-mount", str(claim), "--pvc-claim", "c", "--path", "cut",
        termination_log=termination_log,
    )  # fmt: skip
    killer.join()
    assert code == worker.EXIT_RETRY
    assert "before the snapshot was complete" in str(result["error"])
    assert list(claim.iterdir()) == []
    with pytest.raises(RdbError, match="cannot connect"):
        RdbStream(source.host, source.port)


def test_a_backup_over_tls_as_an_acl_user_verifies_the_servers_ca(
    redis_servers: RedisServers, termination_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, other = CertAuthority(), CertAuthority("another CA")
    issued = ca.issue()
    for name, pem in {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem, "ca.crt": ca.pem}.items():
        (tmp_path / name).write_bytes(pem)
    (tmp_path / "other.crt").write_bytes(other.pem)
    tls_port = free_port()
    tls = ["--tls-port", str(tls_port), "--tls-auth-clients", "optional"]
    tls += ["--tls-cert-file", str(tmp_path / "tls.crt"), "--tls-key-file", str(tmp_path / "tls.key")]
    tls += ["--tls-ca-cert-file", str(tmp_path / "ca.crt")]
    (source,) = redis_servers.start(1, extra=tuple(tls))  # plaintext too, for the test's own set-up
    client = source.client()
    load_keys(client, 500)
    client.acl_setuser(
        "backup", enabled=True, passwords=["+backup-pw"], commands=["+sync", "+replconf", "+psync", "+ping"]
    )
    monkeypatch.setenv("REDIS_USER", "backup")
    monkeypatch.setenv("REDIS_PASSWORD", "backup-pw")
    claim = tmp_path / "claim"
    claim.mkdir()
    source_args = ["--source-host", source.host, "--source-port", str(tls_port)]
    pvc = ["--pvc-mount", str(claim), "--pvc-claim", "backups", "--path", "tls"]
    code, result = run_worker(
        "backup",
        *source_args,
        "--tls-ca-file",
        str(tmp_path / "other.crt"),
        *pvc,
        termination_log=termination_log,
    )
    assert code == worker.EXIT_RETRY
    assert "TLS handshake" in str(result["error"])
    assert list(claim.iterdir()) == []  # nothing stored from an unverified server
    code, result = run_worker(
        "backup",
        *source_args,
        "--tls-ca-file",
        str(tmp_path / "ca.crt"),
        *pvc,
        termination_log=termination_log,
    )
    assert code == 0, result
    assert (claim / "tls").read_bytes().startswith(b"REDIS")
    assert result["sha256"] == hashlib.sha256((claim / "tls").read_bytes()).hexdigest()
