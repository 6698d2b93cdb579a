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
  persistence, deletes ``nodes.conf`` first: a node that lost its data must come back as a new,
  empty node without slots, never as the old master claiming its slots with an empty dataset;
- Services: only the headless one (``<name>-headless``, ports redis and bus): clients are
  cluster-aware and learn the slot map from any node (``CLUSTER SLOTS``), which replaces the
  master Service of replication mode;
- ``redisConfig`` may not set the ``cluster-*`` directives the operator manages
  (:data:`CLUSTER_MANAGED_KEYS`): ``InvalidSpec`` naming the field.
"""

from __future__ import annotations

import hashlib
from typing import Any

from examples.rediscluster.api import RedisCluster, RedisClusterSpec
from examples.rediscluster.cluster.slots import pods_for
from examples.rediscluster.resources import (
    REDIS_PORT,
    InvalidSpec,
    desired_children,
    headless_service_name,
    redis_conf,
)

__all__ = ["BUS_PORT", "CLUSTER_MANAGED_KEYS", "cluster_children", "cluster_redis_conf"]

BUS_PORT = REDIS_PORT + 10000
CLUSTER_MANAGED_KEYS = frozenset(
    {
        "cluster-enabled",
        "cluster-config-file",
        "cluster-node-timeout",
        "cluster-port",
        "cluster-announce-ip",
        "cluster-announce-port",
        "cluster-announce-bus-port",
        "cluster-announce-tls-port",
        "cluster-require-full-coverage",
        "cluster-allow-replica-migration",
        "cluster-migration-barrier",
        "cluster-replica-no-failover",
        "cluster-slave-no-failover",
    }
)


def cluster_redis_conf(spec: RedisClusterSpec) -> str:
    """redis.conf for every pod of a cluster-mode RedisCluster."""
    bad = sorted(k for k in spec.redis_config if k.lower() in CLUSTER_MANAGED_KEYS)
    if bad:
        raise InvalidSpec(
            f"spec.redisConfig may not set {', '.join(bad)} (managed by the operator in cluster mode)"
        )
    base = [line for line in redis_conf(spec).splitlines() if not line.startswith("replicaof ")]
    return (
        "\n".join(
            [
                *base,
                "cluster-enabled yes",
                "cluster-config-file nodes.conf",
                f"cluster-node-timeout {spec.down_after_milliseconds}",
                "cluster-require-full-coverage no",
                "cluster-allow-replica-migration no",
            ]
        )
        + "\n"
    )


def _start_script(spec: RedisClusterSpec) -> str:
    start = (
        "exec redis-server /etc/redis/redis.conf "
        '--bind "$POD_IP" --cluster-announce-ip "$POD_IP" --replica-announce-ip "$POD_IP"'
    )
    if not spec.enable_persistence:
        start = f"rm -f /data/nodes.conf\n{start}"
    if spec.auth is None:
        return start
    return f'{start} - <<EOF\nrequirepass "$REDIS_PASSWORD"\nmasterauth "$REDIS_PASSWORD"\nEOF\n'


def cluster_children(cluster: RedisCluster, replicas: int | None = None) -> list[dict[str, Any]]:
    """Every child in creation order; ``replicas``: StatefulSet pods (default: all shards')."""
    spec = cluster.spec
    conf = cluster_redis_conf(spec)
    pods = replicas if replicas is not None else pods_for(spec.shards, spec.replicas_per_shard)
    wanted = {f"{cluster.name}-config", headless_service_name(cluster), cluster.name}
    out = []
    for child in desired_children(cluster, pods):
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
            template = child["spec"]["template"]
            template["metadata"]["annotations"]["redis.pyctrl.dev/config-hash"] = hashlib.sha256(
                conf.encode()
            ).hexdigest()[:16]
            (container,) = template["spec"]["containers"]
            container["command"] = ["sh", "-c", _start_script(spec)]
            container["ports"].append({"name": "bus", "containerPort": BUS_PORT, "protocol": "TCP"})
        out.append(child)
    return out
