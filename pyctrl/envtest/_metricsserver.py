"""metrics-server for envtest: the resource metrics API (``metrics.k8s.io/v1beta1``) behind the
apiserver's aggregation layer, as kubernetes-sigs/metrics-server's ``components.yaml`` installs
it, so ``kubectl top`` and the HorizontalPodAutoscaler's resource metrics work.

The binary is built from the Go module (``tools/metrics-server/build.sh``, cached) and runs as a
process of the environment, not as a Pod:

- it authenticates to the apiserver as the user ``system:metrics-server`` (a client certificate of
  the cluster CA), bound to the upstream ClusterRole (``nodes/metrics`` get; Pods and Nodes get,
  list, watch), ``system:auth-delegator`` and the ``extension-apiserver-authentication-reader``
  Role — nothing more;
- it scrapes each node's kubelet API at ``/metrics/resource`` (the node's InternalIP and the port
  the Node advertises), presenting the same certificate and verifying the node's serving
  certificate against the cluster CA; the kubelet authorizes it on ``nodes/metrics``;
- the Service ``kube-system/metrics-server`` has no selector (nothing for a service proxy to
  relay): metrics-server listens on the Service's ClusterIP (envtest's Service range is on
  loopback) at the Service's port, which is a free port rather than 443, so environments sharing
  the machine do not collide; the apiserver dials the ClusterIP as it does for any APIService
  without ``--enable-aggregator-routing``, and verifies the serving certificate
  (``metrics-server.kube-system.svc``) against the APIService's ``caBundle``;
- the aggregator calls an APIService Available only when its Service has a ready endpoint in an
  EndpointSlice; EndpointSlices refuse loopback IPs, so the one written here (``metrics-server``,
  not managed by any controller) has addressType FQDN and names the Service's own DNS name. It is
  bookkeeping only: requests go to the ClusterIP, as said above;
- requests proxied by the aggregator are trusted only from the front-proxy client certificate
  (``--requestheader-*`` flags of the apiserver, read by metrics-server from
  ``kube-system/extension-apiserver-authentication``).

``--metric-resolution`` is 10 s (the least metrics-server accepts): a Pod's CPU rate needs two
scrapes, so ``kubectl top`` answers for a new Pod within about 20 s of its start.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from pyctrl.envtest._binaries import built_bin_dir

__all__ = [
    "API_SERVICE",
    "NAMESPACE",
    "SERVICE",
    "USER",
    "MetricsServerError",
    "api_service",
    "endpoint_slice",
    "metrics_server_args",
    "metrics_server_bin",
    "rbac_objects",
    "service",
]

USER = "system:metrics-server"
NAMESPACE = "kube-system"
SERVICE = "metrics-server"
API_SERVICE = "v1beta1.metrics.k8s.io"
RESOLUTION = "10s"

_RBAC = "/apis/rbac.authorization.k8s.io/v1"
_READ = ["get", "list", "watch"]


class MetricsServerError(RuntimeError):
    """metrics-server cannot be built or found."""


def metrics_server_bin() -> Path:
    """The metrics-server binary, built by ``tools/metrics-server/build.sh`` when missing."""
    missing = "no metrics-server binary: run from a pyctrl checkout (tools/metrics-server/build.sh)"
    return built_bin_dir("metrics-server", MetricsServerError, missing) / "metrics-server"


def _user() -> list[dict[str, str]]:
    return [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]


def rbac_objects() -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) of the upstream RBAC, bound to the user ``system:metrics-server``."""
    reader_labels = {
        "rbac.authorization.k8s.io/aggregate-to-admin": "true",
        "rbac.authorization.k8s.io/aggregate-to-edit": "true",
        "rbac.authorization.k8s.io/aggregate-to-view": "true",
    }
    return [
        (
            f"{_RBAC}/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "system:aggregated-metrics-reader", "labels": reader_labels},
                "rules": [
                    {
                        "apiGroups": ["metrics.k8s.io"],
                        "resources": ["pods", "nodes"],
                        "verbs": ["get", "list", "watch"],
                    }
                ],
            },
        ),
        (
            f"{_RBAC}/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "system:metrics-server"},
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
                    {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": _READ},
                ],
            },
        ),
        (
            f"{_RBAC}/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "system:metrics-server"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": USER},
                "subjects": _user(),
            },
        ),
        (
            f"{_RBAC}/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "metrics-server:system:auth-delegator"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:auth-delegator",
                },
                "subjects": _user(),
            },
        ),
        (
            f"{_RBAC}/namespaces/{NAMESPACE}/rolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "metrics-server-auth-reader", "namespace": NAMESPACE},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "extension-apiserver-authentication-reader",
                },
                "subjects": _user(),
            },
        ),
    ]


def service(port: int) -> dict[str, Any]:
    """The Service the APIService names: no selector (metrics-server listens on its ClusterIP)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {"k8s-app": "metrics-server"}},
        "spec": {"ports": [{"name": "https", "port": port, "protocol": "TCP", "targetPort": port}]},
    }


def endpoint_slice(port: int) -> dict[str, Any]:
    """The ready endpoint the aggregator's availability check wants (see the module docstring)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": SERVICE,
            "namespace": NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": SERVICE,
                "endpointslice.kubernetes.io/managed-by": "envtest.pyctrl.dev",
            },
        },
        "addressType": "FQDN",
        "endpoints": [{"addresses": [f"{SERVICE}.{NAMESPACE}.svc"], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }


def api_service(port: int, ca_bundle: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE, "labels": {"k8s-app": "metrics-server"}},
        "spec": {
            "service": {"name": SERVICE, "namespace": NAMESPACE, "port": port},
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            "caBundle": base64.b64encode(ca_bundle).decode(),
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }


def metrics_server_args(
    binary: Path, *, kubeconfig: Path, ca: Path, cert_dir: Path, host: str, port: int
) -> list[str]:
    """metrics-server on ``host:port`` with the serving certificate in ``cert_dir``, reaching the
    apiserver (and the kubelets, with the same client certificate) through ``kubeconfig``."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={host}",
        f"--secure-port={port}",
        f"--tls-cert-file={cert_dir / 'tls.crt'}",
        f"--tls-private-key-file={cert_dir / 'tls.key'}",
        f"--kubelet-certificate-authority={ca}",
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",
        f"--metric-resolution={RESOLUTION}",
        "--kubelet-request-timeout=5s",  # below the resolution, as metrics-server requires
        "--v=1",
    ]
