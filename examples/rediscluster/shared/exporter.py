"""The ``redis_exporter`` sidecar of a RedisCluster's pods (oliver006/redis_exporter, built by
``tools/redis_exporter/build.sh``): its container spec and the ACL user it logs in as, as pure
functions of the spec (like kube-prometheus' and the Redis operators' sidecars; no I/O here).

:func:`exporter_container` is what the StatefulSet's pod template adds beside the ``redis``
container. Guarantees, each tested (tests/toolkit/test_exporter.py: on the spec, and with the
real exporter against real redis-servers):

- no secret in argv: the password reaches the exporter as ``REDIS_PASSWORD`` from a
  ``secretKeyRef`` (the exporter reads that variable itself), the address and user as plain env;
- with ``spec.users`` set, the exporter logs in as :data:`EXPORTER_USER`, whose rules
  (:data:`EXPORTER_RULES`) allow only what it sends without key checks — ``INFO``, ``PING``,
  ``CLIENT SETNAME``, ``CLUSTER INFO``, ``LATENCY LATEST|HISTOGRAM``, ``SLOWLOG LEN`` — no key, no
  channel, no ``CONFIG GET`` (which would show ``masterauth``: ``--config-command=-``, so
  ``maxmemory`` comes from ``INFO``'s ``redis_memory_max_bytes``) and no ``SLOWLOG GET`` (its
  entries carry command arguments, i.e. data); its password is the key :data:`PASSWORD_KEY` of
  the operator's ``<name>-acl`` Secret. Without users it uses ``spec.auth``'s password, or none;
- with ``spec.tls``, it connects with ``rediss://`` to its pod's stable name
  ``<pod>.<name>-headless.<namespace>.svc.<cluster domain>`` (the operator's ``--cluster-domain``,
  default ``cluster.local``), verifying the chain to ``ca.crt`` *and* that name, so Redis'
  certificate must name it (e.g. ``*.<name>-headless.<namespace>.svc.cluster.local``). The name
  resolves without cluster DNS, whether the pod is Ready or not: the kubelet's managed
  ``/etc/hosts`` maps it to the pod's own IP (a StatefulSet's pods have a hostname and the
  headless Service as subdomain), on a real node as on the local node. redis_exporter v1.74.0
  has no flag for the TLS server name (redigo takes it from the address), hence a name and not
  the pod's IP. It presents ``tls.crt`` as its client certificate (``tls-auth-clients optional``
  checks it);
- restricted Pod Security: non-root, no privilege escalation, every capability dropped, a
  read-only root filesystem, the RuntimeDefault seccomp profile; it listens on the pod's IP only
  (pods of the local node share the loopback network);
- it scrapes its own pod's Redis only (``redis://$(POD_IP):6379``), serving ``/metrics`` on
  :data:`METRICS_PORT` (port name :data:`PORT_NAME`, which the ServiceMonitor selects).

``shared.resources.statefulset`` adds the sidecar to both modes' pod template when
``spec.monitoring.exporter`` is on; ``shared.security.users`` adds ``user EXPORTER_USER on
#<sha256> EXPORTER_RULES`` to the ACL file and a generated ``exporter-password`` to the ACL Secret.
"""

from __future__ import annotations

from typing import Any, Final

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.shared.resources import DEFAULT_CLUSTER_DOMAIN, REDIS_PORT, headless_service_name
from examples.rediscluster.shared.security import tls, users
from examples.rediscluster.shared.security.auth import password_ref

__all__ = [
    "CONTAINER_NAME",
    "EXPORTER_RULES",
    "EXPORTER_USER",
    "METRICS_PORT",
    "PASSWORD_KEY",
    "PORT_NAME",
    "exporter_container",
    "exporter_env",
]

CONTAINER_NAME: Final = "redis-exporter"
METRICS_PORT: Final = 9121  # the exporter's registered default port
PORT_NAME: Final = "redis-metrics"
EXPORTER_USER: Final = "pyctrl-exporter"
#: the uid and gid of the oliver006/redis_exporter image's USER
EXPORTER_UID: Final = 59000
#: the key of the operator's ``<name>-acl`` Secret holding the exporter user's password
PASSWORD_KEY: Final = "exporter-password"
#: What redis_exporter sends with --config-command=- and no key checks, and nothing else.
EXPORTER_RULES: Final = (
    "resetkeys resetchannels -@all +ping +info +client|setname +cluster|info "
    "+latency|latest +latency|histogram +slowlog|len"
)
#: Fixed flags: no CONFIG GET (least privilege, see above), the exporter's own Go metrics off.
_ARGS: Final = ("--config-command=-", "--redis-only-metrics", "--include-system-metrics=false")


def exporter_env(cluster: RedisCluster, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> list[dict[str, Any]]:
    """The exporter's environment: the pod's IP and name, the address, the user and the password
    (a ``secretKeyRef``, never a value)."""
    env: list[dict[str, Any]] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    if cluster.spec.tls is not None:
        host = f"$(POD_NAME).{headless_service_name(cluster)}.{cluster.namespace}.svc.{cluster_domain}"
        env.append({"name": "REDIS_ADDR", "value": f"rediss://{host}:{REDIS_PORT}"})
    else:
        env.append({"name": "REDIS_ADDR", "value": f"redis://$(POD_IP):{REDIS_PORT}"})
    if cluster.spec.users is not None:
        env.append({"name": "REDIS_USER", "value": EXPORTER_USER})
        ref = {"name": users.acl_secret_name(cluster), "key": PASSWORD_KEY}
        env.append({"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": ref}})
    elif (selector := password_ref(cluster)) is not None:
        ref = {"name": selector[0], "key": selector[1]}
        env.append({"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": ref}})
    return env


def exporter_container(
    cluster: RedisCluster, *, image: str, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> dict[str, Any]:
    """The sidecar container (a core/v1 Container as a dict) scraping this pod's Redis
    (``cluster_domain``: the DNS domain its pod's stable name ends in, see above)."""
    if not image:
        raise ValueError("exporter_container: image must be a non-empty image reference")
    args = [*_ARGS, f"--web.listen-address=$(POD_IP):{METRICS_PORT}"]
    mounts: list[dict[str, Any]] = []
    if cluster.spec.tls is not None:
        args += [
            f"--tls-ca-cert-file={tls.CA_FILE}",
            f"--tls-client-cert-file={tls.CERT_FILE}",
            f"--tls-client-key-file={tls.KEY_FILE}",
        ]
        mounts.append({"name": tls.TLS_VOLUME, "mountPath": tls.TLS_DIR, "readOnly": True})
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": image,
        "args": args,
        "env": exporter_env(cluster, cluster_domain),
        "ports": [{"name": PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"memory": "64Mi"},
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": EXPORTER_UID,  # the official image's USER (59000:59000)
            "runAsGroup": EXPORTER_UID,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if mounts:
        container["volumeMounts"] = mounts
    return container
