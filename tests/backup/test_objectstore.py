"""The object store helper: a real versitygw on loopback, started and stopped without leftovers."""

from __future__ import annotations

from pathlib import Path

from pyctrl.envtest._process import pid_alive
from pyctrl.envtest.objectstore import ObjectStore


def test_the_store_serves_s3_keeps_its_keys_out_of_argv_and_leaves_nothing_running(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "s3")
    store.start()
    try:
        assert store.process is not None
        pid = store.process.pid
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert store.secret_key.encode() not in cmdline
        assert store.access_key.encode() not in cmdline
        store.create_bucket("bucket")
        store.client().put_object(Bucket="bucket", Key="a/b.txt", Body=b"hello")
        store.stop()
        assert not pid_alive(pid)
        store.start()  # down, then back: same data
        assert store.client().get_object(Bucket="bucket", Key="a/b.txt")["Body"].read() == b"hello"
        assert store.process is not None
        pid = store.process.pid
    finally:
        store.cleanup()
    assert not pid_alive(pid)
