"""The Kubernetes children of a RedisCluster, as pure functions of its spec (no I/O).

Children (each carries a controller ownerReference to the RedisCluster, set by the reconciler):

- ConfigMap ``<name>-config``: ``redis.conf`` built from the spec (``maxmemory`` from
  ``memoryLimit``, persistence, ``redisConfig`` through ``redisconf.render``: allowlisted
  directives only, each one line whose arguments Redis reads back unchanged); never the
  password. The pod template's ``redis.pyctrl.dev/config-hash`` covers all of it but the
  :data:`LIVE_KEYS` settings, which the operator applies with ``CONFIG SET`` instead of a restart;
- Service ``<name>-headless`` (stable pod DNS, not-ready addresses published), ``<name>-master``
  (selects the pod labelled ``redis.pyctrl.dev/role=master``) and ``<name>-replicas``;
- StatefulSet ``<name>`` (with ``spec.monitoring.exporter``, the ``redis_exporter`` sidecar of
  ``shared.exporter`` beside the ``redis`` container; Parallel pod management;
  ``updateStrategy: OnDelete``, the operator rolls a new template itself, see ``rollout``; one
  PVC per pod with persistence; pods spread over nodes and zones by default, see ``scheduling``;
  Pod Security "restricted": uid/gid 999, every container unprivileged with a read-only root and
  no service-account token, see ``security.podsecurity``);
- PodDisruptionBudget ``<name>`` (``maxUnavailable: 1``): a drain evicts one pod at a time.

Planned switchover on deletion (a drain, an eviction, a rolling update): the container's preStop
hook keeps a master serving while it has replicas connected, for at most ``PRESTOP_WAIT_SECONDS``,
until the operator — seeing the master pod's deletionTimestamp — has handed the master over with
``FAILOVER TO``; it then stays on as the new master's replica for ``PRESTOP_LINGER_SECONDS`` —
Redis makes a promoted replica's own replicas reconnect, which they do within a second, and
meanwhile this one acknowledges the new master's ``WAIT`` — before SIGTERM stops it. A replica,
or a master with no replica left (the whole cluster being deleted), stops at once; if the
operator is away the wait ends after the bound and the usual failover follows.

Boot fencing (REFERENCE "A pod that is not the recorded master must never boot as a master"): every
pod boots as a replica of an address where nothing listens (``replicaof 127.255.255.254 1``), so
it serves no writes and — being a replica with its master link down — refuses to be a sync source
(``-NOMASTERLINK``). Only the operator, after recording its decision in status, makes a pod master.
The password reaches Redis from the Secret through an environment reference, then on stdin as a
redis.conf argument in which every byte is a ``\\xhh`` escape (:func:`password_lines`): it is in no
argv, ConfigMap, log or status, and never shell or redis.conf text (a ``"``, ``\\``, newline or
directive in it is part of the password).
"""

from __future__ import annotations

import hashlib
from typing import Any

from examples.rediscluster.api import RedisCluster, RedisClusterSpec, redisconf
from examples.rediscluster.api.scheduling import pod_scheduling
from examples.rediscluster.shared.security import auth, tls, users
from examples.rediscluster.shared.security.podsecurity import REDIS_UID, restrict_pod

__all__ = [
    "FENCE_HOST",
    "FENCE_PORT",
    "LIVE_KEYS",
    "PRESTOP_WAIT_SECONDS",
    "QUOTE_FUNCTION",
    "REDIS_CONTAINER",
    "REDIS_PORT",
    "ROLE_LABEL",
    "InvalidSpec",
    "auth_start",
    "config_map",
    "desired_children",
    "headless_service_name",
    "labels",
    "live_settings",
    "master_service",
    "parse_quantity",
    "password_lines",
    "pod_disruption_budget",
    "redis_conf",
    "selector",
    "selector_labels",
    "statefulset",
    "tenant_lines",
]

