"""Helpers of the archiving tests and ``benchmarks.pitr_bench``: a redis-server with the multi-part
AOF and ``#TS`` annotations, the archiver as its own process (as the sidecar will run it: S3 keys in
its environment only), and a writer of keys that carry their write time."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from pyctrl.envtest._process import ManagedProcess, start_process
from pyctrl.envtest.objectstore import ObjectStore

AOF_ARGS = (
    "--appendonly",
    "yes",
    "--aof-timestamp-enabled",
    "yes",
    "--appendfsync",
    "everysec",
    "--appenddirname",
    "appendonlydir",
    "--auto-aof-rewrite-percentage",
    "0",  # rewrites only when a test asks (BGREWRITEAOF)
)
NAMESPACE, CLUSTER = "pitr", "orders"


@dataclass
class ArchiverProcess:
    """``python -m examples.rediscluster.backup.archive`` for the AOF of ``data_dir``."""

    data_dir: Path
    store: ObjectStore
    bucket: str
    prefix: str = "clusters/"
    timeout: float = 1.0
    status_port: int | None = None
    extra: list[str] = field(default_factory=list)
    process: ManagedProcess | None = None

    @property
    def status_file(self) -> Path:
        return self.data_dir / "archive-state" / "status.json"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "archiver.log"

    def s3_args(self) -> list[str]:
        return [
            "--s3-endpoint",
            self.store.endpoint,
            "--s3-bucket",
            self.bucket,
            "--s3-prefix",
            self.prefix,
            "--namespace",
            NAMESPACE,
            "--cluster",
            CLUSTER,
        ]

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AWS_ACCESS_KEY_ID": self.store.access_key,
            "AWS_SECRET_ACCESS_KEY": self.store.secret_key,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }

    def start(self) -> None:
        argv = [sys.executable, "-m", "examples.rediscluster.backup.archive"]
        argv += ["--aof-dir", str(self.data_dir / "appendonlydir")]
        argv += ["--state-dir", str(self.data_dir / "archive-state")]
        argv += ["--status-file", str(self.status_file)]
        argv += ["--archive-timeout-seconds", str(self.timeout), "--poll-interval", "0.2"]
        if self.status_port is not None:
            argv += ["--status-port", str(self.status_port), "--status-address", "127.0.0.1"]
        argv += [*self.extra, *self.s3_args()]
        self.process = start_process("archiver", argv, self.log_path, attached=True, env=self.env())

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(grace=30)
            self.process = None

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.status_file.read_text()))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def last_archived(self) -> int:
        last = self.status().get("lastArchivedTime")
        if not last:
            return 0
        return int(time.mktime(time.strptime(last, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone)


@dataclass
class Writer:
    """A thread SETting ``k:<n>`` = its send time, one after the other, noting each ack's time."""

    client: redis.Redis
    pause: float = 0.005
    sent: list[float] = field(default_factory=list)
    acked: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            n, sent = len(self.sent), time.time()
            try:
                self.client.set(f"k:{n:08d}", f"{sent:.6f}")
            except redis.RedisError as exc:
                self.errors.append(repr(exc))
                return
            self.sent.append(sent)
            self.acked.append(time.time())
            self._stop.wait(self.pause)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        assert not self.errors, self.errors
