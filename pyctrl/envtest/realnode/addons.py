"""CoreDNS for real nodes: the cluster DNS as kubeadm installs it (a Deployment ``coredns`` and the
Service ``kube-dns`` in ``kube-system`` at the plan's DNS address), with this machine's changes:
the image is the one built here (``localhost/pyctrl/coredns:<version>``, ``IfNotPresent``), it
listens on 1053 so it runs as its non-root user without capabilities (the Service maps 53 to it),
and it answers only cluster names: nothing is forwarded outside (no ``forward`` in the Corefile).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyctrl.envtest.realnode.configs import CLUSTER_DOMAIN
from pyctrl.envtest.realnode.plan import NetworkPlan

__all__ = ["COREFILE", "coredns_image", "coredns_objects"]

COREFILE = f""".:1053 {{
    errors
    health {{
        lameduck 5s
    }}
    ready
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    prometheus :9153
    cache 30
    loop
    reload
    loadbalance
}}
"""


def coredns_image() -> str:
    """The image tag scripts/node-images.sh gives CoreDNS (its version in tools/node/coredns)."""
    for parent in Path(__file__).resolve().parents:
        go_mod = parent / "tools" / "node" / "coredns" / "go.mod"
        if go_mod.is_file():
            for line in go_mod.read_text().splitlines():
                words = line.split()
                if "github.com/coredns/coredns" in words:
                    version = words[words.index("github.com/coredns/coredns") + 1]
                    return f"localhost/pyctrl/coredns:{version}"
    raise RuntimeError("no tools/node/coredns/go.mod: real nodes need a pyctrl checkout")


def coredns_objects(plan: NetworkPlan, image: str) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) in creation order."""
    labels = {"k8s-app": "kube-dns"}
    meta = {"namespace": "kube-system", "labels": labels}
    restricted = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = {
        "name": "coredns",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": [
            {"name": "dns", "containerPort": 1053, "protocol": "UDP"},
            {"name": "dns-tcp", "containerPort": 1053, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9153, "protocol": "TCP"},
        ],
        "resources": {"requests": {"cpu": "50m", "memory": "70Mi"}, "limits": {"memory": "170Mi"}},
        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True}],
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": 8080},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 5,
        },
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
        "securityContext": restricted,
    }
    core, apps, rbac = (
        "/api/v1/namespaces/kube-system",
        "/apis/apps/v1/namespaces/kube-system",
        "/apis/rbac.authorization.k8s.io/v1",
    )
    return [
        (
            f"{core}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", **meta}},
        ),
        (
            f"{rbac}/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "system:coredns", "labels": labels},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["endpoints", "services", "pods", "namespaces"],
                        "verbs": ["list", "watch"],
                    },
                    {
                        "apiGroups": ["discovery.k8s.io"],
                        "resources": ["endpointslices"],
                        "verbs": ["list", "watch"],
                    },
                ],
            },
        ),
        (
            f"{rbac}/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "system:coredns", "labels": labels},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:coredns",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
            },
        ),
        (
            f"{core}/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "coredns", **meta},
                "data": {"Corefile": COREFILE},
            },
        ),
        (
            f"{apps}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "coredns", **meta},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "serviceAccountName": "coredns",
                            "priorityClassName": "system-cluster-critical",
                            "dnsPolicy": "Default",
                            "securityContext": {
                                "runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                            "containers": [container],
                            "volumes": [
                                {
                                    "name": "config-volume",
                                    "configMap": {
                                        "name": "coredns",
                                        "items": [{"key": "Corefile", "path": "Corefile"}],
                                    },
                                }
                            ],
                        },
                    },
                },
            },
        ),
        (
            f"{core}/services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "kube-dns", **meta},
                "spec": {
                    "selector": labels,
                    "clusterIP": plan.dns_service_ip,
                    "ports": [
                        {"name": "dns", "port": 53, "targetPort": 1053, "protocol": "UDP"},
                        {"name": "dns-tcp", "port": 53, "targetPort": 1053, "protocol": "TCP"},
                        {"name": "metrics", "port": 9153, "targetPort": 9153, "protocol": "TCP"},
                    ],
                },
            },
        ),
    ]