REDIS_PORT = 6379
REDIS_CONTAINER = "redis"
ROLE_LABEL = "redis.pyctrl.dev/role"
FENCE_HOST, FENCE_PORT = "127.255.255.254", 1
#: the longest a terminating master waits in preStop for the operator's switchover
PRESTOP_WAIT_SECONDS = 20
#: how long a handed-over master stays on as the new master's replica before it stops
PRESTOP_LINGER_SECONDS = 2
TERMINATION_GRACE_SECONDS = 30
#: ``redisConfig`` directives Redis changes at run time (``CONFIG SET``): a change of only these
#: restarts no pod — the operator sets them on every pod (``live_config``) and keeps them in
#: redis.conf for the next start; any other change is a new pod template, rolled pod by pod.
LIVE_KEYS = frozenset({
    "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity", "maxclients", "timeout",
    "tcp-keepalive", "hz", "dynamic-hz", "loglevel", "slowlog-log-slower-than", "slowlog-max-len",
    "latency-monitor-threshold", "latency-tracking", "notify-keyspace-events", "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire", "lazyfree-lazy-server-del", "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush", "activedefrag", "active-defrag-cycle-min", "active-defrag-cycle-max",
    "active-defrag-ignore-bytes", "active-defrag-threshold-lower", "active-defrag-threshold-upper",
    "active-expire-effort", "hash-max-listpack-entries", "hash-max-listpack-value",
    "list-max-listpack-size", "list-compress-depth", "set-max-intset-entries", "set-max-listpack-entries",
    "set-max-listpack-value", "zset-max-listpack-entries", "zset-max-listpack-value",
    "stream-node-max-bytes", "stream-node-max-entries", "min-replicas-to-write", "min-replicas-max-lag",
    "repl-backlog-size", "repl-backlog-ttl", "repl-timeout", "client-output-buffer-limit",
    "proto-max-bulk-len", "busy-reply-threshold", "lua-time-limit",
}) & redisconf.ALLOWED  # fmt: skip
# Only directives a tenant may set at all are live ones: maxclients, min-replicas-*,
# proto-max-bulk-len (refused by redisconf), loglevel and repl-timeout (not allowlisted) drop out.
_SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "m": 10**-3,
}  # fmt: skip


class InvalidSpec(ValueError):
    """The spec passed the schema but cannot be run (a terminal reconcile error).

    ``reported``: an Event already said why (e.g. ``ConfigRejected``), so the children step adds
    no ``InvalidSpec`` Event of its own."""

    def __init__(self, message: str, *, reported: bool = False) -> None:
        super().__init__(message)
        self.reported = reported


def parse_quantity(value: str | int) -> float:
    """A Kubernetes quantity in base units (``"1Gi"`` → 1073741824.0, ``"500m"`` → 0.5)."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(text)


def labels(cluster: RedisCluster) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "redis",
        "app.kubernetes.io/instance": cluster.name,
        "app.kubernetes.io/managed-by": "pyctrl-rediscluster",
    }


def selector_labels(cluster: RedisCluster) -> dict[str, str]:
    """The labels that select the cluster's pods (all but managed-by)."""
    return {k: v for k, v in labels(cluster).items() if k != "app.kubernetes.io/managed-by"}


