"""Fixtures of the toolkit tests: real redis-servers (``tests.rediscluster._servers``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rediscluster._servers import RedisServers


@pytest.fixture
def redis_servers(tmp_path: Path) -> Iterator[RedisServers]:
    servers = RedisServers(tmp_path)
    try:
        yield servers
    finally:
        servers.close()
