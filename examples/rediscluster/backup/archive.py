"""``python -m examples.rediscluster.backup.archive``: continuous archiving of a master's multi-part
append-only file (Redis >= 7.0, ``appendonly yes``, ``aof-timestamp-enabled yes``) to an S3 store,
the redis counterpart of PostgreSQL's WAL archiving (CloudNativePG's ``barman-cloud-wal-archive``).

It runs beside ``redis-server`` (the design: a sidecar of the operator's image sharing the data
volume, non-root, no Kubernetes API rights) and only reads ``appenddirname``: the manifest, the base
files and the incremental files Redis writes. What it stores, under
``<prefix><namespace>/<cluster>/archive/<timeline>/``:

- ``base/<seq>.<rdb|aof>``: every base file, once, when it appears in the manifest (a rewrite);
- ``incr/<seq>/<offset, 16 digits>``: the incremental file ``seq`` as consecutive segments: the
  bytes appended since the last segment, shipped when the file is closed (the manifest names a newer
  incremental file) and, for the file being written, at least every ``--archive-timeout-seconds``
  (default 60);
- ``index.json``: the timeline's index (:class:`TimelineIndex`), rewritten after every object, which
  lists the objects in the order they were shipped with their size and SHA-256, and the recoverable
  range.

Guarantees:

- order: objects ship strictly in the order Redis made the files; a timeline's first object is its
  base, so every increment has its base in the store before it; an index entry is written only
  after its object is stored;
- RPO: a write acknowledged by Redis at time t is in the store by about t + archive timeout +
  poll interval + 2 s (Redis may postpone an ``appendfsync everysec`` write by up to 2 s) as long
  as the store answers; with the default 60 s and 0.5 s a lost volume loses at most ~63 s of
  writes. ``lastArchivedTime`` is the second up to which every write is stored: the wall time at
  which the archiver had read and shipped the whole file being written, minus 3 s;
- no data lost to rewrites: the archiver holds every file it still has to ship open, so a file
  Redis deletes after a rewrite (a "history" file) is still read to its end; if a file was
  deleted before it was ever opened (two rewrites within one poll interval, or the archiver down
  across a rewrite), the chain is broken and a new timeline starts from the current base, never an
  archive with a silent hole;
- timelines: a timeline is one AOF lineage (one volume's Redis); its id (``<UTC start>-<random>``,
  sortable by start) lives in ``--state-dir`` on the same volume, so a restarted archiver (or
  Redis) goes on with the same timeline while a new master (a failover: another volume) starts a
  new one;
- idempotent restart: the archiver resumes from the store's index (the shipped offset of each
  file, the last segment's bytes compared with the local file's); anything inconsistent starts a new
  timeline;
- never exits on its own: any unexpected error of a step is logged (once), reported as
  ``storeError`` and retried at the next poll — a sidecar that exits would make its pod NotReady
  and fail Redis over;
- store outages: Redis is never touched; the archiver keeps watching the directory (opening new
  files so none is lost), retries with exponential backoff (1 s to 30 s) and reports the lag;
- status: a JSON file (``--status-file``, replaced atomically at every poll) and, with
  ``--status-port``, ``GET /status`` (the same JSON) and ``GET /metrics`` (Prometheus text:
  ``rediscluster_archive_lag_seconds``, ``rediscluster_archive_last_archived_timestamp_seconds``)
  on that port: ``timeline``, ``lastArchivedTime``, ``lastArchivedFile``, ``firstRecoverableTime``
  (RFC 3339, UTC), ``lagSeconds``, ``pendingBytes``, ``storeError``;
- secrets: the S3 key pair comes only from the environment (``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``: ``secretKeyRef`` in the pod) and is never in argv, the status or logs.

- role gate (``--role-file``: a downward-API file of the pod's labels): only while the label
  ``--role-label`` (default ``redis.pyctrl.dev/role``) says ``master`` does the archiver ship;
  otherwise it idles (a replica's AOF is another master's writes) and records that in the state
  dir, so a pod promoted later starts a **new timeline** from its current base (a failover never
  continues the old master's timeline); an unreadable file is "not master". Without
  ``--role-file`` it always ships;
- retention (``--retention-days``): the shipping archiver deletes every other timeline whose
  last archived second (its first base's when it has none) is older than that, at start and
  hourly; the current timeline is never deleted.

SIGTERM/SIGINT ship what is left (one last attempt) and exit 0. Exit codes otherwise: 2 bad
arguments, 3 for good (the credentials are missing at start) — except with ``--status-port`` (the
sidecar), which then serves that error as ``storeError`` until stopped instead of exiting: a
crash-looping sidecar would make its pod NotReady and fail Redis over.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO, Literal, cast

import botocore.exceptions

from examples.rediscluster.backup.store import S3Store, StoreError

__all__ = [
    "ArchiveStore",
    "ArchivedFile",
    "Archiver",
    "ManifestEntry",
    "Segment",
    "TimelineIndex",
    "add_store_arguments",
    "archive_prefix",
    "iso",
    "main",
    "read_manifest",
    "store_from_arguments",
]

INDEX = "index.json"
ROLE_LABEL = "redis.pyctrl.dev/role"
_BACKOFF_MAX = 30.0
_RETENTION_EVERY = 3600.0
_WRITE_POSTPONE_BOUND = 3  # Redis postpones an everysec write by < 2 s; one more for the second


def archive_prefix(prefix: str, namespace: str, cluster: str) -> str:
    """``<prefix><ns>/<cluster>/archive/``: where every timeline of a cluster is stored."""
    return f"{prefix}{namespace}/{cluster}/archive/"


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ManifestEntry:
    name: str
    seq: int
    type: Literal["b", "h", "i"]


def read_manifest(path: Path) -> list[ManifestEntry]:
    """The lines of a Redis 7 AOF manifest (``file <name> seq <n> type <b|h|i>``)."""
    entries = []
    for line in path.read_text().splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        fields = dict(zip(words[0::2], words[1::2], strict=False))
        kind = fields.get("type")
        if "file" not in fields or "seq" not in fields or kind not in ("b", "h", "i"):
            raise ValueError(f"{path}: a line it cannot read: {line!r}")
        entries.append(ManifestEntry(fields["file"], int(fields["seq"]), cast(Any, kind)))
    return entries


@dataclass
class Segment:
    key: str
    offset: int
    size: int
    sha256: str


@dataclass
class ArchivedFile:
    """One file of the timeline, as the index records it."""

    kind: Literal["base", "incr"]
    seq: int
    name: str
    # base: the object, the file's mtime (its data is at least that old) and the first increment after it
    key: str = ""
    size: int = 0
    sha256: str = ""
    time: int = 0
    first_incr_seq: int = 0
    # incr: its segments, and whether it is complete (Redis writes a newer incremental file)
    segments: list[Segment] = field(default_factory=list)
    closed: bool = False

    @property
    def shipped(self) -> int:
        return sum(s.size for s in self.segments)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "seq": self.seq,
            "name": self.name,
        }
        if self.kind == "base":
            out |= {
                "key": self.key,
                "size": self.size,
                "sha256": self.sha256,
                "time": self.time,
                "firstIncrSeq": self.first_incr_seq,
            }
        else:
            out |= {"segments": [dataclasses.asdict(s) for s in self.segments], "closed": self.closed}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArchivedFile:
        return cls(
            kind=data["kind"],
            seq=int(data["seq"]),
            name=data["name"],
            key=data.get("key", ""),
            size=int(data.get("size", 0)),
            sha256=data.get("sha256", ""),
            time=int(data.get("time", 0)),
            first_incr_seq=int(data.get("firstIncrSeq", 0)),
            segments=[Segment(**s) for s in data.get("segments", [])],
            closed=bool(data.get("closed", False)),
        )


@dataclass
class TimelineIndex:
    """``index.json`` of a timeline: its files in shipping order and its recoverable range."""

    timeline: str
    appendfilename: str
    files: list[ArchivedFile] = field(default_factory=list)
    last_archived_time: int | None = None
    last_archived_file: str | None = None

    @property
    def first_recoverable_time(self) -> int | None:
        bases = [f.time for f in self.files if f.kind == "base"]
        return min(bases) if bases else None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "timeline": self.timeline,
            "appendfilename": self.appendfilename,
            "files": [f.to_json() for f in self.files],
            "lastArchivedTime": self.last_archived_time,
            "lastArchivedFile": self.last_archived_file,
            "firstRecoverableTime": self.first_recoverable_time,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimelineIndex:
        if data.get("version") != 1:
            raise ValueError(f"timeline index version {data.get('version')!r} is not 1")
        return cls(
            timeline=data["timeline"],
            appendfilename=data["appendfilename"],
            files=[ArchivedFile.from_json(f) for f in data["files"]],
            last_archived_time=data.get("lastArchivedTime"),
            last_archived_file=data.get("lastArchivedFile"),
        )


class _Range(io.RawIOBase):
    """``length`` bytes of an open file from ``offset`` (the file may be unlinked meanwhile)."""

    def __init__(self, fd: BinaryIO, offset: int, length: int) -> None:
        super().__init__()
        self.fd, self.pos, self.left = fd, offset, length

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = os.pread(self.fd.fileno(), n, self.pos) if n else b""
        self.pos += len(data)
        self.left -= len(data)
        if n and not data:
            raise OSError(f"{self.fd.name}: ended {self.left} bytes early")
        return data


class ArchiveStore:
    """The S3 side: objects under ``<prefix><ns>/<cluster>/archive/`` (one client for all)."""

    def __init__(self, s3: S3Store, prefix: str) -> None:
        self.s3, self.prefix = s3, prefix

    @classmethod
    def connect(
        cls,
        endpoint: str,
        bucket: str,
        prefix: str,
        *,
        region: str = "us-east-1",
        ca_bundle: str | None = None,
    ) -> ArchiveStore:
        return cls(S3Store(endpoint, bucket, prefix + INDEX, region, ca_bundle=ca_bundle), prefix)

    def object(self, key: str) -> S3Store:
        return self.s3.at(self.prefix + key)

    def put(self, key: str, source: io.RawIOBase | BinaryIO) -> tuple[int, str]:
        stored = self.object(key).put(source)
        return stored.size_bytes, stored.sha256

    def read_index(self, timeline: str) -> TimelineIndex | None:
        obj = self.object(f"{timeline}/{INDEX}")
        try:
            body = obj.client.get_object(Bucket=obj.bucket, Key=obj.key)["Body"].read()
        except botocore.exceptions.ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in ("NoSuchKey", "404"):
                return None
            raise obj._error(exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise obj._error(exc) from exc
        return TimelineIndex.from_json(json.loads(body))

    def write_index(self, index: TimelineIndex) -> None:
        data = json.dumps(index.to_json(), sort_keys=True).encode()
        self.put(f"{index.timeline}/{INDEX}", io.BytesIO(data))

    def delete_timeline(self, timeline: str) -> int:
        """Delete every object of ``timeline`` (its index first, so a half-deleted timeline is
        never offered to a restore); the number of objects deleted."""
        client, bucket = self.s3.client, self.s3.bucket
        root = f"{self.prefix}{timeline}/"
        try:
            client.delete_object(Bucket=bucket, Key=root + INDEX)
            deleted = 1
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=root):
                for obj in page.get("Contents", []):
                    client.delete_object(Bucket=bucket, Key=obj["Key"])
                    deleted += 1
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise self.s3._error(exc) from exc
        return deleted

    def timelines(self) -> list[str]:
        """Every timeline of the cluster, oldest first (ids sort by their start)."""
        client, bucket = self.s3.client, self.s3.bucket
        found: list[str] = []
        try:
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=self.prefix, Delimiter="/"
            ):
                found += [p["Prefix"][len(self.prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise self.s3._error(exc) from exc
        return sorted(found)


@dataclass
class _Local:
    """A file of ``appenddirname`` being archived: held open until all of it is stored."""

    entry: ArchivedFile
    fd: BinaryIO
    done: bool = False  # base: stored; incr: closed and stored to its end


def _timeline_start(timeline: str) -> int | None:
    try:
        return int(datetime.strptime(timeline[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return None


def _new_timeline_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


class Archiver:
    """The loop: :meth:`poll` the directory, :meth:`ship` what is due; :meth:`run` does both."""

    def __init__(
        self,
        store: ArchiveStore,
        aof_dir: Path,
        state_dir: Path,
        *,
        aof_name: str = "appendonly.aof",
        archive_timeout: float = 60.0,
        poll_interval: float = 0.5,
        status_file: Path | None = None,
        role_file: Path | None = None,
        role_label: str = ROLE_LABEL,
        retention_days: float | None = None,
        log: Any = None,
    ) -> None:
        if archive_timeout <= 0 or poll_interval <= 0:
            raise ValueError("--archive-timeout-seconds and --poll-interval must be positive")
        if retention_days is not None and retention_days <= 0:
            raise ValueError("--retention-days must be positive")
        self.role_file, self.role_label, self.retention_days = role_file, role_label, retention_days
        self.role: str | None = None if role_file is not None else "master"
        self.next_retention = 0.0
        self.store, self.aof_dir, self.state_dir = store, aof_dir, state_dir
        self.aof_name, self.timeout, self.poll_interval = aof_name, archive_timeout, poll_interval
        self.status_file = status_file
        self.log = log if log is not None else (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.index: TimelineIndex | None = None
        self.local: list[_Local] = []  # in shipping order
        self.last_incr_seq = 0  # the newest incremental file known
        self.resumed = False
        self.current_shipped_at = time.time()
        self.store_error: str | None = None
        self.next_attempt = 0.0
        self.backoff = 1.0
        self.started = time.time()
        self._stop = threading.Event()
        self.status: dict[str, Any] = {}

    # --- the timeline -------------------------------------------------------------------------
    @property
    def manifest(self) -> Path:
        return self.aof_dir / f"{self.aof_name}.manifest"

    def _timeline_file(self) -> Path:
        return self.state_dir / "timeline"

    def _start_timeline(self, why: str) -> None:
        for f in self.local:
            f.fd.close()
        self.local = []
        tid = _new_timeline_id()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        partial = self._timeline_file().with_suffix(".partial")
        partial.write_text(tid + "\n")
        partial.rename(self._timeline_file())
        self.index = TimelineIndex(tid, self.aof_name)
        self.last_incr_seq = 0
        self.resumed = True
        self.next_retention = 0.0  # a new timeline (a failover): a good moment for retention
        self._record_role("master")
        self.log(f"timeline {tid}: started ({why})")

    def _role_record(self) -> Path:
        return self.state_dir / "role"

    def read_role(self) -> str | None:
        """The pod's role from ``--role-file`` (``master`` without one); None when unreadable."""
        if self.role_file is None:
            return "master"
        try:
            text = self.role_file.read_text()
        except OSError:
            return None
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == self.role_label:
                return value.strip().strip('"')
        return None

    def _record_role(self, role: str) -> None:
        record = self._role_record()
        with contextlib.suppress(OSError):
            if record.exists() and record.read_text().strip() == role:
                return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        partial = record.with_suffix(".partial")
        partial.write_text(role + "\n")
        partial.rename(record)

    def _was_replica(self) -> bool:
        try:
            return self._role_record().read_text().strip() != "master"
        except OSError:
            return False

    def _idle(self) -> None:
        """Not (or no longer) master: let go of every file, ship nothing, remember it."""
        if self.resumed and self.index is not None:
            with contextlib.suppress(StoreError, OSError):
                self.ship(force=True)  # what the demoted master wrote last, once
            self.log(f"timeline {self.index.timeline}: paused, this pod is not master")
        for f in self.local:
            f.fd.close()
        self.local, self.index, self.resumed = [], None, False
        self.store_error = None
        with contextlib.suppress(OSError):
            self._record_role("replica")

    def _prune(self) -> None:
        """Retention: delete other timelines that ended more than ``retention_days`` ago."""
        if self.retention_days is None or self.index is None or time.time() < self.next_retention:
            return
        cutoff = time.time() - self.retention_days * 86400
        for tid in self.store.timelines():
            if tid == self.index.timeline:
                continue
            index = self.store.read_index(tid)
            ended = _timeline_start(tid)  # no index (yet): its id's start
            if index is not None:
                ended = index.last_archived_time or index.first_recoverable_time or ended
            if ended is None or ended >= cutoff:
                continue
            n = self.store.delete_timeline(tid)
            self.log(f"retention: timeline {tid} deleted ({n} objects, ended {iso(ended)})")
        self.next_retention = time.time() + _RETENTION_EVERY

    def _resume(self) -> None:
        """Go on with the state dir's timeline from the store's index, or start a new one."""
        path = self._timeline_file()
        if self._was_replica():
            self._start_timeline("promoted to master: a new timeline from this volume's AOF")
            return
        if not path.exists():
            self._start_timeline("no timeline on this volume yet")
            return
        tid = path.read_text().strip()
        index = self.store.read_index(tid)  # StoreError: retried by the loop
        if index is None:
            self._start_timeline(f"timeline {tid} has no index in the store")
            return
        names = {e.name: e for e in read_manifest(self.manifest)}
        local: list[_Local] = []
        for entry in index.files:
            if entry.kind == "base" or entry.closed:
                continue
            # an open increment: its local file must still be there and match what was stored
            try:
                fd = (self.aof_dir / entry.name).open("rb")
            except FileNotFoundError:
                self._start_timeline(f"{entry.name} was archived in part and is gone")
                return
            last = entry.segments[-1] if entry.segments else None
            if last is not None:
                data = os.pread(fd.fileno(), last.size, last.offset)
                if hashlib.sha256(data).hexdigest() != last.sha256:
                    fd.close()
                    self._start_timeline(f"{entry.name} differs from what was archived")
                    return
            local.append(_Local(entry, fd))
        self.index = index
        self.local = local
        incr = [f.seq for f in index.files if f.kind == "incr"]
        self.last_incr_seq = max(incr, default=0)
        current = max((e.seq for e in names.values() if e.type == "i"), default=0)
        if current < self.last_incr_seq:
            self._start_timeline("the directory's AOF is older than the archived one")
            return
        self.resumed = True
        self._record_role("master")
        self.log(f"timeline {tid}: resumed ({len(index.files)} files archived)")

    # --- watching the directory ---------------------------------------------------------------
    def poll(self) -> None:
        """Open every new file of the manifest (nothing is lost to a deletion after that)."""
        if self.index is None or not self.manifest.exists():
            return
        try:
            entries = read_manifest(self.manifest)
        except (OSError, ValueError) as exc:
            self.log(f"cannot read {self.manifest} yet: {exc}")
            return
        known = {f.entry.name for f in self.local} | {f.name for f in self.index.files}
        incr = sorted((e for e in entries if e.type == "i"), key=lambda e: e.seq)
        bases = [e for e in entries if e.type == "b"]
        fresh = not self.index.files and not self.local
        if fresh:
            # a new timeline: its base first, then the increments that follow it
            for b in bases:
                self._open(ArchivedFile("base", b.seq, b.name, first_incr_seq=incr[0].seq if incr else 0))
            for e in incr:
                self._open(ArchivedFile("incr", e.seq, e.name))
            if len(self.local) != len(bases) + len(incr):  # a rewrite replaced one meanwhile
                for f in self.local:
                    f.fd.close()
                self.local = []  # again at the next poll, from the new manifest
            return
        for e in incr:
            if e.name in known:
                continue
            if e.seq != self.last_incr_seq + 1:
                self._start_timeline(f"{self.aof_name} incremental {self.last_incr_seq + 1} was never seen")
                self.poll()
                return
            if not self._open(ArchivedFile("incr", e.seq, e.name)):
                self.poll()  # a new timeline: from the current base
                return
        for b in bases:
            if b.name not in known:
                self._open(ArchivedFile("base", b.seq, b.name, first_incr_seq=incr[0].seq if incr else 0))
        current = incr[-1].seq if incr else 0
        for f in self.local:
            if f.entry.kind == "incr" and f.entry.seq < current:
                f.entry.closed = True  # Redis writes a newer file: this one is final

    def _open(self, entry: ArchivedFile) -> bool:
        """Hold ``entry``'s file open; False when it is gone and that started a new timeline."""
        try:
            fd = (self.aof_dir / entry.name).open("rb")
        except FileNotFoundError:
            if entry.kind == "incr" and self.index is not None and self.index.files:
                self._start_timeline(f"{entry.name} was deleted before it could be archived")
                return False
            return True  # a fresh timeline, or a base replaced already: the next poll sees the newer one
        if entry.kind == "base":
            entry.time = int(os.fstat(fd.fileno()).st_mtime) + 1  # its data is at most this recent
        else:
            self.last_incr_seq = max(self.last_incr_seq, entry.seq)
        self.local.append(_Local(entry, fd))
        return True

    # --- shipping ---------------------------------------------------------------------------
    def ship(self, *, force: bool = False) -> None:
        """Store what is due, in order; a :class:`StoreError` leaves the rest for the next try."""
        assert self.index is not None
        index = self.index
        now = time.time()
        current = max((f.entry.seq for f in self.local if f.entry.kind == "incr"), default=None)
        for f in list(self.local):
            e = f.entry
            if e.kind == "base":
                key = f"{index.timeline}/base/{e.seq}{_suffix(e.name)}"
                whole = _Range(f.fd, 0, os.fstat(f.fd.fileno()).st_size)
                e.size, e.sha256 = self.store.put(key, whole)
                e.key = key
                index.files.append(e)
                self._done(f, f"base {e.name}: {e.size} bytes")
                continue
            is_current = e.seq == current and not e.closed
            if is_current and not force and now - self.current_shipped_at < self.timeout:
                continue  # not due yet
            read_at = time.time()
            size = os.fstat(f.fd.fileno()).st_size
            if size > e.shipped:
                offset = e.shipped
                key = f"{index.timeline}/incr/{e.seq}/{offset:016d}"
                n, sha = self.store.put(key, _Range(f.fd, offset, size - offset))
                if e not in index.files:
                    index.files.append(e)
                e.segments.append(Segment(key, offset, n, sha))
                index.last_archived_file = e.name
            if e.closed:
                if e not in index.files:
                    index.files.append(e)
                self._done(f, f"incremental {e.name}: closed at {e.shipped} bytes")
                continue
            self.current_shipped_at = read_at
            index.last_archived_time = max(
                index.last_archived_time or 0, int(read_at) - _WRITE_POSTPONE_BOUND
            )
            self.store.write_index(index)

    def _done(self, f: _Local, what: str) -> None:
        assert self.index is not None
        self.store.write_index(self.index)
        f.fd.close()
        self.local.remove(f)
        self.log(f"timeline {self.index.timeline}: archived {what}")

    # --- status -------------------------------------------------------------------------------
    def pending_bytes(self) -> int:
        total = 0
        for f in self.local:
            with contextlib.suppress(OSError):
                size = os.fstat(f.fd.fileno()).st_size
                total += size if f.entry.kind == "base" else size - f.entry.shipped
        return total

    def write_status(self) -> dict[str, Any]:
        index = self.index
        last = index.last_archived_time if index else None
        now = time.time()
        status = {
            "role": self.role,
            "active": self.resumed,
            "timeline": index.timeline if index else None,
            "lastArchivedTime": iso(last),
            "lastArchivedFile": index.last_archived_file if index else None,
            "firstRecoverableTime": iso(index.first_recoverable_time if index else None),
            "lagSeconds": round(now - (last if last is not None else self.started), 1),
            "pendingBytes": self.pending_bytes(),
            "storeError": self.store_error,
            "updated": iso(now),
        }
        self.status = status
        if self.status_file is not None:
            partial = self.status_file.with_name(self.status_file.name + ".partial")
            partial.write_text(json.dumps(status, sort_keys=True) + "\n")
            partial.rename(self.status_file)
        return status

    # --- the loop -----------------------------------------------------------------------------
    def step(self, *, force: bool = False) -> None:
        """One round: resume if needed, poll, ship when the store is not in backoff."""
        now = time.time()
        self.role = self.read_role()
        if self.role != "master":
            self._idle()
            self.write_status()
            return
        try:
            if not self.resumed and now >= self.next_attempt:
                if not self.manifest.exists():
                    self.store_error = None
                    self.write_status()
                    return
                self._resume()
            self.poll()
            if self.resumed and (force or now >= self.next_attempt):
                self.ship(force=force)
                self._prune()
                if self.store_error is not None:
                    self.log("the store answers again: archiving goes on")
                self.store_error, self.backoff = None, 1.0
        except StoreError as exc:
            if self.store_error != str(exc):
                self.log(f"archiving paused, retrying in {self.backoff:.0f}s: {exc}")
            self.store_error = str(exc)
            self.next_attempt = now + self.backoff
            self.backoff = min(self.backoff * 2, _BACKOFF_MAX)
        self.write_status()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        failure: str | None = None
        while not self._stop.is_set():
            try:
                self.step()
                failure = None
            except Exception as exc:  # any: a sidecar that exits makes its pod NotReady
                if repr(exc) != failure:  # once per new failure, not every poll
                    self.log(f"archiving step failed (retrying every {self.poll_interval:g}s): {exc!r}")
                failure = repr(exc)
                self.store_error = f"archiver error: {exc}"
                with contextlib.suppress(Exception):
                    self.write_status()
            self._stop.wait(self.poll_interval)
        self.next_attempt = 0.0
        with contextlib.suppress(Exception):
            self.step(force=True)  # what is left, once
        for f in self.local:
            f.fd.close()