def selector(cluster: RedisCluster) -> str:
    """The pods' label selector, serialised (status.selector, for the scale subresource)."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(cluster).items()))


#: the cluster DNS domain Pods' stable names end in (the kubelet's ``clusterDomain``; the
#: operator's ``--cluster-domain``)
DEFAULT_CLUSTER_DOMAIN = "cluster.local"


def headless_service_name(cluster: RedisCluster) -> str:
    return f"{cluster.name}-headless"


def redis_conf(spec: RedisClusterSpec) -> str:
    """redis.conf for every pod of the cluster (fenced: see the module docstring)."""
    tenant = tenant_lines(spec)
    lines = [
        "# generated by the pyctrl RedisCluster operator; edits are overwritten",
        *(tls.conf_lines() if spec.tls is not None else [f"port {REDIS_PORT}"]),
        # clients come from other pods: the password (on unless spec.auth.enabled is false)
        # protects the server, not protected-mode
        "protected-mode no",
        "dir /data",
        f"replicaof {FENCE_HOST} {FENCE_PORT}",
        "replica-read-only yes",
        "replica-serve-stale-data yes",
        # A replica re-attached after a failover that needs a full sync gets it at once instead
        # of after Redis' default 5 s wait for more replicas (few replicas per master here).
        "repl-diskless-sync-delay 0",
    ]
    if spec.enable_persistence:
        lines += ["appendonly yes", "appendfsync everysec"]
    else:
        # A replica keeps the RDB of its last full sync in /data; a pod restarted from it would
        # boot with stale keys and no longer look like the empty restart it is (topology's
        # is_empty_restart), so the old master would be promoted again and wipe its replicas'
        # newer writes (measured by the failover benchmark's crash fault). Redis deletes those
        # sync files when persistence is off and this is set.
        lines += ["appendonly no", 'save ""', "rdb-del-sync-files yes"]
    if spec.users is not None:  # users come from the operator's ACL file (see users.py)
        try:
            users.check_names(spec.users)
        except users.InvalidUsers as exc:
            raise InvalidSpec(str(exc)) from None
        lines += [f"aclfile {users.ACL_FILE}", f"masteruser {users.REPLICATION_USER}"]
    if spec.memory_limit is not None:
        # Leave 10 % of the container limit to Redis' own overhead and replication buffers.
        lines.append(f"maxmemory {int(parse_quantity(spec.memory_limit) * 0.9)}")
    lines += tenant
    return "\n".join(lines) + "\n"


def tenant_lines(spec: RedisClusterSpec) -> list[str]:
    """The redis.conf lines of ``spec.redisConfig``, each checked and quoted by
    :mod:`~examples.rediscluster.api.redisconf` (allowlisted directive, one line, the
    arguments Redis reads back unchanged); ``InvalidSpec`` naming the first refused key."""
    try:
        return redisconf.render(spec.redis_config)
    except ValueError as exc:  # RedisConfigError (names the key) or too many entries
        raise InvalidSpec(
            f"spec.{exc}" if isinstance(exc, redisconf.RedisConfigError) else str(exc)
        ) from None


def config_map(cluster: RedisCluster) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{cluster.name}-config",
            "namespace": cluster.namespace,
            "labels": labels(cluster),
        },
        "data": {"redis.conf": redis_conf(cluster.spec)},
    }


def _service(cluster: RedisCluster, name: str, extra_selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": cluster.namespace, "labels": labels(cluster)},
        "spec": {
            "selector": {**selector_labels(cluster), **extra_selector},
            "ports": [{"name": "redis", "port": REDIS_PORT, "targetPort": REDIS_PORT, "protocol": "TCP"}],
            **spec,
        },
    }


def master_service(cluster: RedisCluster) -> dict[str, Any]:
    return _service(cluster, f"{cluster.name}-master", {ROLE_LABEL: "master"})


def live_settings(spec: RedisClusterSpec) -> dict[str, tuple[str, ...]]:
    """The ``redisConfig`` settings applied at run time (:data:`LIVE_KEYS`): canonical directive
    -> its arguments as Redis reads them (``redisconf.check``; never the raw text). Entries
    ``check`` refuses are left out (``redis_conf`` refuses the whole spec for them)."""
    out: dict[str, tuple[str, ...]] = {}
    for key, value in sorted(spec.redis_config.items()):
        try:
            directive = redisconf.check(key, value)
        except redisconf.RedisConfigError:
            continue
        if directive.name in LIVE_KEYS:
            out[directive.name] = directive.args
    return out


def _is_live(key: str) -> bool:
    try:
        return redisconf.canonical_key(key) in LIVE_KEYS
    except ValueError:
        return False


def _restart_only(spec: RedisClusterSpec) -> RedisClusterSpec:
    """``spec`` without its live settings: what the pod template's config hash covers."""
    kept = {k: v for k, v in spec.redis_config.items() if not _is_live(k)}
    return spec.model_copy(update={"redis_config": kept})


#: A shell function printing its argument as ONE double-quoted redis.conf argument in which every
#: byte is a ``\\xhh`` escape (Redis's tokenizer reads the bytes back unchanged): the password is
#: only ever data (``printf %s`` to ``od``), never shell or redis.conf text, so no ``"``, ``\\``,
#: newline, ``$`` or directive in it can change the configuration. Its output holds only ``"``,
#: ``\\``, ``x`` and hex digits, so the here-document that carries it cannot be broken either.
QUOTE_FUNCTION = (
    "redis_quoted() { printf '\"%s\"' "
    "\"$(printf %s \"$1\" | od -An -v -tx1 | tr -d ' \\n' | sed 's/../\\\\x&/g')\"; }\n"
)


