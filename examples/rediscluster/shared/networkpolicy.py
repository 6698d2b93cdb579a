"""The NetworkPolicy of a RedisCluster (``networking.k8s.io/v1``, name ``<name>``, owned by the
cluster), as a pure function of its spec and of where the operator and the monitoring run.

It selects the cluster's pods and, being an Ingress policy, denies them every connection it does
not list (egress is left open: restores and backups reach S3 from them). Guarantees (tested on
the real apiserver, tests/operator/test_networkpolicy.py):

- the Redis port (6379, TLS or not) accepts only: the cluster's own pods (replication, the probes'
  and the exporter's own connections come from the pod itself), its backup and restore Jobs
  (pods labelled ``redis.pyctrl.dev/cluster: <name>`` and managed by the operator), the
  operator's pods (:class:`PolicyPeers`: the chart's selector labels in its namespace), pods of
  the cluster's namespace labelled ``redis.pyctrl.dev/client: <name>`` (:data:`CLIENT_LABEL`,
  the documented way to let an application in) and the peers of ``spec.networkPolicy.clients``;
- cluster mode's bus port (16379) accepts only the cluster's own pods (gossip and failover
  votes; the operator never uses it);
- the exporter's metrics port (9121, with ``spec.monitoring.exporter``) accepts only pods of the
  monitoring namespaces (:attr:`PolicyPeers.monitoring_namespace_labels`);
- ``spec.networkPolicy.enabled: false``: no policy; the one the operator made is deleted
  (:func:`remove_network_policy`), a same-named one it does not control is left alone.

The policy is enforced only by a network plugin that implements NetworkPolicy (Calico, Cilium,
...). The local node does not enforce any (docs/local-node.md): there the object is only data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.rediscluster import CLIENT_LABEL
from examples.rediscluster.shared.resources import REDIS_PORT, labels, selector_labels
from pyctrl.client import Client
from pyctrl.client.errors import NotFound
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import KubeObject
from pyctrl.recorder import EventRecorder

__all__ = [
    "CLIENT_LABEL",
    "NetworkPolicy",
    "PolicyPeers",
    "network_policy",
    "parse_label_selector",
    "remove_network_policy",
]

BUS_PORT = REDIS_PORT + 10000
METRICS_PORT = 9121  # shared.exporter.METRICS_PORT (that module imports resources: kept apart)
#: the labels every backup, restore and delete Job pod of a cluster carries (backup.job)
_JOB_LABELS = {"app.kubernetes.io/managed-by": "pyctrl-rediscluster"}
_JOB_CLUSTER_LABEL = "redis.pyctrl.dev/cluster"


class NetworkPolicy(KubeObject):
    """networking.k8s.io/v1 NetworkPolicy (its spec kept as the apiserver returns it)."""

    gvk = GroupVersionKind("networking.k8s.io", "v1", "NetworkPolicy")
    spec: dict[str, Any] | None = None


def parse_label_selector(text: str, what: str) -> dict[str, str]:
    """``k=v,k2=v2`` as matchLabels; ``""`` is ``{}`` (everything). ValueError naming ``what``."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or "=" in value:
            raise ValueError(f"{what}: {part!r} is not key=value (a comma-separated list of them)")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class PolicyPeers:
    """Where the operator and the monitoring run (the operator's flags; the chart sets them).

    ``operator_namespace`` None: the operator's pods in any namespace (it runs outside a cluster,
    or its namespace is unknown)."""

    operator_namespace: str | None = None
    operator_pod_labels: Mapping[str, str] = field(
        default_factory=lambda: {"app.kubernetes.io/name": "rediscluster-operator"}
    )
    monitoring_namespace_labels: Mapping[str, str] = field(
        default_factory=lambda: {"kubernetes.io/metadata.name": "monitoring"}
    )

    def operator_peer(self) -> dict[str, Any]:
        namespaces = (
            {"matchLabels": {"kubernetes.io/metadata.name": self.operator_namespace}}
            if self.operator_namespace
            else {}
        )
        return {
            "namespaceSelector": namespaces,
            "podSelector": {"matchLabels": dict(self.operator_pod_labels)},
        }


def _port(port: int) -> dict[str, Any]:
    return {"protocol": "TCP", "port": port}


def network_policy(cluster: RedisCluster, peers: PolicyPeers) -> dict[str, Any]:
    """The cluster's NetworkPolicy (module docstring); the caller sets the owner reference."""
    own = {"podSelector": {"matchLabels": selector_labels(cluster)}}
    jobs = {"podSelector": {"matchLabels": {**_JOB_LABELS, _JOB_CLUSTER_LABEL: cluster.name}}}
    clients = {"podSelector": {"matchLabels": {CLIENT_LABEL: cluster.name}}}
    extra = [
        peer.model_dump(by_alias=True, exclude_none=True, mode="json")
        for peer in cluster.spec.network_policy.clients
    ]
    ingress = [
        {"ports": [_port(REDIS_PORT)], "from": [own, jobs, peers.operator_peer(), clients, *extra]},
    ]
    if cluster.spec.mode == "cluster":
        ingress.append({"ports": [_port(BUS_PORT)], "from": [own]})
    if cluster.spec.monitoring.exporter:
        monitoring = {"namespaceSelector": {"matchLabels": dict(peers.monitoring_namespace_labels)}}
        ingress.append({"ports": [_port(METRICS_PORT)], "from": [monitoring]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": cluster.name, "namespace": cluster.namespace, "labels": labels(cluster)},
        "spec": {
            "podSelector": {"matchLabels": selector_labels(cluster)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


async def remove_network_policy(client: Client, recorder: EventRecorder, cluster: RedisCluster) -> None:
    """With ``spec.networkPolicy.enabled: false``: delete the policy this cluster controls, if any
    (read from the cache: nothing is written when there is none)."""
    try:
        live = await client.get(NetworkPolicy, cluster.name, namespace=cluster.namespace)
    except NotFound:
        return
    refs = live.metadata.owner_references or []
    if not any(ref.controller and ref.uid == cluster.metadata.uid for ref in refs):
        return  # not ours: never touched
    try:
        await client.delete(live)
    except NotFound:
        return
    recorder.event(
        cluster,
        "Normal",
        "NetworkPolicyRemoved",
        f"NetworkPolicy {cluster.name} deleted (networkPolicy.enabled: false)",
    )
