"""The worker's steps for a ``mode: cluster`` backup and restore (``backup.shards`` has the layout).

- :func:`checked_shard`: after a shard's RDB is stored, ask the shard's master (``CLUSTER NODES``)
  which slots it serves: exactly the ones the backup started with and none open (MIGRATING or
  IMPORTING), else :class:`ShardError` — a resharding during the backup would make the manifest's
  slot map disagree with the RDBs' keys; the result is also written to ``--result-file`` for the
  manifest step;
- :func:`write_manifest`: every shard's result file, into the manifest, stored like any object
  (nothing claims to be the manifest before it is complete);
- :func:`restore_shard`: the pod ``$POD_NAME`` downloads the manifest (checked against the
  RedisBackup's SHA-256), finds its shard and, if it is the shard's first pod, downloads that
  shard's RDB (checked against the manifest's size and SHA-256) into the target; other pods start
  empty and sync from their shard's master.
"""

from __future__ import annotations

import argparse
import io
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from examples.rediscluster.backup.store import Store
from examples.rediscluster.cluster.nodes import parse_cluster_nodes
from examples.rediscluster.cluster.slots import format_ranges, parse_ranges

__all__ = [
    "MANIFEST",
    "MANIFEST_VERSION",
    "ShardError",
    "checked_shard",
    "manifest",
    "parse_manifest",
    "restore_shard",
    "write_manifest",
]

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


def manifest(cluster: str, namespace: str, backup: str, shards: Sequence[Mapping[str, Any]]) -> bytes:
    """The manifest's bytes: one entry per shard result (as the ``shard-<i>`` containers wrote)."""
    entries = sorted(shards, key=lambda r: int(r["shard"]))
    if [int(r["shard"]) for r in entries] != list(range(len(entries))):
        raise ValueError(f"shard results {[r['shard'] for r in entries]} are not 0..{len(entries) - 1}")
    body = {
        "version": MANIFEST_VERSION,
        "cluster": cluster,
        "namespace": namespace,
        "backup": backup,
        "shards": [
            {k: r[k] for k in ("shard", "slots", "object", "location", "sizeBytes", "sha256")}
            for r in entries
        ],
    }
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()


def parse_manifest(data: bytes) -> list[dict[str, Any]]:
    """The shard entries of a manifest (ValueError when it is not one this operator wrote)."""
    body = json.loads(data)
    if not isinstance(body, dict) or body.get("version") != MANIFEST_VERSION:
        raise ValueError("not a version-1 backup manifest")
    shards = body.get("shards")
    if not isinstance(shards, list) or [s.get("shard") for s in shards] != list(range(len(shards))):
        raise ValueError("the manifest's shards are not numbered 0..n-1")
    return shards


class ShardError(Exception):
    """A shard's backup or restore cannot be trusted (worth one retry)."""


def checked_shard(
    args: argparse.Namespace,
    password: str | None,
    result: dict[str, object],
    *,
    username: str | None = None,
    tls_ca: str | None = None,
) -> dict[str, object]:
    """``result`` of shard ``args.shard``'s RDB, once its master proved the slots unchanged (asked
    as ``username``, over TLS verified against ``tls_ca`` when set)."""
    expected = parse_ranges(r for r in (args.expect_slots or "").split(",") if r and r != "-")
    import redis  # only a cluster-mode shard needs it: the worker starts faster without

    tls: dict[str, Any] = {}
    if (
        tls_ca is not None
    ):  # the chain is checked, not the name (see examples/rediscluster/shared/security/tls.py)
        tls = {"ssl": True, "ssl_ca_data": tls_ca, "ssl_cert_reqs": "required", "ssl_check_hostname": False}
    client = redis.Redis(
        host=args.check_host,
        port=args.check_port,
        username=username,
        password=password,
        socket_timeout=10,
        **tls,
    )
    try:
        text = client.execute_command("CLUSTER", "NODES")  # type: ignore[no-untyped-call]
    except redis.exceptions.RedisError as exc:
        raise ShardError(f"shard {args.shard}: cannot ask its master {args.check_host}: {exc}") from exc
    finally:
        client.close()
    me, peers, migrating, importing = parse_cluster_nodes(
        text.decode() if isinstance(text, bytes) else str(text)
    )
    served = set(peers[me].slots)
    if served != expected or migrating or importing:
        raise ShardError(
            f"shard {args.shard}: its master serves slots {','.join(format_ranges(served)) or 'none'}"
            f"{' with open slots' if migrating or importing else ''}, the backup started with "
            f"{args.expect_slots}: the cluster resharded during the backup"
        )
    key = args.s3_key if args.s3_endpoint else args.path
    out = {**result, "shard": args.shard, "slots": format_ranges(expected), "object": key}
    args.result_file.write_text(json.dumps(out, sort_keys=True))
    return out


def write_manifest(args: argparse.Namespace, store: Store) -> dict[str, object]:
    """Store the manifest of the ``args.shards`` shards whose results are in ``args.results``."""
    results = []
    for i in range(args.shards):
        path = args.results / f"shard-{i}.json"
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            raise ShardError(f"shard {i} left no result ({exc})") from exc
    data = manifest(args.cluster, args.namespace, args.backup, results)
    stored = store.put(io.BytesIO(data))
    total = sum(int(r["sizeBytes"]) for r in results)
    print(
        f"stored the manifest of {args.shards} shards ({total} bytes of RDB) at {stored.location}", flush=True
    )
    return {
        "location": stored.location,
        "sha256": stored.sha256,
        "sizeBytes": total,
        "manifestBytes": stored.size_bytes,
    }


def restore_shard(
    args: argparse.Namespace, store: Store, store_of: Callable[[argparse.Namespace, str], Store]
) -> dict[str, object]:
    """Seed ``args.target`` with this pod's shard's RDB, when this pod is its shard's first."""
    pod = os.environ.get("POD_NAME", "")
    ordinal_text = pod.rpartition("-")[2]
    if not ordinal_text.isdigit():
        raise ShardError(f"POD_NAME {pod!r} is not a StatefulSet pod name")
    ordinal, per_shard = int(ordinal_text), 1 + args.replicas_per_shard
    shard = ordinal // per_shard
    if ordinal % per_shard:
        print(f"{pod} is a replica of shard {shard}: it starts empty and syncs from its master", flush=True)
        return {"skipped": True, "shard": shard}
    local = Path(args.target).with_name(MANIFEST)
    store.get(local, sha256=args.sha256, size_bytes=args.size_bytes)
    try:
        entries = parse_manifest(local.read_bytes())
    except ValueError as exc:
        raise ShardError(f"{store.location}: {exc}") from exc
    finally:
        local.unlink(missing_ok=True)
    if shard >= len(entries):
        print(f"the backup has {len(entries)} shards: shard {shard} starts empty", flush=True)
        return {"skipped": True, "shard": shard}
    entry = entries[shard]
    source = store_of(args, str(entry["object"]).rpartition("/")[2])
    source.get(Path(args.target), sha256=str(entry["sha256"]), size_bytes=int(entry["sizeBytes"]))
    print(f"restored shard {shard} from {source.location} into {args.target} (SHA-256 checked)", flush=True)
    return {"location": source.location, "sha256": entry["sha256"], "shard": shard}