def password_lines(*settings: tuple[str, str]) -> tuple[str, str]:
    """(prelude, stdin) of the start script giving Redis its passwords on stdin (``-``): each
    ``(directive, environment variable)`` becomes ``directive "\\xhh..."`` built by
    :data:`QUOTE_FUNCTION` from the variable's bytes (an empty password is refused: Redis would
    read ``requirepass ""`` as "no password"). Nothing of the value reaches argv."""
    checks = "".join(
        f'[ -n "${var}" ] || {{ echo "{var} is empty: refusing to start without a password" >&2; exit 1; }}\n'
        for var in dict.fromkeys(var for _, var in settings)
    )
    body = "".join(f'{directive} $(redis_quoted "${var}")\n' for directive, var in settings)
    return f"{QUOTE_FUNCTION}{checks}", f" - <<EOF\n{body}EOF\n"


def auth_start(spec: RedisClusterSpec, start: str) -> str:
    """``start`` (an ``exec redis-server ...`` line) with the passwords of ``spec`` on stdin."""
    if spec.users is not None:  # the ACL file holds every user; replicas log in as the replication user
        prelude, stdin = password_lines(("masterauth", "REPLICATION_PASSWORD"))
    elif auth.auth_enabled(spec):
        prelude, stdin = password_lines(("requirepass", "REDIS_PASSWORD"), ("masterauth", "REDIS_PASSWORD"))
    else:
        return start
    return f"{prelude}{start}{stdin}"


def _start_script(spec: RedisClusterSpec) -> str:
    start = 'exec redis-server /etc/redis/redis.conf --bind "$POD_IP" --replica-announce-ip "$POD_IP"'
    return auth_start(spec, start)


def _redis_cli(spec: RedisClusterSpec) -> str:
    login = 'REDISCLI_AUTH="$REDIS_PASSWORD" ' if auth.auth_enabled(spec) else ""
    if spec.users is not None:  # probes and preStop run as the operator's user (ping, info)
        login = 'REDISCLI_AUTH="$OPERATOR_PASSWORD" '
    user = f" --user {users.OPERATOR_USER}" if spec.users is not None else ""
    secure = f" --tls --cacert {tls.CA_FILE}" if spec.tls is not None else ""
    return f'{login}redis-cli{user}{secure} -h "$POD_IP" -p {REDIS_PORT}'


def _probe_script(spec: RedisClusterSpec) -> str:
    return f"{_redis_cli(spec)} ping | grep -q PONG"


def _prestop_script(spec: RedisClusterSpec) -> str:
    """Wait while this Redis is a master with replicas connected (bounded), then linger briefly
    as the new master's replica; see the module docstring."""
    return (
        f"end=$(($(date +%s) + {PRESTOP_WAIT_SECONDS})); handed=\n"
        'while [ "$(date +%s)" -lt "$end" ]; do\n'
        f"  info=$({_redis_cli(spec)} info replication 2>/dev/null) || exit 0\n"
        '  case "$info" in *role:master*) ;; *)\n'
        f'    [ -n "$handed" ] && sleep {PRESTOP_LINGER_SECONDS}; exit 0 ;;\n'
        "  esac\n"
        '  case "$info" in *connected_slaves:0*) exit 0 ;; esac\n'
        "  handed=1\n"
        "  sleep 0.2\n"
        "done\n"
    )


def _resources(spec: RedisClusterSpec) -> dict[str, Any] | None:
    res: dict[str, dict[str, str]] = {}
    if spec.resources is not None:
        for part in ("limits", "requests"):
            values = getattr(spec.resources, part)
            if values:
                res[part] = dict(values)
    if spec.memory_limit is not None:
        res.setdefault("limits", {})["memory"] = spec.memory_limit
    return res or None


