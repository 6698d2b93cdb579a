"""What one Redis server says about itself (``INFO``), as plain data: the vocabulary shared by the
Redis connection (``redis_admin.parse_facts``), both modes' decisions and the metrics.

Pure data, no I/O: a :class:`RedisFacts` is the parsed answer, not a live connection.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["NULL_REPLID", "RedisFacts", "Role"]

NULL_REPLID = "0" * 40


class Role(enum.StrEnum):
    MASTER = "master"
    REPLICA = "replica"


@dataclass(frozen=True, slots=True)
class RedisFacts:
    """What one Redis answered (INFO replication/server/persistence/keyspace)."""

    role: Role
    run_id: str
    master_replid: str
    master_replid2: str = NULL_REPLID
    master_repl_offset: int = 0
    slave_repl_offset: int | None = None  # processed offset; replicas only
    master_host: str | None = None
    master_port: int | None = None
    master_link_up: bool = False
    master_link_down_since_seconds: float | None = None  # math.inf: never connected
    replica_priority: int = 100
    connected_replicas: int = 0
    keys: int = 0
    loading: bool = False
    uptime_seconds: int = 0
    failover_state: str = "no-failover"
    online_replicas: frozenset[tuple[str, int]] = frozenset()  # (ip, port) the master lists online

    @property
    def offset(self) -> int:
        return self.slave_repl_offset if self.slave_repl_offset is not None else self.master_repl_offset
