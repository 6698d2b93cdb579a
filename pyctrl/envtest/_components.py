"""How envtest runs each control-plane component: command lines and health probes.

Mirrors controller-runtime ``pkg/internal/testing/controlplane`` (its ``configureEtcd`` /
``configureAPIServer`` defaults), plus kube-controller-manager, kube-scheduler and the local nodes,
which controller-runtime's envtest does not run. Everything listens on loopback only.
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pyctrl.envtest._certs import Pki

__all__ = [
    "SERVICE_CIDR",
    "apiserver_args",
    "controller_manager_args",
    "etcd_args",
    "etcd_healthy",
    "etcd_post",
    "insecure_ok",
    "local_node_args",
    "scheduler_args",
]

#: ClusterIPs are allocated from here; nothing routes them (Pods are reached by their 127.x IP).
SERVICE_CIDR = "10.0.0.0/24"


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


def apiserver_args(binary: str, state_dir: Path, pki: Pki, etcd_url: str, port: int) -> list[str]:
    return [
        binary,
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state_dir / 'pki' / 'apiserver'}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=RBAC",
        "--allow-privileged=true",
        "--profiling=false",
        "--v=1",
    ]


def controller_manager_args(binary: str, state_dir: Path, pki: Pki, kubeconfig: Path, port: int) -> list[str]:
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state_dir / 'pki' / 'controller-manager'}",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Pod IPs are loopback addresses, which Endpoints/EndpointSlices reject: those
        # controllers would only emit warnings, so they are off.
        "--controllers=*,-endpoint,-endpointslice,-endpointslicemirroring",
        "--leader-elect=false",
        "--v=1",
    ]


def scheduler_args(binary: str, state_dir: Path, kubeconfig: Path, port: int) -> list[str]:
    """The real kube-scheduler (default profile: node selectors, affinity, spread, taints)."""
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state_dir / 'pki' / 'scheduler'}",
        "--leader-elect=false",
        "--v=1",
    ]


def local_node_args(kubeconfig: Path, state_dir: Path, node_name: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pyctrl.envtest.node",
        f"--kubeconfig={kubeconfig}",
        f"--state-dir={state_dir / 'node'}",
        f"--node-name={node_name}",
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