def statefulset(
    cluster: RedisCluster, replicas: int, *, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> dict[str, Any]:
    spec = cluster.spec
    env: list[dict[str, Any]] = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    if (ref := auth.password_ref(cluster)) is not None:
        env.append({"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": ref[0], "key": ref[1]}}})
    if spec.users is not None:
        acl_secret = users.acl_secret_name(cluster)
        for var, key in (
            ("REPLICATION_PASSWORD", "replication-password"),
            ("OPERATOR_PASSWORD", "operator-password"),
        ):
            env.append({"name": var, "valueFrom": {"secretKeyRef": {"name": acl_secret, "key": key}}})
    conf_hash = hashlib.sha256(redis_conf(_restart_only(spec)).encode()).hexdigest()[:16]
    container: dict[str, Any] = {
        "name": REDIS_CONTAINER,
        "image": spec.image,
        "command": ["sh", "-c", _start_script(spec)],
        "env": env,
        "ports": [{"name": "redis", "containerPort": REDIS_PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "exec": {"command": ["sh", "-c", _probe_script(spec)]},
            "periodSeconds": 1,
            "timeoutSeconds": 1,
            "failureThreshold": 2,
        },
        "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", _prestop_script(spec)]}}},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/redis"},
            {"name": "data", "mountPath": "/data"},
        ],
    }
    resources = _resources(spec)
    if resources:
        container["resources"] = resources
    volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": f"{cluster.name}-config"}}]
    if spec.tls is not None:
        # the whole Secret: a rotation swaps the files and the operator has Redis re-read them
        volumes.append({"name": tls.TLS_VOLUME, "secret": {"secretName": spec.tls.secret_name}})
        container["volumeMounts"].append({"name": tls.TLS_VOLUME, "mountPath": tls.TLS_DIR, "readOnly": True})
    if spec.users is not None:
        # only the file: the generated passwords reach the container through env references
        items = [{"key": "users.acl", "path": "users.acl"}]
        volumes.append(
            {
                "name": users.ACL_VOLUME,
                "secret": {"secretName": users.acl_secret_name(cluster), "items": items},
            }
        )
        container["volumeMounts"].append(
            {"name": users.ACL_VOLUME, "mountPath": users.ACL_DIR, "readOnly": True}
        )
    containers = [container]
    if spec.monitoring.exporter:  # the metrics sidecar (shared.exporter; a cycle, hence here)
        from examples.rediscluster.shared.exporter import exporter_container  # (an import cycle)

        image = spec.monitoring.exporter_image
        containers.append(exporter_container(cluster, image=image, cluster_domain=cluster_domain))
    sts_spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": headless_service_name(cluster),
        "podManagementPolicy": "Parallel",
        # the operator restarts pods in its own order (examples/rediscluster/replication/rollout.py)
        "updateStrategy": {"type": "OnDelete"},
        "selector": {"matchLabels": selector_labels(cluster)},
        "template": {
            "metadata": {
                "labels": labels(cluster),
                "annotations": {"redis.pyctrl.dev/config-hash": conf_hash},
            },
            "spec": {
                "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                "containers": containers,
                "volumes": volumes,
                **pod_scheduling(
                    selector_labels(cluster),
                    spec.affinity,
                    spec.tolerations,
                    spec.topology_spread_constraints,
                    spec.node_selector,
                ),
            },
        },
    }
    if spec.enable_persistence:
        sts_spec["volumeClaimTemplates"] = [
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": spec.storage_size}},
                    **({"storageClassName": spec.storage_class_name} if spec.storage_class_name else {}),
                },
            }
        ]
    else:
        volumes.append({"name": "data", "emptyDir": {}})
    restrict_pod(sts_spec["template"]["spec"], REDIS_UID)  # Pod Security "restricted" (podsecurity)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": cluster.name, "namespace": cluster.namespace, "labels": labels(cluster)},
        "spec": sts_spec,
    }


def pod_disruption_budget(cluster: RedisCluster) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": cluster.name, "namespace": cluster.namespace, "labels": labels(cluster)},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(cluster)}},
    }


def desired_children(
    cluster: RedisCluster, replicas: int, *, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> list[dict[str, Any]]:
    """Every child in creation order (config before the pods that mount it); ``cluster_domain``
    names the pods' stable names (the exporter sidecar's address with ``spec.tls``)."""
    return [
        config_map(cluster),
        _service(
            cluster, headless_service_name(cluster), {}, clusterIP="None", publishNotReadyAddresses=True
        ),
        master_service(cluster),
        _service(cluster, f"{cluster.name}-replicas", {ROLE_LABEL: "replica"}),
        statefulset(cluster, replicas, cluster_domain=cluster_domain),
        pod_disruption_budget(cluster),
    ]
