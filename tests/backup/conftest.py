"""Fixtures of the backup tests: a real S3-compatible store (versitygw, ``pyctrl.envtest.objectstore``)
with a bucket, and real redis-server processes (``tests.rediscluster._servers``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyctrl.envtest.objectstore import ObjectStore
from tests.rediscluster._servers import RedisServers

BUCKET = "backups"


@pytest.fixture(scope="session")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """One versitygw for the session, with the bucket ``backups``; stopped at the end."""
    store = ObjectStore(tmp_path_factory.mktemp("s3"))
    store.start()
    try:
        store.create_bucket(BUCKET)
        yield store
    finally:
        store.cleanup()


@pytest.fixture
def redis_servers(tmp_path: Path) -> Iterator[RedisServers]:
    servers = RedisServers(tmp_path)
    try:
        yield servers
    finally:
        servers.close()
