"""Real nodes for an envtest environment (``Environment(runtime="kubelet")``): the upstream kubelet,
containerd with runc, and kube-proxy, each node in its own PID, network and mount namespaces.

``RealNodes`` owns what the environment's real nodes share on the host: the slot (``plan``), the
bridge and routes (``host``), the node binaries (``tools/node/build.sh``) and images
(``scripts/node-images.sh``). For each node it writes the configuration (``configs``) under
``<state>/nodes/<name>``, starts ``unshare ... python -m pyctrl.envtest.realnode SPEC`` (the
node's PID 1, ``supervisor``), and once that process exists hands its network namespace an
``eth0`` on the bridge.

Guarantees:
- ``power_off`` SIGKILLs the node's ``unshare``, whose child (the node's PID 1) is SIGKILLed with it
  (``--kill-child``) and takes every process of the node along (shims and containers included);
  it returns once they are gone and their cgroups removed (``RuntimeError`` naming what is left);
- ``teardown`` (after every node is off) removes the bridge, veths and routes, and lets the slot go;
- the slot's lock is passed to every node process and to kube-apiserver, so it stays held while any
  of them runs, even when the Python process that started them is gone (the CLI's detached mode).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from pyctrl.envtest._binaries import built_bin_dir
from pyctrl.envtest._certs import Pki
from pyctrl.envtest._kubeconfig import write_kubeconfig
from pyctrl.envtest._process import ManagedProcess
from pyctrl.envtest.realnode import configs, host
from pyctrl.envtest.realnode.plan import NetworkPlan, SlotsExhausted, claim_slot

__all__ = [
    "NODE_BINARIES",
    "RealNodeError",
    "RealNodes",
    "node_bin_dir",
    "node_images_dir",
    "operator_image_archives",
]

NODE_BINARIES = ("kubelet", "kube-proxy", "coredns")
_ZONES = ("zone-a", "zone-b", "zone-c")


class RealNodeError(RuntimeError):
    """The node binaries, images or host set-up of a real node failed."""


def _repo_file(relative: str) -> Path | None:
    for parent in Path(__file__).resolve().parents:
        if (parent / relative).is_file():
            return parent / relative
    return None


def node_bin_dir() -> Path:
    """kubelet, kube-proxy and CoreDNS, built first when missing (``tools/node/build.sh``)."""
    directory = built_bin_dir(
        "node", RealNodeError, "real nodes need a pyctrl checkout: tools/node/build.sh builds the kubelet"
    )
    missing = [b for b in NODE_BINARIES if not os.access(directory / b, os.X_OK)]
    if missing:
        raise RealNodeError(f"tools/node/build.sh ({directory}) lacks {', '.join(missing)}")
    return directory


def node_images_dir() -> Path:
    """The node images' OCI archives, built first when missing (``scripts/node-images.sh``, which
    also installs containerd and the rest from Debian)."""
    script = _repo_file("scripts/node-images.sh")
    if script is None:
        raise RealNodeError("real nodes need a pyctrl checkout: scripts/node-images.sh builds their images")
    proc = subprocess.run(
        ["bash", str(script), "--print-dir"], stdout=subprocess.PIPE, text=True, check=False
    )
    if proc.returncode != 0:
        raise RealNodeError(f"{script} failed (exit {proc.returncode}); see the messages above")
    return Path(proc.stdout.strip().splitlines()[-1])


def operator_image_archives() -> list[Path]:
    """``make image``'s operator archives, when built (imported too, so the chart's Pod runs)."""
    cache = Path(os.environ.get("PYCTRL_CACHE_DIR", Path.home() / ".cache" / "pyctrl")) / "image"
    return sorted(cache.glob("rediscluster-operator-*.oci.tar"))


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


class RealNodes:
    """The real nodes of one environment (state under ``state_dir / "nodes"``)."""

    def __init__(self, state_dir: Path, pki: Pki, slot: int | None = None) -> None:
        self.state_dir = state_dir
        self.pki = pki
        self.plan: NetworkPlan | None = NetworkPlan(slot) if slot is not None else None
        self._lock: IO[str] | None = None
        self.bin_dir: Path | None = None
        self.images: list[Path] = []

    # -- the environment's share -----------------------------------------------------------------
    def prepare(self) -> NetworkPlan:
        """Binaries and images (built when missing), a slot, the host's bridge and routes."""
        self.ensure_assets()
        self.plan, self._lock = claim_slot()
        host.setup_network(self.plan)
        return self.plan

    def ensure_assets(self) -> None:
        """Find (build when missing) the node binaries and image archives."""
        if self.bin_dir is not None:
            return
        self.bin_dir = node_bin_dir()
        images_dir = node_images_dir()
        self.images = [images_dir / f"{n}.oci.tar" for n in ("pause", "coredns", "redis", "redis-exporter")]
        self.images += operator_image_archives()

    @property
    def lock_fds(self) -> tuple[int, ...]:
        return (self._lock.fileno(),) if self._lock is not None else ()

    def teardown(self) -> None:
        if self.plan is not None:
            host.teardown_network(self.plan)
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def recover(self, nodes: int) -> None:
        """What a killed environment's nodes left on the host (bridge, routes, cgroups), removed
        when its slot is free (taken, it belongs to another environment now)."""
        assert self.plan is not None
        try:
            plan, lock = claim_slot(only=self.plan.slot)
        except SlotsExhausted:
            return
        try:
            host.teardown_network(plan)
            for index in range(1, nodes + 1):
                host.remove_cgroups(host.cgroup_name(plan, index))
        finally:
            lock.close()

    def apiserver_hosts(self) -> tuple[str, ...]:
        assert self.plan is not None
        return (self.plan.host_ip, self.plan.kubernetes_service_ip)

    # -- one node ----------------------------------------------------------------------------------
    def node_dir(self, name: str) -> Path:
        return self.state_dir / "nodes" / name

    def node_argv(self, name: str, index: int, names: Sequence[str], server: str) -> list[str]:
        """Write node ``name``'s files (node ``index`` from 1 of ``names``); its command line."""
        assert self.plan is not None
        assert self.bin_dir is not None
        plan, node_dir = self.plan, self.node_dir(name)
        for sub in ("pki", "cni", "containerd", "opt", "kubelet", "pod-logs", "logs", "containers"):
            (node_dir / sub).mkdir(parents=True, exist_ok=True)
        self.pki.issue_serving_cert(node_dir / "pki", (plan.node_ip(index), name))
        kubelet_cert, kubelet_key = self.pki.client_cert(f"system:node:{name}", ("system:nodes",))
        kubelet_kubeconfig = write_kubeconfig(
            node_dir / "kubelet.kubeconfig", server=server, ca=self.pki.ca_cert,
            cert=kubelet_cert, key=kubelet_key, user=f"system:node:{name}",
        )  # fmt: skip
        proxy_cert, proxy_key = self.pki.client_cert("system:kube-proxy")
        proxy_kubeconfig = write_kubeconfig(
            node_dir / "kube-proxy.kubeconfig", server=server, ca=self.pki.ca_cert,
            cert=proxy_cert, key=proxy_key, user="system:kube-proxy",
        )  # fmt: skip
        (node_dir / "resolv.conf").write_text("")  # Pods never get the machine's resolver
        (node_dir / "containerd.toml").write_text(
            configs.containerd_toml(node_dir / "containerd", node_dir / "cni", node_dir / "opt")
        )
        (node_dir / "cni" / "10-pyctrl.conflist").write_text(configs.cni_conflist(plan, index))
        cgroup = host.cgroup_name(plan, index)
        host.make_cgroup(cgroup)
        (node_dir / "kubelet.yaml").write_text(
            configs.kubelet_config(
                plan, index, cgroup_root=cgroup, client_ca=self.pki.ca_cert,
                tls_cert=node_dir / "pki" / "tls.crt", tls_key=node_dir / "pki" / "tls.key",
                pod_logs_dir=node_dir / "pod-logs", resolv_conf=node_dir / "resolv.conf",
            )
        )  # fmt: skip
        (node_dir / "kube-proxy.yaml").write_text(configs.kube_proxy_config(plan, name, proxy_kubeconfig))
        zone = _ZONES[(index - 1) % len(_ZONES)]
        spec: dict[str, Any] = {
            "name": name,
            "node_ip": plan.node_ip(index),
            "prefix": 24,
            "routes": [
                *[[plan.pod_cidr(j), plan.node_ip(j)] for j in range(1, len(names) + 1) if j != index],
                [plan.service_cidr, plan.host_ip],
            ],
            "boot_id": str(uuid.uuid4()),
            "machine_id": uuid.uuid4().hex,
            "binds": [
                [str(node_dir / "containers"), "/var/log/containers"],
                [str(node_dir / "cni-cache"), "/var/lib/cni"],
            ],
            "log_dir": str(node_dir / "logs"),
            "containerd_socket": configs.CONTAINERD_SOCKET,
            "images": [str(p) for p in self.images],
            "containerd": ["containerd", f"--config={node_dir / 'containerd.toml'}"],
            "kubelet": [
                str(self.bin_dir / "kubelet"),
                f"--config={node_dir / 'kubelet.yaml'}",
                f"--kubeconfig={kubelet_kubeconfig}",
                f"--hostname-override={name}",
                f"--node-ip={plan.node_ip(index)}",
                f"--root-dir={node_dir / 'kubelet'}",
                f"--node-labels=topology.kubernetes.io/zone={zone},topology.kubernetes.io/region=local",
                "--v=1",
            ],
            "kube_proxy": [
                str(self.bin_dir / "kube-proxy"),
                f"--config={node_dir / 'kube-proxy.yaml'}",
                "--v=1",
            ],
        }
        import json

        spec_path = node_dir / "node.json"
        spec_path.write_text(json.dumps(spec, indent=2))
        return [
            "unshare", "--pid", "--fork", "--mount-proc", "--net", "--mount", "--propagation", "private",
            "--kill-child=SIGKILL", "--", sys.executable, "-m", "pyctrl.envtest.realnode", str(spec_path),
        ]  # fmt: skip

    def attach(self, proc: ManagedProcess, index: int, timeout: float = 30.0) -> None:
        """Give the node started as ``proc`` its ``eth0`` once its PID 1 exists."""
        assert self.plan is not None
        deadline = time.monotonic() + timeout
        while True:
            kids = _children(proc.pid)
            if kids and _own_netns(kids[0]):
                break
            if not proc.alive():
                raise RealNodeError(f"{proc.name} exited at start; log: {proc.log_path}")
            if time.monotonic() > deadline:
                raise RealNodeError(f"{proc.name}: no node process in its namespaces after {timeout:.0f} s")
            time.sleep(0.05)  # unshare forks the node's PID 1 right after it starts
        host.attach_node(self.plan, index, kids[0])

    def route_services(self, running: Sequence[int]) -> None:
        """The host reaches ClusterIPs through the first running node's kube-proxy."""
        assert self.plan is not None
        host.route_services(self.plan, min(running) if running else None)

    def power_off(self, proc: ManagedProcess, index: int, timeout: float = 30.0) -> None:
        """SIGKILL the node (every process in its PID namespace dies with its PID 1)."""
        assert self.plan is not None
        kids = _children(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        for kid in kids:  # --kill-child does this too; at once, not after unshare is reaped
            with contextlib.suppress(ProcessLookupError):
                os.kill(kid, signal.SIGKILL)
        proc.stop(grace=0)
        deadline = time.monotonic() + timeout
        while any(Path(f"/proc/{k}").exists() for k in kids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {proc.name}: its PID 1 {kids} survived SIGKILL")
            time.sleep(0.05)  # the kernel ends the namespace's processes asynchronously
        left = host.remove_cgroups(host.cgroup_name(self.plan, index), timeout)
        if left:
            raise RuntimeError(f"node {proc.name}: cgroups still busy after {timeout:.0f} s: {left[:3]}")


def _own_netns(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    except OSError:
        return False
