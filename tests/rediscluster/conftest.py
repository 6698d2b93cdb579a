"""Fixtures of the RedisCluster domain tests: real redis-server processes (see ``_servers``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rediscluster._servers import RedisServers


@pytest.fixture
def redis_servers(tmp_path: Path) -> Iterator[RedisServers]:
    """``redis_servers.start(n)`` starts n servers on free 127.0.0.1 ports; all stop in teardown."""
    servers = RedisServers(tmp_path)
    try:
        yield servers
    finally:
        servers.close()
