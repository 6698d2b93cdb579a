"""Restore to a point in time: a multi-part AOF assembled from an archived base and the archived
increments of its timeline (``backup.archive``), cut at a target second with Redis's own
``redis-check-aof --truncate-to-timestamp`` — the counterpart of PostgreSQL's
``recovery_target_time`` (CloudNativePG's ``bootstrap.recovery.recoveryTarget.targetTime``).

``python -m examples.rediscluster.backup.pitr`` with the archiver's S3 arguments and either
``range`` (print the recoverable range of every timeline as JSON) or ``restore --target-time
<RFC 3339> --aof-dir DIR [--aof-name appendonly.aof] [--timeline ID] [--base-seq N]``.

What a restore does, in ``--aof-dir`` (redis-server's ``appenddirname``, empty or absent):

1. picks the timeline whose recoverable range holds the target (the newest if several) — or the
   one named — and the newest archived base no more recent than the target (or ``--base-seq``: a
   RedisBackup taken with archiving on names the archived base it is);
2. downloads the base and every segment of every increment after it, each checked against the
   SHA-256 and size the index records (a mismatch fails naming the object), the increments
   concatenated in order into one incremental file (each holds whole commands and its own
   ``SELECT``, so the concatenation is what Redis would have replayed file after file);
3. writes the manifest (base, then that incremental file), completes a segment cut inside a
   command (``redis-check-aof --fix``: the tail of the last segment only), and cuts the increments
   after the target's second (``--truncate-to-timestamp``: the first ``#TS:`` annotation past the
   target and everything after it go);
4. only then renames the staging directory into place: a failed restore leaves no AOF behind.

A target before the timeline's first base or after its ``lastArchivedTime`` is refused with the
recoverable ranges in the message. The granularity is the second of Redis's ``#TS`` annotations:
every write Redis executed up to the end of the target second (by Redis's clock) is kept, every
write after it is not. Secrets: as for the archiver, from the environment only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from examples.rediscluster.backup.aof import AppendOnlyFiles
from examples.rediscluster.backup.archive import (
    ArchivedFile,
    ArchiveStore,
    TimelineIndex,
    add_store_arguments,
    iso,
    store_from_arguments,
)
from examples.rediscluster.backup.store import StoreError

__all__ = ["PitrError", "RestoreResult", "main", "parse_time", "recoverable_ranges", "restore_to_time"]


class PitrError(Exception):
    """A restore that cannot be done as asked (out of range, corrupt object, redis-check-aof)."""


@dataclass(frozen=True)
class RestoreResult:
    timeline: str
    base: str
    target: int
    increments: int
    replayed_bytes: int
    kept_bytes: int
    fixed_tail: bool  # the last segment ended inside a command, which ``--fix`` dropped


def parse_time(text: str) -> int:
    """An RFC 3339 time (``2026-12-03T15:20:00Z``, an offset or none meaning UTC) as epoch seconds."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise PitrError(f"{text!r} is not an RFC 3339 time (2026-12-03T15:20:00Z)") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp())


def recoverable_ranges(store: ArchiveStore) -> list[TimelineIndex]:
    """The index of every timeline that has a base, oldest first."""
    found = []
    for tid in store.timelines():
        index = store.read_index(tid)
        if index is not None and index.first_recoverable_time is not None:
            found.append(index)
    return found


def _describe(indexes: Sequence[TimelineIndex]) -> str:
    if not indexes:
        return "nothing is archived"
    return "; ".join(
        f"timeline {i.timeline}: {iso(i.first_recoverable_time)} to {iso(i.last_archived_time)}"
        for i in indexes
    )


def _choose(indexes: list[TimelineIndex], target: int, timeline: str | None) -> TimelineIndex:
    candidates = [i for i in indexes if timeline is None or i.timeline == timeline]
    if timeline is not None and not candidates:
        raise PitrError(f"no timeline {timeline!r} in the archive; recoverable: {_describe(indexes)}")
    inside = [
        i
        for i in candidates
        if i.first_recoverable_time is not None
        and i.last_archived_time is not None
        and i.first_recoverable_time <= target <= i.last_archived_time
    ]
    if not inside:
        raise PitrError(f"{iso(target)} is outside the recoverable range: {_describe(candidates)}")
    return inside[-1]


def _run(argv: list[str], what: str, stdin: str = "") -> str:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-5:])
        raise PitrError(f"{what} failed ({proc.returncode}): {tail}")
    return proc.stdout


