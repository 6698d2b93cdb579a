"""The Kubernetes children of a ``mode: cluster`` RedisCluster, as pure functions of its spec.

Built from the replication-mode children (``resources.desired_children``: same labels, Secret
handling, persistence, resources and PodDisruptionBudget) with these differences:

- ``redis.conf``: no boot fence (``replicaof`` is refused in cluster mode; a fresh node has no
  slots, so it serves nothing until the operator gives it some), plus ``cluster-enabled yes``,
  ``cluster-config-file nodes.conf`` in ``/data`` (the PVC with persistence, the pod's emptyDir
  otherwise), ``cluster-node-timeout`` = ``downAfterMilliseconds`` (Redis Cluster's own failure
  detection and replica election fail a shard over), ``cluster-require-full-coverage no`` (a shard
  that is down fails only its own keys, the other shards keep serving) and
  ``cluster-allow-replica-migration no`` (replicas stay in their shard: the operator owns
  membership);
- the start script passes ``--cluster-announce-ip $POD_IP`` (peers dial the pod's IP) and, without
  persistence, *fences* a restarted container (``nodes.conf`` already there, the data gone): it
  comes back as a new node, a replica of an address where nothing listens, never as the old
  master claiming its slots with an empty dataset, and never a sync source for the old master's
  replicas (a replica with its link down refuses SYNC); the operator then attaches it to the
  shard's new master (``cluster.plan``);
- StatefulSet ``updateStrategy: OnDelete``: a changed template (image, redis.conf) reaches a pod
  when it restarts; the StatefulSet never rolls the shards itself (a rolling restart would take
  masters down one after another with no failover first);
- Services: only the headless one (``<name>-headless``, ports redis and bus): clients are
  cluster-aware and learn the slot map from any node (``CLUSTER SLOTS``), which replaces the
  master Service of replication mode;
- TLS (``spec.tls``): replication mode's lines (``port 0``, ``tls-port 6379``, ``tls-replication
  yes``, the Secret mounted) plus ``tls-cluster yes``: the bus on 16379 and the nodes' MIGRATE
  connections run over TLS; the probes and preStop use ``redis-cli --tls --cacert``;
- ACL users (``spec.users``): replication mode's ACL file (``aclfile``, ``masteruser
  pyctrl-replication``; ``masterauth`` from the ``<name>-acl`` Secret through stdin as escaped
  bytes, never argv),
  whose operator user holds the cluster commands too (``users.CLUSTER_OPERATOR_RULES``);
- ``redisConfig``: the same allowlist as replication mode (``redisconf``), which refuses every
  ``cluster-*`` directive: ``InvalidSpec`` naming the key (and the CRD's CEL rule before it).
"""

from __future__ import annotations

import hashlib
from typing import Any

from examples.rediscluster.api import RedisCluster, RedisClusterSpec
from examples.rediscluster.cluster.slots import pods_for
from examples.rediscluster.shared.resources import (
    DEFAULT_CLUSTER_DOMAIN,
    REDIS_PORT,
    auth_start,
    desired_children,
    headless_service_name,
    redis_conf,
)
from examples.rediscluster.shared.security import tls

__all__ = ["BUS_PORT", "cluster_children", "cluster_redis_conf"]

BUS_PORT = REDIS_PORT + 10000


def cluster_redis_conf(spec: RedisClusterSpec) -> str:
    """redis.conf for every pod of a cluster-mode RedisCluster."""
    base = [line for line in redis_conf(spec).splitlines() if not line.startswith("replicaof ")]
    return (
        "\n".join(
            [
                *base,
                *([tls.CLUSTER_CONF_LINE] if spec.tls is not None else []),
                "cluster-enabled yes",
                "cluster-config-file nodes.conf",
                f"cluster-node-timeout {spec.down_after_milliseconds}",
                "cluster-require-full-coverage no",
                "cluster-allow-replica-migration no",
            ]
        )
        + "\n"
    )


# Without persistence, a container that restarts in the same pod (its emptyDir, and nodes.conf,
# survive) has lost its data: it boots as a *new* node that is a replica of a master that does not
# exist (an address where nothing listens). A replica whose master link is down refuses to be a
# sync source (-NOMASTERLINK), so the old master's replicas, still pointed at this address, keep
# their data and one of them takes over; the operator then makes this node a replica of it.
_FENCE = (
    "if [ -s /data/nodes.conf ]; then "
    "me=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \\n'); "
    "fence=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \\n'); "
    "printf '%s %s:6379@16379 myself,slave %s 0 0 0 connected\\n"
    "%s 127.255.255.254:1@2 master - 0 0 0 connected\\n"
    'vars currentEpoch 0 lastVoteEpoch 0\\n\' "$me" "$POD_IP" "$fence" "$fence" > /data/nodes.conf; '
    "fi"
)


def _start_script(spec: RedisClusterSpec) -> str:
    start = (
        "exec redis-server /etc/redis/redis.conf "
        '--bind "$POD_IP" --cluster-announce-ip "$POD_IP" --replica-announce-ip "$POD_IP"'
    )
    if not spec.enable_persistence:
        start = f"{_FENCE}\n{start}"
    return auth_start(spec, start)  # passwords as data on stdin (resources.password_lines)


def cluster_children(
    cluster: RedisCluster, replicas: int | None = None, *, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> list[dict[str, Any]]:
    """Every child in creation order; ``replicas``: StatefulSet pods (default: all shards');
    ``cluster_domain``: as in ``shared.resources.desired_children``."""
    spec = cluster.spec
    conf = cluster_redis_conf(spec)
    pods = replicas if replicas is not None else pods_for(spec.shards, spec.replicas_per_shard)
    wanted = {f"{cluster.name}-config", headless_service_name(cluster), cluster.name}
    out = []
    for child in desired_children(cluster, pods, cluster_domain=cluster_domain):
        kind, name = child["kind"], child["metadata"]["name"]
        if kind == "Service" and name != headless_service_name(cluster):
            continue
        if kind == "ConfigMap" and name in wanted:
            child["data"] = {"redis.conf": conf}
        elif kind == "Service":
            child["spec"]["ports"].append(
                {"name": "bus", "port": BUS_PORT, "targetPort": BUS_PORT, "protocol": "TCP"}
            )
        elif kind == "StatefulSet":
            # a rolling update would restart shard after shard without failing each over first
            child["spec"]["updateStrategy"] = {"type": "OnDelete"}
            template = child["spec"]["template"]
            template["metadata"]["annotations"]["redis.pyctrl.dev/config-hash"] = hashlib.sha256(
                conf.encode()
            ).hexdigest()[:16]
            container = template["spec"]["containers"][0]  # redis (the exporter sidecar follows)
            container["command"] = ["sh", "-c", _start_script(spec)]
            container["ports"].append({"name": "bus", "containerPort": BUS_PORT, "protocol": "TCP"})
        out.append(child)
    return out
