"""A multi-part append-only file (Redis >= 7.0) seeded from an RDB: how a restore reaches a Redis
that runs with ``appendonly yes`` (it loads its AOF at start, never ``dump.rdb``).

Redis 7 keeps the AOF as files in ``appenddirname`` listed by ``<appendfilename>.manifest``; the
base file may be an RDB (what ``aof-use-rdb-preamble`` writes at every rewrite). So a restore puts
the checked RDB there as ``<appendfilename>.1.base.rdb`` and writes a manifest naming it as the
base; Redis loads it at start and opens a new incremental file after it. Guarantees: the manifest
is written last (temporary name, fsync, rename), so a crash leaves no AOF claiming data it lacks;
nothing is done where a manifest exists already (:meth:`AppendOnlyFiles.exists`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AppendOnlyFiles"]


@dataclass(frozen=True)
class AppendOnlyFiles:
    """The AOF of ``appenddirname`` ``directory`` and ``appendfilename`` ``name``."""

    directory: Path
    name: str = "appendonly.aof"

    @property
    def manifest(self) -> Path:
        return self.directory / f"{self.name}.manifest"

    def exists(self) -> bool:
        return self.manifest.exists()

    def seed(self, rdb: Path) -> None:
        """Move ``rdb`` (checked already) into the directory as the AOF's base, then the manifest."""
        self.directory.mkdir(parents=True, exist_ok=True)
        base = f"{self.name}.1.base.rdb"
        os.replace(rdb, self.directory / base)
        partial = self.manifest.with_name(self.manifest.name + ".partial")
        with partial.open("w") as out:
            out.write(f"file {base} seq 1 type b\n")
            out.flush()
            os.fsync(out.fileno())
        partial.rename(self.manifest)
