"""A real S3-compatible object store on loopback for tests, demos and benchmarks: versitygw (the
Versity S3 Gateway) with its posix backend, built from the Go module pinned in
``tools/versitygw/go.mod`` by ``tools/versitygw/build.sh`` (cached under ``$PYCTRL_CACHE_DIR``).

It plays the part envtest's control plane plays for the apiserver: a real server, not a mock of
one. Buckets are directories under ``<state dir>/data``, objects files in them; metadata goes to a
sidecar directory (no extended attributes needed on the filesystem).

Guarantees:

- ``start()`` returns once the gateway answers S3 requests (``ListBuckets`` with the root key
  pair) on ``127.0.0.1:<free port>`` — or on ``host``, e.g. the host's address on a real-node
  environment's bridge (``env.real.plan.host_ip``), where its Pods reach the host and nothing
  else does — or raises :class:`ObjectStoreError` naming its log and last lines; ``stop()`` ends
  the process (SIGTERM, then SIGKILL) and returns once it is gone; the
  context manager and a test process killed with SIGKILL (``PR_SET_PDEATHSIG``) stop it too;
- the root key pair reaches versitygw through its environment, never its argv; it is random per
  store unless given;
- ``stop()`` then ``start()`` keeps the data (same state dir) on a new or the same port — a store
  that "goes down" and comes back, for fault tests.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Self

from pyctrl.envtest._binaries import built_bin_dir
from pyctrl.envtest._process import ManagedProcess, free_port, start_process

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["ObjectStore", "ObjectStoreError", "versitygw_binary"]


class ObjectStoreError(RuntimeError):
    """The object store could not be built or started."""


def versitygw_binary() -> Path:
    """The versitygw executable: ``$PYCTRL_VERSITYGW`` or built (once) by tools/versitygw/build.sh."""
    if os.environ.get("PYCTRL_VERSITYGW"):
        return Path(os.environ["PYCTRL_VERSITYGW"])
    missing = "no versitygw: set PYCTRL_VERSITYGW or run from a pyctrl checkout"
    return built_bin_dir("versitygw", ObjectStoreError, missing) / "versitygw"


class ObjectStore:
    """One versitygw process serving ``<state dir>/data`` over S3 on ``host`` (loopback by default)."""

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str = "us-east-1",
        host: str = "127.0.0.1",
    ) -> None:
        self._own_dir = state_dir is None
        self.state_dir = Path(tempfile.mkdtemp(prefix="pyctrl-s3-")) if state_dir is None else state_dir
        self.access_key = access_key or "pyctrl" + secrets.token_hex(6)
        self.secret_key = secret_key or secrets.token_urlsafe(24)
        self.region = region
        self.host = host
        self.port = 0
        self.process: ManagedProcess | None = None
        self.log_path = self.state_dir / "versitygw.log"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, *, timeout: float = 30.0, port: int | None = None) -> None:
        binary = versitygw_binary()
        data, meta = self.state_dir / "data", self.state_dir / "meta"
        data.mkdir(parents=True, exist_ok=True)
        meta.mkdir(parents=True, exist_ok=True)
        self.port = free_port(port or self.port or None, host=self.host)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "ROOT_ACCESS_KEY": self.access_key,
            "ROOT_SECRET_KEY": self.secret_key,
        }
        argv = [
            str(binary),
            "--port",
            f"{self.host}:{self.port}",
            "--region",
            self.region,
            "--quiet",
            "posix",
            "--sidecar",
            str(meta),
            str(data),
        ]
        self.process = start_process("versitygw", argv, self.log_path, attached=True, env=env)
        deadline = time.monotonic() + timeout
        client = self.client()
        while True:
            if not self.process.alive():
                raise self._failed(f"versitygw exited with {self.process.exit_code()}")
            try:
                client.list_buckets()
                return
            except Exception as exc:  # not listening yet
                if time.monotonic() > deadline:
                    self.stop()
                    raise self._failed(f"versitygw did not answer within {timeout:g}s: {exc}") from exc
            time.sleep(0.1)  # polling a starting server: there is nothing to wait on

    def _failed(self, what: str) -> ObjectStoreError:
        tail = ""
        with contextlib.suppress(OSError):
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-10:])
        return ObjectStoreError(f"{what}; log {self.log_path}:\n{tail}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(grace=5)
            self.process = None

    def cleanup(self) -> None:
        """Stop, and remove the state dir when this store made it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def client(self) -> S3Client:
        """A boto3 S3 client for the root user (path-style addressing)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                connect_timeout=2,
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
