"""How envtest runs each control-plane component: command lines and health probes.

Mirrors controller-runtime ``pkg/internal/testing/controlplane`` (its ``configureEtcd`` /
``configureAPIServer`` defaults), plus kube-controller-manager, kube-scheduler and the local nodes,
which controller-runtime's envtest does not run. Everything listens on loopback only.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pyctrl.envtest._certs import Pki

__all__ = [
    "HPA_SYNC_PERIOD",
    "NODE_MONITOR_GRACE",
    "NODE_MONITOR_PERIOD",
    "SERVICE_CIDR",
    "apiserver_args",
    "controller_manager_args",
    "etcd_args",
    "etcd_healthy",
    "etcd_post",
    "insecure_ok",
    "scheduler_args",
]

#: ClusterIPs are allocated from here; nothing routes them (Pods are reached by their 127.x IP).
#: On loopback, so a ClusterIP is an address the local nodes' service proxy can listen on
#: (pyctrl.envtest.node.serviceproxy); the nodes' Pod blocks (127.0-254.x.y) leave it free.
SERVICE_CIDR = "127.255.0.0/16"

#: kube-controller-manager's node lifecycle timing (seconds): how often it looks at the nodes, and
#: how long a node may go without renewing its Lease before it is NotReady (real default: 5 s, 40 s).
NODE_MONITOR_PERIOD = 2
NODE_MONITOR_GRACE = 20
#: kube-controller-manager's --horizontal-pod-autoscaler-sync-period (seconds; upstream 15).
HPA_SYNC_PERIOD = 5


def etcd_args(binary: str, state_dir: Path, client_url: str, peer_url: str) -> list[str]:
    return [
        binary,
        "--name=envtest",
        f"--data-dir={state_dir / 'etcd'}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=envtest={peer_url}",
        "--unsafe-no-fsync=true",  # test data: speed over durability, as controller-runtime's envtest
        "--log-level=warn",
    ]


def apiserver_args(
    binary: str,
    state_dir: Path,
    pki: Pki,
    etcd_url: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    service_cidr: str = SERVICE_CIDR,
    real_nodes: bool = False,
) -> list[str]:
    """``host``: where it listens and what it advertises (the kubernetes Service's endpoint);
    ``real_nodes``: kubelets authenticate as ``system:node:<name>``, so the Node authorizer and
    the NodeRestriction admission plugin are on, as in a kubeadm cluster."""
    kubelet_client = pki.client_cert("kube-apiserver-kubelet-client", ("system:masters",))
    pki.ensure_front_proxy()
    nodes = ["--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction"]
    return [
        binary,
        f"--etcd-servers={etcd_url}",
        f"--bind-address={host}",
        f"--advertise-address={host}",
        f"--secure-port={port}",
        f"--cert-dir={state_dir / 'pki' / 'apiserver'}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={service_cidr}",
        # The kubelet API (logs): the apiserver authenticates to each node with this client
        # certificate, verifies the node's serving certificate against the CA, and dials the
        # node's InternalIP (its Hostname address is not resolvable).
        f"--kubelet-client-certificate={kubelet_client[0]}",
        f"--kubelet-client-key={kubelet_client[1]}",
        f"--kubelet-certificate-authority={pki.ca_cert}",
        "--kubelet-preferred-address-types=InternalIP",
        # The aggregation layer (APIService: metrics-server's metrics.k8s.io), as kubeadm sets it:
        # the apiserver proxies with the front-proxy client certificate and the user in headers,
        # which an extension apiserver trusts from that CA alone (it reads these settings from
        # kube-system/extension-apiserver-authentication).
        f"--requestheader-client-ca-file={pki.front_proxy_ca}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki.front_proxy_client[0]}",
        f"--proxy-client-key-file={pki.front_proxy_client[1]}",
        *(nodes if real_nodes else ["--authorization-mode=RBAC"]),
        "--allow-privileged=true",
        "--profiling=false",
        "--v=1",
    ]


def controller_manager_args(
    binary: str,
    state_dir: Path,
    pki: Pki,
    kubeconfig: Path,
    port: int,
    *,
    service_cidr: str = SERVICE_CIDR,
    real_nodes: bool = False,
) -> list[str]:
    """``real_nodes``: Pod IPs are routable addresses, so every controller runs (Endpoints and
    EndpointSlices feed kube-proxy and CoreDNS)."""
    controllers = "*" if real_nodes else "*,-endpoint,-endpointslice,-endpointslicemirroring"
    return [
        *_kube_component_args(binary, state_dir, "controller-manager", kubeconfig, port),
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
        f"--service-cluster-ip-range={service_cidr}",
        # Local nodes' Pod IPs are loopback addresses, which Endpoints/EndpointSlices reject:
        # those controllers would only emit warnings, so they are off there.
        f"--controllers={controllers}",
        # Node lifecycle: a node whose Lease is not renewed for NODE_MONITOR_GRACE is marked
        # Ready=Unknown, its Pods Ready=False, and tainted node.kubernetes.io/unreachable
        # (NoSchedule + NoExecute); the nodes renew every 2 s. Pods are evicted once the taint's
        # tolerationSeconds (300 s, DefaultTolerationSeconds admission) have passed.
        f"--node-monitor-period={NODE_MONITOR_PERIOD}s",
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE}s",
        # The HorizontalPodAutoscaler looks at its targets every HPA_SYNC_PERIOD (15 s upstream):
        # only HPAs are affected, so scaling tests wait less; their scale-down stabilization
        # window is each HPA's own (spec.behavior).
        f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD}s",
        "--leader-elect=false",
        "--v=1",
    ]


def scheduler_args(binary: str, state_dir: Path, kubeconfig: Path, port: int) -> list[str]:
    """The real kube-scheduler (default profile: node selectors, affinity, spread, taints)."""
    return [
        *_kube_component_args(binary, state_dir, "scheduler", kubeconfig, port),
        "--leader-elect=false",
        "--v=1",
    ]


def _kube_component_args(binary: str, state_dir: Path, name: str, kubeconfig: Path, port: int) -> list[str]:
    """What kube-controller-manager and kube-scheduler share: the apiserver reached (and requests
    to their own endpoints authenticated and authorized) through ``kubeconfig``, their HTTPS
    endpoint on loopback ``port`` with a self-signed certificate in the state dir."""
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state_dir / 'pki' / name}",
    ]


def etcd_post(base: str, path: str, body: dict[str, Any]) -> Any:
    """A call to etcd's JSON gRPC gateway (``/v3/...``)."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def etcd_healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/health", timeout=2) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def insecure_ok(url: str) -> bool:
    """GET ``url`` answers 200 (certificate not verified: a loopback health probe only)."""
    # The controller manager serves /healthz with a self-signed certificate; only reachability
    # on loopback is checked here, so verification is off for this probe alone.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False
