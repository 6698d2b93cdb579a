"""``python -m examples.rediscluster.backup.worker``: the program the backup Jobs (and the restore
init container) run, from the operator's own image.

Commands:

- ``backup --source-host IP [--source-port 6379] [--tls-ca-file FILE] DESTINATION``: stream an
  RDB off that Redis server (``rdb.RdbStream``; over TLS verified against FILE when given) through
  SHA-256 into the destination (``store``);
- ``restore --target /data/dump.rdb --sha256 HEX [--size-bytes N] DESTINATION``: download the
  backup, check its size and SHA-256, and only then put it where redis-server loads it (nothing
  when ``RESTORE_DONE=true``: the cluster was seeded already, a new pod syncs from its master);
- ``delete DESTINATION``: remove a stored backup (retention, RedisBackup deletion);

and for a ``mode: cluster`` cluster (``backup.shards``, carried out by ``backup.sharded``):
``backup`` with ``--shard I --check-host MASTER --expect-slots R --result-file F`` (one shard's RDB,
then its slots checked on its master), ``manifest --results DIR --shards N ...`` (the manifest from
the shards' result files), ``restore --replicas-per-shard R`` (DESTINATION is the manifest: the
pod ``$POD_NAME`` seeds itself from its shard's RDB if it is the shard's first pod) and ``delete
--shards N`` (every shard's RDB, then the manifest);

DESTINATION is ``--pvc-mount DIR --pvc-claim NAME --path P`` or ``--s3-endpoint URL --s3-bucket B
--s3-key K [--s3-region R] [--s3-ca-bundle FILE]``. Secrets come only from the environment
(``REDIS_PASSWORD``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``), set by ``secretKeyRef``;
``REDIS_USER`` names the ACL user of ``REDIS_PASSWORD`` when the cluster has ``spec.users``.

The result is one JSON line written to the termination-message file (``$TERMINATION_LOG``,
default ``/dev/termination-log``: the Job pod's ``terminationMessagePath``), which the operator
reads from the pod's status: ``{"location", "sizeBytes", "sha256", "peakRssBytes"}`` on
success, ``{"error"}`` otherwise. Exit codes: 0 done; 1 failed, worth retrying (unreachable
endpoint or Redis); 3 failed for good (rejected credentials, missing bucket, corrupt backup):
the Job's podFailurePolicy fails the Job at once on 3.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from examples.rediscluster.backup import sharded
from examples.rediscluster.backup.aof import AppendOnlyFiles
from examples.rediscluster.backup.rdb import RdbError, RdbStream
from examples.rediscluster.backup.store import PvcStore, S3Store, Store, StoreError

__all__ = ["EXIT_PERMANENT", "EXIT_RETRY", "main"]

EXIT_RETRY = 1
EXIT_PERMANENT = 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.rediscluster.backup.worker")
    sub = p.add_subparsers(dest="command", required=True)
    backup = sub.add_parser("backup", help="take an RDB from a Redis server into the destination")
    backup.add_argument("--source-host", required=True)
    backup.add_argument("--source-port", type=int, default=6379)
    backup.add_argument("--tls-ca-file", type=Path, default=None)
    backup.add_argument("--shard", type=int, help="cluster mode: the shard this RDB is of")
    backup.add_argument("--check-host", help="cluster mode: the shard's master, checked after the RDB")
    backup.add_argument("--check-port", type=int, default=6379)
    backup.add_argument("--expect-slots", help='cluster mode: the slot ranges it must serve ("0-5460,…")')
    backup.add_argument("--result-file", type=Path, help="cluster mode: where the manifest step reads")
    manifest = sub.add_parser("manifest", help="cluster mode: write the manifest of the shards' RDBs")
    manifest.add_argument("--results", required=True, type=Path)
    manifest.add_argument("--shards", required=True, type=int)
    manifest.add_argument("--cluster", required=True)
    manifest.add_argument("--namespace", required=True)
    manifest.add_argument("--backup", required=True)
    restore = sub.add_parser("restore", help="download and check a backup before redis-server starts")
    restore.add_argument("--target", required=True, type=Path)
    restore.add_argument("--sha256", required=True)
    restore.add_argument("--size-bytes", type=int, default=None)
    restore.add_argument("--aof-dir", type=Path, help="persistence on: make the RDB this AOF's base")
    restore.add_argument("--aof-name", default="appendonly.aof", help="appendfilename of redis.conf")
    restore.add_argument(
        "--replicas-per-shard", type=int, help="cluster mode: DESTINATION is a manifest; $POD_NAME's shard"
    )
    delete = sub.add_parser("delete", help="remove a stored backup")
    delete.add_argument("--shards", type=int, help="cluster mode: DESTINATION is the manifest of N shards")
    for cmd in (backup, manifest, restore, delete):
        cmd.add_argument("--pvc-mount", type=Path)
        cmd.add_argument("--pvc-claim")
        cmd.add_argument("--path")
        cmd.add_argument("--s3-endpoint")
        cmd.add_argument("--s3-bucket")
        cmd.add_argument("--s3-key")
        cmd.add_argument("--s3-region", default="us-east-1")
        cmd.add_argument("--s3-ca-bundle")
    return p


def _store(args: argparse.Namespace, sibling: str | None = None) -> Store:
    """DESTINATION's store; ``sibling``: the object of that name beside it (cluster mode)."""
    key = args.s3_key if args.s3_endpoint else args.path
    if sibling is not None:
        key = f"{key.rpartition('/')[0]}/{sibling}"
    if args.s3_endpoint:
        return S3Store(args.s3_endpoint, args.s3_bucket, key, args.s3_region, ca_bundle=args.s3_ca_bundle)
    return PvcStore(args.pvc_mount, key, args.pvc_claim)