def _suffix(name: str) -> str:
    return ".rdb" if name.endswith(".rdb") else ".aof"


class _StatusHandler(BaseHTTPRequestHandler):
    archiver: Archiver | _Reporting

    def do_GET(self) -> None:
        status = self.archiver.status
        if self.path == "/status":
            body, kind = json.dumps(status, sort_keys=True).encode(), "application/json"
        elif self.path == "/metrics":
            last = status.get("lastArchivedTime")
            stamp = (
                datetime.strptime(last, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp() if last else 0
            )
            body = (
                "# HELP rediscluster_archive_lag_seconds Seconds since the last archived second.\n"
                "# TYPE rediscluster_archive_lag_seconds gauge\n"
                f"rediscluster_archive_lag_seconds {status.get('lagSeconds', 0)}\n"
                "# HELP rediscluster_archive_last_archived_timestamp_seconds The last archived second.\n"
                "# TYPE rediscluster_archive_last_archived_timestamp_seconds gauge\n"
                f"rediscluster_archive_last_archived_timestamp_seconds {stamp:.0f}\n"
            ).encode()
            kind = "text/plain; version=0.0.4"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Reporting:
    """What the status endpoint serves: an :class:`Archiver`, or a fixed status."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.status = status


def _serve(args: argparse.Namespace, archiver: Archiver | _Reporting) -> ThreadingHTTPServer:
    handler = type("Handler", (_StatusHandler,), {"archiver": archiver})
    server = ThreadingHTTPServer((args.status_address, args.status_port), handler)
    threading.Thread(target=server.serve_forever, name="status", daemon=True).start()
    return server


def _report_only(args: argparse.Namespace, error: str) -> int:
    """A sidecar that cannot reach its store at all (no credentials): never crash-loop (that would
    make the pod NotReady and fail Redis over), serve the error until stopped, exit 0."""
    started = time.time()
    reporting = _Reporting({})
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = _serve(args, reporting)
    try:
        while not stop.is_set():
            reporting.status = {
                "role": None,
                "active": False,
                "timeline": None,
                "lastArchivedTime": None,
                "lastArchivedFile": None,
                "firstRecoverableTime": None,
                "lagSeconds": round(time.time() - started, 1),
                "pendingBytes": 0,
                "storeError": error,
                "updated": iso(time.time()),
            }
            stop.wait(1.0)
    finally:
        server.shutdown()
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.rediscluster.backup.archive")
    p.add_argument("--aof-dir", required=True, type=Path, help="redis-server's appenddirname")
    p.add_argument("--aof-name", default="appendonly.aof", help="redis-server's appendfilename")
    p.add_argument("--state-dir", required=True, type=Path, help="on the same volume: the timeline id")
    p.add_argument("--status-file", type=Path, help="the status JSON, replaced at every poll")
    p.add_argument("--status-port", type=int, help="serve GET /status and /metrics on this port")
    p.add_argument("--status-address", default="0.0.0.0", help="the address of --status-port")
    p.add_argument("--archive-timeout-seconds", type=float, default=60.0)
    p.add_argument("--poll-interval", type=float, default=0.5)
    p.add_argument("--role-file", type=Path, help="the pod's labels (downward API): ship only as master")
    p.add_argument("--role-label", default=ROLE_LABEL, help="the label of --role-file holding the role")
    p.add_argument("--retention-days", type=float, help="delete other timelines ended this long ago")
    add_store_arguments(p)
    return p


def add_store_arguments(p: argparse.ArgumentParser) -> None:
    """The archive's place in the store, as the archiver and a restore both take it (S3 keys come
    from the environment, never from arguments)."""
    p.add_argument("--s3-endpoint", required=True)
    p.add_argument("--s3-bucket", required=True)
    p.add_argument("--s3-prefix", default="", help="the destination's prefix (ends with / when set)")
    p.add_argument("--s3-region", default="us-east-1")
    p.add_argument("--s3-ca-bundle")
    p.add_argument("--namespace", required=True)
    p.add_argument("--cluster", required=True)


def store_from_arguments(args: argparse.Namespace) -> ArchiveStore:
    """The archive named by :func:`add_store_arguments`' options."""
    return ArchiveStore.connect(
        args.s3_endpoint,
        args.s3_bucket,
        archive_prefix(args.s3_prefix, args.namespace, args.cluster),
        region=args.s3_region,
        ca_bundle=args.s3_ca_bundle,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        store = store_from_arguments(args)
        archiver = Archiver(
            store,
            args.aof_dir,
            args.state_dir,
            aof_name=args.aof_name,
            archive_timeout=args.archive_timeout_seconds,
            poll_interval=args.poll_interval,
            status_file=args.status_file,
            role_file=args.role_file,
            role_label=args.role_label,
            retention_days=args.retention_days,
        )
    except (StoreError, ValueError) as exc:
        print(f"archive: {exc}", file=sys.stderr, flush=True)
        if isinstance(exc, StoreError) and args.status_port is not None:
            return _report_only(args, str(exc))
        return 3 if isinstance(exc, StoreError) else 2
    server = _serve(args, archiver) if args.status_port is not None else None
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: archiver.stop())
    print(
        f"archiving {args.aof_dir} to {store.s3.endpoint} bucket {args.s3_bucket} under {store.prefix}"
        f" (segments every {args.archive_timeout_seconds:g}s)",
        file=sys.stderr,
        flush=True,
    )
    try:
        archiver.run()
    finally:
        if server is not None:
            server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
