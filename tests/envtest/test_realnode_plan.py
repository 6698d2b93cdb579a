"""The real nodes' address plan, slot claim and host network (pyctrl.envtest.realnode.plan/host):
fast, no kubelet; what runs on real nodes is tests/realnode (``make e2e``)."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import pytest

from pyctrl.envtest.realnode import configs, host
from pyctrl.envtest.realnode.plan import MAX_NODES, SLOTS, NetworkPlan, claim_slot


def test_the_ranges_of_a_slot_are_disjoint_and_inside_its_block() -> None:
    for slot in (0, SLOTS - 1):
        plan = NetworkPlan(slot)
        block = ipaddress.ip_network(plan.supernet)
        pods = [ipaddress.ip_network(plan.pod_cidr(i)) for i in range(1, MAX_NODES + 1)]
        link = ipaddress.ip_network(plan.link_cidr)
        services = ipaddress.ip_network(plan.service_cidr)
        nets = [*pods, link, services]
        assert all(n.subnet_of(block) for n in nets)  # type: ignore[arg-type]
        assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
        cluster = ipaddress.ip_network(plan.cluster_cidr)
        assert all(p.subnet_of(cluster) for p in pods)  # type: ignore[arg-type]
        # The host's address is outside the Pod range: kube-proxy masquerades its ClusterIP traffic.
        assert not link.overlaps(cluster)
        assert ipaddress.ip_address(plan.host_ip) in link
        assert ipaddress.ip_address(plan.node_ip(MAX_NODES)) in link
        assert ipaddress.ip_address(plan.dns_service_ip) in services
        assert len(plan.veth(MAX_NODES)) <= 15  # IFNAMSIZ
        assert len(plan.bridge) <= 15
    assert not ipaddress.ip_network(NetworkPlan(0).supernet).overlaps(
        ipaddress.ip_network(NetworkPlan(1).supernet)
    )


def test_bad_slots_and_node_indexes_are_refused() -> None:
    with pytest.raises(ValueError, match="slot must be within"):
        NetworkPlan(SLOTS)
    with pytest.raises(ValueError, match="node index must be within"):
        NetworkPlan(0).node_ip(0)


def test_an_unknown_runtime_is_refused() -> None:
    from pyctrl.envtest import Environment

    with pytest.raises(ValueError, match="runtime must be one of local, kubelet, got 'docker'"):
        Environment(runtime="docker")


def test_a_claimed_slot_is_held_until_its_file_is_closed(tmp_path: Path) -> None:
    first, held = claim_slot(tmp_path)
    second, other = claim_slot(tmp_path)
    assert first.slot != second.slot
    held.close()
    again, third = claim_slot(tmp_path)
    assert again.slot == first.slot
    other.close()
    third.close()


def test_host_network_is_set_up_and_torn_down_completely(tmp_path: Path) -> None:
    plan, lock = claim_slot()
    try:
        host.setup_network(plan)
        links = subprocess.run(
            ["ip", "-o", "link", "show", plan.bridge], capture_output=True, text=True, check=False
        )
        assert links.returncode == 0, links.stderr
        routes = subprocess.run(["ip", "route"], capture_output=True, text=True, check=True).stdout
        assert f"unreachable {plan.supernet}" in routes
        assert f"{plan.link_cidr} dev {plan.bridge}" in routes
        host.setup_network(plan)  # a leftover of the slot is replaced, not an error
    finally:
        host.teardown_network(plan)
        lock.close()
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True, check=True).stdout
    assert plan.supernet.rsplit(".", 2)[0] + "." not in routes
    gone = subprocess.run(["ip", "link", "show", plan.bridge], capture_output=True, text=True, check=False)
    assert gone.returncode != 0


def test_kubelet_and_containerd_are_configured_for_this_machine(tmp_path: Path) -> None:
    """cgroup v1 accepted, no negative OOM score anywhere (no CAP_SYS_RESOURCE here), no resolver
    of the machine's for Pods, Service and DNS addresses of the plan."""
    import yaml

    plan = NetworkPlan(3)
    kubelet = yaml.safe_load(
        configs.kubelet_config(
            plan, 2, cgroup_root="/pyctrl-s3-n2", client_ca=tmp_path / "ca.crt", tls_cert=tmp_path / "t.crt",
            tls_key=tmp_path / "t.key", pod_logs_dir=tmp_path / "logs", resolv_conf=tmp_path / "resolv.conf",
        )
    )  # fmt: skip
    assert kubelet["failCgroupV1"] is False
    assert kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["oomScoreAdj"] == 0
    assert kubelet["clusterDNS"] == [plan.dns_service_ip]
    assert kubelet["address"] == plan.node_ip(2)
    assert kubelet["authentication"]["anonymous"]["enabled"] is False
    containerd = configs.containerd_toml(tmp_path / "root", tmp_path / "cni", tmp_path / "opt")
    assert "restrict_oom_score_adj = true" in containerd
    assert "SystemdCgroup = false" in containerd
    proxy = yaml.safe_load(configs.kube_proxy_config(plan, "real-node-2", tmp_path / "kubeconfig"))
    assert proxy["mode"] == "iptables"
    assert proxy["clusterCIDR"] == plan.cluster_cidr