def restore_to_time(
    store: ArchiveStore,
    target: int,
    aof: AppendOnlyFiles,
    *,
    timeline: str | None = None,
    base_seq: int | None = None,
    check_aof: str = "redis-check-aof",
    progress: Callable[[str], None] = lambda _msg: None,
) -> RestoreResult:
    """Assemble ``aof`` (absent or empty) at second ``target``; see the module docstring."""
    if aof.exists():
        raise PitrError(f"{aof.manifest} exists: restore into an empty directory")
    index = _choose(recoverable_ranges(store), target, timeline)
    bases = [f for f in index.files if f.kind == "base" and (base_seq is None or f.seq == base_seq)]
    usable = [b for b in bases if b.time <= target]
    if not usable:
        first = min((b.time for b in bases), default=None)
        raise PitrError(
            f"{iso(target)} is before the base"
            + (f" {base_seq}" if base_seq is not None else "")
            + f" of timeline {index.timeline} ({iso(first)}); recoverable: {_describe([index])}"
        )
    base = max(usable, key=lambda b: b.seq)
    incr = sorted(
        (f for f in index.files if f.kind == "incr" and f.seq >= base.first_incr_seq), key=lambda f: f.seq
    )
    _check_chain(index, base, incr)
    staging = aof.directory.with_name(aof.directory.name + ".pitr-partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        base_name = f"{aof.name}.1.base.{'rdb' if base.key.endswith('.rdb') else 'aof'}"
        progress(f"base {base.key}: {base.size} bytes")
        store.object(base.key).get(staging / base_name, sha256=base.sha256, size_bytes=base.size)
        incr_name = f"{aof.name}.1.incr.aof"
        replayed = 0
        with (staging / incr_name).open("wb") as out:
            for f in incr:
                for seg in f.segments:
                    part = staging / "segment.partial"
                    store.object(seg.key).get(part, sha256=seg.sha256, size_bytes=seg.size)
                    with part.open("rb") as src:
                        shutil.copyfileobj(src, out, 1024 * 1024)
                    part.unlink()
                    replayed += seg.size
                progress(f"increment {f.name}: {f.shipped} bytes")
        manifest = staging / f"{aof.name}.manifest"
        manifest.write_text(
            f"file {base_name} seq 1 type b\nfile {incr_name} seq 1 type i\n",
        )
        fixed = _cut(check_aof, manifest, target, progress)
        kept = (staging / incr_name).stat().st_size
        progress(f"cut at {iso(target)}: {kept} of {replayed} incremental bytes kept")
        with manifest.open("rb+") as m:
            os.fsync(m.fileno())
        if aof.directory.exists():
            aof.directory.rmdir()  # empty (checked above: no manifest; rmdir refuses anything else)
        staging.rename(aof.directory)
    except (StoreError, OSError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise PitrError(str(exc)) from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RestoreResult(index.timeline, base.key, target, len(incr), replayed, kept, fixed)


def _cut(check_aof: str, manifest: Path, target: int, progress: Callable[[str], None]) -> bool:
    """Complete the tail, then truncate at ``target``; True when the tail needed ``--fix``."""
    # a segment may end inside a command: --fix drops that partial tail of the last file
    check = subprocess.run([check_aof, str(manifest)], capture_output=True, text=True, check=False)
    fixed = check.returncode != 0
    if fixed:
        progress("the last segment ends inside a command: redis-check-aof --fix drops it")
        _run([check_aof, "--fix", str(manifest)], "redis-check-aof --fix", stdin="y\n")
    _run([check_aof, "--truncate-to-timestamp", str(target), str(manifest)], "redis-check-aof")
    return fixed


def _check_chain(index: TimelineIndex, base: ArchivedFile, incr: list[ArchivedFile]) -> None:
    """The increments after ``base`` are consecutive and each one's segments leave no hole."""
    expected = base.first_incr_seq
    for f in incr:
        if f.seq != expected:
            raise PitrError(
                f"timeline {index.timeline}: increment {expected} is missing from the archive after "
                f"{base.key} (the index lists {f.seq})"
            )
        expected += 1
        if not f.closed and f is not incr[-1]:
            raise PitrError(f"timeline {index.timeline}: {f.name} is archived in part only, yet not last")
        offset = 0
        for seg in f.segments:
            if seg.offset != offset:
                raise PitrError(f"{seg.key}: starts at {seg.offset}, the previous segment ends at {offset}")
            offset += seg.size


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.rediscluster.backup.pitr")
    sub = p.add_subparsers(dest="command", required=True)
    ranges = sub.add_parser("range", help="print the recoverable range of every timeline (JSON)")
    restore = sub.add_parser("restore", help="assemble the AOF of --aof-dir at --target-time")
    restore.add_argument("--target-time", required=True, help="RFC 3339, e.g. 2026-12-03T15:20:00Z")
    restore.add_argument("--aof-dir", required=True, type=Path)
    restore.add_argument("--aof-name", default="appendonly.aof")
    restore.add_argument("--timeline")
    restore.add_argument("--base-seq", type=int)
    restore.add_argument(
        "--keep-existing",
        action="store_true",
        help="an init container: exit 0 when the directory holds an AOF already or RESTORE_DONE=true",
    )
    for cmd in (ranges, restore):
        add_store_arguments(cmd)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "restore":
        aof = AppendOnlyFiles(args.aof_dir, args.aof_name)
        if args.keep_existing and (os.environ.get("RESTORE_DONE") == "true" or aof.exists()):
            why = f"{aof.manifest} exists" if aof.exists() else "the cluster was restored already"
            print(json.dumps({"skipped": why}), flush=True)
            return 0
    try:
        store = store_from_arguments(args)
        if args.command == "range":
            out = [
                {
                    "timeline": i.timeline,
                    "firstRecoverableTime": iso(i.first_recoverable_time),
                    "lastArchivedTime": iso(i.last_archived_time),
                }
                for i in recoverable_ranges(store)
            ]
            print(json.dumps(out, indent=2))
            return 0
        started = time.monotonic()
        os.umask(0o002)  # the directory and files group-writable: Redis may run as another uid of the group
        result = restore_to_time(
            store,
            parse_time(args.target_time),
            aof,
            timeline=args.timeline,
            base_seq=args.base_seq,
            progress=lambda msg: print(msg, file=sys.stderr, flush=True),
        )
    except (PitrError, StoreError) as exc:
        # the last line is the container's termination message (FallbackToLogsOnError)
        print(json.dumps({"error": str(exc)}), flush=True)
        return 3
    print(
        json.dumps(
            {
                "timeline": result.timeline,
                "base": result.base,
                "targetTime": iso(result.target),
                "increments": result.increments,
                "replayedBytes": result.replayed_bytes,
                "keptBytes": result.kept_bytes,
                "fixedTail": result.fixed_tail,
                "seconds": round(time.monotonic() - started, 2),
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