def _report(result: dict[str, object]) -> None:
    line = json.dumps(result, sort_keys=True)
    print(line, flush=True)
    path = Path(os.environ.get("TERMINATION_LOG", "/dev/termination-log"))
    try:
        path.write_text(line)
    except OSError as exc:
        print(f"cannot write the termination message to {path}: {exc}", file=sys.stderr)


def _run(args: argparse.Namespace) -> dict[str, object]:
    store = _store(args)
    if args.command == "backup":
        started = time.monotonic()
        password = os.environ.get("REDIS_PASSWORD") or None
        ca = args.tls_ca_file.read_text() if args.tls_ca_file is not None else None
        user = os.environ.get("REDIS_USER") or None
        with RdbStream(args.source_host, args.source_port, password, tls_ca=ca, username=user) as rdb:
            stored = store.put(rdb)
        seconds = time.monotonic() - started
        print(f"stored {stored.size_bytes} bytes at {stored.location} in {seconds:.1f}s", flush=True)
        result: dict[str, object] = {
            "location": stored.location,
            "sizeBytes": stored.size_bytes,
            "sha256": stored.sha256,
        }
        if args.shard is not None:
            result = sharded.checked_shard(args, password, result, username=user, tls_ca=ca)
        return result
    if args.command == "manifest":
        return sharded.write_manifest(args, store)
    if args.command == "restore":
        return _restore(args, store)
    for i in range(args.shards or 0):
        shard = _store(args, f"shard-{i}.rdb")
        shard.delete()
        print(f"deleted {shard.location}", flush=True)
    store.delete()
    print(f"deleted {store.location}", flush=True)
    return {"location": store.location, "deleted": True}


def _restore(args: argparse.Namespace, store: Store) -> dict[str, object]:
    if os.environ.get("RESTORE_DONE") == "true":
        print("the cluster was seeded already: this pod syncs from its master instead", flush=True)
        return {"skipped": True}
    aof = None if args.aof_dir is None else AppendOnlyFiles(args.aof_dir, args.aof_name)
    if aof is not None and aof.exists():
        print(f"{aof.manifest} exists: this pod's volume holds its data already", flush=True)
        return {"skipped": True}
    if args.replicas_per_shard is not None:
        result = sharded.restore_shard(args, store, _store)
    else:
        store.get(args.target, sha256=args.sha256, size_bytes=args.size_bytes)
        print(f"restored {store.location} into {args.target} (SHA-256 checked)", flush=True)
        result = {"location": store.location, "sha256": args.sha256}
    if aof is not None and args.target.exists():
        aof.seed(args.target)
        print(f"{args.target} is now the base of {aof.manifest} (appendonly yes loads it)", flush=True)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result = _run(args)
    except StoreError as exc:
        _report({"error": str(exc)})
        return EXIT_PERMANENT if exc.permanent else EXIT_RETRY
    except (RdbError, sharded.ShardError) as exc:
        _report({"error": str(exc)})
        return EXIT_RETRY
    # the worker's own peak memory (kernel ru_maxrss, KiB): it must not grow with the dataset
    result["peakRssBytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    _report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
