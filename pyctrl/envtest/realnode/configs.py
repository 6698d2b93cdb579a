"""The configuration files of one real node: containerd's, the CNI network's, the kubelet's and
kube-proxy's, each rendered from the environment's ``NetworkPlan`` (pure functions of their inputs).

What differs from a kubeadm node, and why (this machine, see docs/real-node.md):
- kubelet: ``failCgroupV1: false`` (the machine's controllers are on cgroup v1), ``cgroupDriver:
  cgroupfs`` with a ``cgroupRoot`` of its own (several nodes share one kernel), ``oomScoreAdj: 0``
  and containerd's ``restrict_oom_score_adj`` (no CAP_SYS_RESOURCE here: a negative score cannot
  be written), an empty ``resolvConf`` (Pods never get the machine's resolver), image garbage
  collection off (the images are imported, not pulled), a 10 s node Lease (the controller manager
  runs with a 20 s grace period);
- kube-proxy: iptables mode (no IPVS in this kernel), conntrack sysctls left alone (they are
  machine-wide);
- CNI: one ``bridge`` network per node with ``host-local`` addresses kept on the node's tmpfs
  ``/run`` (a rebooted node starts afresh), no masquerading (every address is routed), and a
  route to the slot's block only: Pods have no default route.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from pyctrl.envtest.realnode.plan import NetworkPlan

__all__ = [
    "CLUSTER_DOMAIN",
    "CONTAINERD_SOCKET",
    "PAUSE_IMAGE",
    "cni_conflist",
    "containerd_toml",
    "kube_proxy_config",
    "kubelet_config",
]

CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
PAUSE_IMAGE = "localhost/pyctrl/pause:3.10"
CLUSTER_DOMAIN = "cluster.local"


def containerd_toml(root: Path, cni_conf_dir: Path, opt_dir: Path, cni_bin_dir: str = "/usr/lib/cni") -> str:
    """containerd 1.6 (config version 2): state and socket on the node's tmpfs ``/run``."""
    return f"""version = 2
root = "{root}"
state = "/run/containerd"
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
]

[grpc]
  address = "{CONTAINERD_SOCKET}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt_dir}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin_dir}"
    conf_dir = "{cni_conf_dir}"
"""


def cni_conflist(plan: NetworkPlan, index: int) -> str:
    subnet = plan.pod_cidr(index)
    gateway = subnet.rsplit(".", 1)[0] + ".1"
    config: dict[str, Any] = {
        "cniVersion": "0.4.0",
        "name": "pyctrl",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet, "gateway": gateway}]],
                    # The slot's block only, no default route: a Pod reaches the cluster and
                    # the host's apiserver, and nothing else (the node has no route out either).
                    "routes": [{"dst": plan.supernet}],
                    "dataDir": "/run/cni-ipam",
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(config, indent=2)


def kubelet_config(
    plan: NetworkPlan,
    index: int,
    *,
    cgroup_root: str,
    client_ca: Path,
    tls_cert: Path,
    tls_key: Path,
    pod_logs_dir: Path,
    resolv_conf: Path,
) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        "address": plan.node_ip(index),
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "tlsCertFile": str(tls_cert),
        "tlsPrivateKeyFile": str(tls_key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [plan.dns_service_ip],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv_conf),
        "oomScoreAdj": 0,
        "podLogsDir": str(pod_logs_dir),
        "failSwapOn": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "nodeLeaseDurationSeconds": 10,
        "nodeStatusReportFrequency": "10s",
        "serializeImagePulls": False,
        "shutdownGracePeriod": "0s",
        "protectKernelDefaults": False,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(plan: NetworkPlan, name: str, kubeconfig: Path) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": name,
        "clusterCIDR": plan.cluster_cidr,
        "healthzBindAddress": "127.0.0.1:10256",
        "nodePortAddresses": ["primary"],
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"minSyncPeriod": "0s", "syncPeriod": "30s"},
    }
    return yaml.safe_dump(config, sort_keys=False)
