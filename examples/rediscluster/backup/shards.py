"""Backups per shard of a ``mode: cluster`` RedisCluster: where each shard's RDB goes, the manifest,
and the Job taking them (pure functions, no I/O).

What ``redis-cli --cluster backup`` does (one RDB per master) with each shard's RDB taken from
its replica when it has one, as Kubernetes objects:

- one Job ``<backup>-backup`` (the name replication mode uses, so a restarted operator finds it),
  one pod: an init container ``shard-<i>`` per shard, one after the other (one RDB stream at a
  time: bounded memory and load), each streaming its shard's RDB into ``shard-<i>.rdb`` under the
  backup's location and checking, on the shard's master once the RDB is stored, that the shard
  still serves exactly the slots it served when the backup started and has no open slot (a
  resharding meanwhile fails the shard: a retry, then ``Failed``, never a backup whose slot map
  lies); then the container ``manifest`` writes ``manifest.json`` from the shards' results;
- a TLS cluster's shards are read over TLS, verified against ``ca.crt`` (the only key of the TLS
  Secret mounted); with ``spec.users`` as the replication user (``PSYNC``, and ``CLUSTER NODES``
  for the check: ``users.CLUSTER_REPLICATION_RULES``), its password by ``secretKeyRef``;
- each container's termination message is its result, so ``status.shards`` fills in shard by
  shard; the manifest's SHA-256 (``status.sha256``) covers every shard's checksum;
- the objects: S3 ``<prefix><namespace>/<backup>/shard-<i>.rdb`` and ``.../manifest.json``; on a
  PVC ``<path>/shard-<i>.rdb`` and ``<path>/manifest.json`` (``path`` defaults to the backup's
  name).

The manifest (``sharded.manifest``, JSON, ``version`` 1) names the cluster, namespace and backup
and lists per shard its index, slot ranges, object key (or path) and location, size and SHA-256
(the source pods are in ``status.shards``).

A restore (``backup.restore``) seeds each shard's *first* pod (ordinal ``i*(1+r)``) from
``shard-<i>.rdb``: redis-server loads it before it serves anything, and a cluster node holding keys
of unassigned slots claims those slots itself at start, so the slots come back with their keys;
the shard's other pods start empty (CLUSTER REPLICATE refuses a node holding keys) and sync from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from examples.rediscluster.api.backup import BackupDestination, RedisBackup, ShardBackup
from examples.rediscluster.backup.job import (
    DEFAULT_DEADLINE_SECONDS,
    SOURCE_ANNOTATION,
    RedisLogin,
    destination_args,
    job_of,
    object_path,
    redis_ca_volume,
    restore_init_container,
    worker_container,
    worker_job,
)
from examples.rediscluster.backup.sharded import MANIFEST

__all__ = [
    "RESULTS_DIR",
    "ShardSource",
    "cluster_backup_job",
    "cluster_delete_job",
    "cluster_restore_init_container",
    "shard_object",
    "shards_from_annotation",
]

RESULTS_DIR = "/results"  # an emptyDir shared by the pod's containers: each shard's result file
SHARDS_ANNOTATION = "redis.pyctrl.dev/shards"


@dataclass(frozen=True, slots=True)
class ShardSource:
    """Shard ``index``: take its RDB from ``pod`` at ``ip``; check on its master at ``master_ip``."""

    index: int
    pod: str
    ip: str
    master_ip: str
    slots: tuple[str, ...]  # the ranges it serves ("0-5460")


def _folder(backup_name: str, namespace: str, destination: BackupDestination) -> str:
    """The backup's folder: the replication-mode object's path without ``.rdb``."""
    return object_path(backup_name, namespace, destination).removesuffix(".rdb")


def shard_object(backup_name: str, namespace: str, destination: BackupDestination, name: str) -> str:
    """The S3 key, or the path inside the claim, of ``name`` (``shard-<i>.rdb``, the manifest)."""
    return f"{_folder(backup_name, namespace, destination)}/{name}"


def _args_for(backup: RedisBackup, name: str) -> list[str]:
    """The worker's DESTINATION arguments for the object ``name`` of ``backup``."""
    args = destination_args(backup.name, backup.namespace, backup.spec.destination)
    path = object_path(backup.name, backup.namespace, backup.spec.destination)
    flag = "--s3-key" if backup.spec.destination.s3 is not None else "--path"
    at = args.index(flag) + 1
    assert args[at] == path
    args[at] = shard_object(backup.name, backup.namespace, backup.spec.destination, name)
    return args


def cluster_backup_job(
    backup: RedisBackup,
    sources: Sequence[ShardSource],
    image: str,
    login: RedisLogin,
    *,
    deadline: int = DEFAULT_DEADLINE_SECONDS,
) -> dict[str, Any]:
    """The Job taking one RDB per shard, then writing the manifest (module docstring), logged in
    to Redis as ``login`` says (``ca.crt`` the only key of its TLS Secret mounted)."""
    env = login.env()
    ca_volumes, ca_mount = redis_ca_volume(login.tls_secret)
    volumes = [{"name": "results", "emptyDir": {}}, *ca_volumes]
    results = {"name": "results", "mountPath": RESULTS_DIR}
    dest = backup.spec.destination
    init = []
    for s in sources:
        args = ["backup", "--source-host", s.ip, "--source-port", "6379", "--shard", str(s.index)]
        args += ["--check-host", s.master_ip, *login.ca_args()]
        args += [
            "--expect-slots",
            ",".join(s.slots) or "-",
            "--result-file",
            f"{RESULTS_DIR}/shard-{s.index}.json",
        ]
        args += _args_for(backup, f"shard-{s.index}.rdb")
        container = worker_container(f"shard-{s.index}", args, env, image, dest)
        container["volumeMounts"] = [*container["volumeMounts"], results, *ca_mount]
        init.append(container)
    args = ["manifest", "--results", RESULTS_DIR, "--shards", str(len(sources))]
    args += ["--cluster", backup.spec.cluster_name, "--namespace", backup.namespace, "--backup", backup.name]
    args += _args_for(backup, MANIFEST)
    main = worker_container("manifest", args, [], image, dest)
    main["volumeMounts"] = [*main["volumeMounts"], results]
    recorded = json.dumps({str(s.index): {"pod": s.pod, "slots": list(s.slots)} for s in sources})
    return job_of(
        backup,
        "backup",
        [main],
        deadline=deadline,
        init_containers=init,
        volumes=volumes,
        annotations={SOURCE_ANNOTATION: ",".join(s.pod for s in sources), SHARDS_ANNOTATION: recorded},
    )


def shards_from_annotation(annotations: Mapping[str, str]) -> list[ShardBackup] | None:
    """``status.shards`` as the Job was started (None: not a cluster-mode backup Job)."""
    if SHARDS_ANNOTATION not in annotations:
        return None
    recorded = json.loads(annotations[SHARDS_ANNOTATION])
    return [
        ShardBackup(index=int(i), source_pod=str(v["pod"]), slots=[str(r) for r in v["slots"]])
        for i, v in sorted(recorded.items(), key=lambda kv: int(kv[0]))
    ]


def cluster_restore_init_container(
    backup: RedisBackup, image: str, replicas_per_shard: int
) -> dict[str, Any]:
    """The init container seeding a cluster-mode pod from its shard's RDB (module docstring): the
    manifest is checked against the RedisBackup's SHA-256, the shard's RDB against the manifest."""
    container = restore_init_container(backup, image)
    assert backup.status is not None
    assert backup.status.sha256 is not None
    args = ["restore", "--target", "/data/dump.rdb", "--sha256", backup.status.sha256]
    container["args"] = [*args, "--replicas-per-shard", str(replicas_per_shard), *_args_for(backup, MANIFEST)]
    pod_name = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    container["env"] = [*container["env"], pod_name]
    return container


def cluster_delete_job(backup: RedisBackup, image: str) -> dict[str, Any]:
    """The Job removing every shard's RDB of a stored backup, then its manifest."""
    shards = len(backup.status.shards or []) if backup.status else 0
    args = ["delete", "--shards", str(shards), *_args_for(backup, MANIFEST)]
    return worker_job(backup, "delete", args, [], image, deadline=600)
