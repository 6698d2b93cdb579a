"""Several nodes on one control plane: the real kube-scheduler places Pods, a node lost as by a power
failure is marked NotReady and tainted by kube-controller-manager, a rebooted node runs its Pods
anew, and ``kubectl drain`` evicts through the Eviction API within a PodDisruptionBudget."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest import Environment, NodeError, poll_until
from pyctrl.envtest._components import NODE_MONITOR_GRACE, NODE_MONITOR_PERIOD
from pyctrl.envtest._nodes import node_processes
from pyctrl.envtest._process import pid_alive
from tests.node.helpers import container_pid, kubectl

pytestmark = pytest.mark.controlplane

SLEEPER = {"name": "c", "image": "redis:7", "command": ["sh", "-c", "sleep 3600 & sleep 3600"]}


@pytest.fixture
def cluster(envtest_nodes: Environment) -> Environment:
    return envtest_nodes


@pytest.fixture
def ns(cluster: Environment) -> Iterator[str]:
    name = f"nodes-{uuid.uuid4().hex[:6]}"
    cluster.create_namespace(name)
    try:
        yield name
    finally:
        cluster.delete_namespace(name)


def pods(env: Environment, ns: str, selector: str = "") -> list[dict[str, Any]]:
    query = f"?labelSelector={selector}" if selector else ""
    return list(env.http.get(f"/api/v1/namespaces/{ns}/pods{query}")["items"])


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def deployment(name: str, replicas: int, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def test_three_nodes_have_their_own_names_zones_addresses_and_kubelet_api(cluster: Environment) -> None:
    assert cluster.node_names == ["local-node-1", "local-node-2", "local-node-3"]
    nodes = {n["metadata"]["name"]: n for n in cluster.http.get("/api/v1/nodes")["items"]}
    assert sorted(nodes) == cluster.node_names
    zones = [nodes[n]["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in cluster.node_names]
    assert zones == ["zone-a", "zone-b", "zone-c"]
    ips = {
        a["address"] for n in nodes.values() for a in n["status"]["addresses"] if a["type"] == "InternalIP"
    }
    assert len(ips) == 3
    for name in cluster.node_names:
        lease = cluster.http.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")
        assert lease["spec"]["holderIdentity"] == name
    with pytest.raises(NodeError, match=r"no node 'local-node'.*local-node-1, local-node-2, local-node-3"):
        cluster.stop_node("local-node")
    with pytest.raises(NodeError, match="already running"):
        cluster.start_node("local-node-1")


def test_required_anti_affinity_puts_three_pods_on_three_nodes_and_a_fourth_stays_pending(
    cluster: Environment, ns: str
) -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    body = deployment("spread", 4, {"affinity": anti, "containers": [SLEEPER]})
    cluster.http.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body)

    def placed() -> bool:
        current = pods(cluster, ns, "app=spread")
        bound = [p for p in current if p["spec"].get("nodeName")]
        pending = [p for p in current if condition(p, "PodScheduled").get("reason") == "Unschedulable"]
        return len(bound) == 3 and len(pending) == 1

    poll_until("3 pods bound and 1 unschedulable", placed, 90)
    current = pods(cluster, ns, "app=spread")
    bound = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in current if p["spec"].get("nodeName")}
    assert sorted(bound.values()) == cluster.node_names
    [pending] = [p for p in current if not p["spec"].get("nodeName")]
    assert "didn't match pod anti-affinity rules" in condition(pending, "PodScheduled")["message"]

    def events() -> list[dict[str, Any]]:
        return list(cluster.http.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"])

    def scheduler_said_so() -> bool:
        by_scheduler = [e for e in events() if e.get("reportingController") == "default-scheduler"]
        scheduled = {e["regarding"]["name"] for e in by_scheduler if e["reason"] == "Scheduled"}
        failed = {e["regarding"]["name"] for e in by_scheduler if e["reason"] == "FailedScheduling"}
        return scheduled == set(bound) and pending["metadata"]["name"] in failed

    poll_until("default-scheduler's Scheduled and FailedScheduling events", scheduler_said_so, 30)
    for event in events():
        if event["reason"] == "Scheduled":
            name = event["regarding"]["name"]
            assert f"Successfully assigned {ns}/{name} to {bound[name]}" in event["note"]


def test_a_stopped_node_is_marked_not_ready_and_tainted_and_a_restarted_one_runs_its_pods_anew(
    cluster: Environment, ns: str
) -> None:
    node = "local-node-3"
    spec = {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": [SLEEPER]}
    for name in ("keeper", "doomed"):
        cluster.http.request(
            "POST", f"/api/v1/namespaces/{ns}/pods", {"metadata": {"name": name}, "spec": spec}
        )

    def running() -> bool:
        return (
            all(condition(p, "Ready").get("status") == "True" for p in pods(cluster, ns))
            and len(pods(cluster, ns)) == 2
        )

    poll_until("both pods Ready", running, 90)
    old = {p["metadata"]["name"]: container_pid(p) for p in pods(cluster, ns)}
    forked = [pid for pid in node_processes(cluster.node_dir(node)) if pid not in old.values()]
    assert forked, "each container's shell should have a background sleep"

    stopped_at = time.monotonic()
    cluster.stop_node(node)
    assert node not in cluster.processes
    assert [pid for pid in [*old.values(), *forked] if pid_alive(pid)] == []
    assert node_processes(cluster.node_dir(node)) == []
    with pytest.raises(NodeError, match="already stopped"):
        cluster.stop_node(node)

    def lost() -> bool:
        current = cluster.http.get(f"/api/v1/nodes/{node}")
        taints = {(t["key"], t["effect"]) for t in current["spec"].get("taints") or []}
        return (
            condition(current, "Ready").get("status") == "Unknown"
            and ("node.kubernetes.io/unreachable", "NoExecute") in taints
        )

    # The lifecycle controller acts after the grace period; the slack is for a loaded machine.
    poll_until("node NotReady and tainted unreachable", lost, NODE_MONITOR_GRACE + NODE_MONITOR_PERIOD + 30)
    print(f"\nnode {node} Unknown + unreachable taint {time.monotonic() - stopped_at:.1f} s after power-off")
    poll_until(
        "its pods marked Ready=False",
        lambda: all(condition(p, "Ready").get("status") == "False" for p in pods(cluster, ns)),
        30,
    )
    cluster.http.request("DELETE", f"/api/v1/namespaces/{ns}/pods/doomed")
    doomed = cluster.http.get(f"/api/v1/namespaces/{ns}/pods/doomed")
    assert doomed["metadata"]["deletionTimestamp"]  # Terminating: no kubelet confirms it

    cluster.start_node(node)
    current = cluster.http.get(f"/api/v1/nodes/{node}")
    assert condition(current, "Ready")["status"] == "True"
    assert not [t for t in current["spec"].get("taints") or [] if "unreachable" in t["key"]]

    def rebooted() -> bool:
        names = [p["metadata"]["name"] for p in pods(cluster, ns)]
        keeper = cluster.http.get(f"/api/v1/namespaces/{ns}/pods/keeper")
        return names == ["keeper"] and condition(keeper, "Ready").get("status") == "True"

    poll_until("keeper Ready again and doomed deleted", rebooted, 60)
    keeper = cluster.http.get(f"/api/v1/namespaces/{ns}/pods/keeper")
    assert container_pid(keeper) != old["keeper"]
    assert keeper["status"]["containerStatuses"][0]["restartCount"] >= 1
    assert [pid for pid in [*old.values(), *forked] if pid_alive(pid)] == []


def test_drain_evicts_within_the_disruption_budget_and_runs_pre_stop_hooks(
    cluster: Environment, ns: str, tmp_path: Path
) -> None:
    first, *others = cluster.node_names
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    container = dict(
        SLEEPER,
        lifecycle={"preStop": {"exec": {"command": ["sh", "-c", 'echo "$HOSTNAME" >> /hooks/ran']}}},
        volumeMounts=[{"name": "hooks", "mountPath": "/hooks"}],
        # A replacement is Ready only seconds after it started: long enough for the budget to
        # refuse the second eviction while the first pod's replacement is not Ready yet.
        readinessProbe={"exec": {"command": ["true"]}, "initialDelaySeconds": 5, "periodSeconds": 1},
    )
    spec = {
        "terminationGracePeriodSeconds": 5,
        "containers": [container],
        "volumes": [{"name": "hooks", "hostPath": {"path": str(hooks)}}],
    }
    assert kubectl(cluster, "cordon", *others).returncode == 0  # both replicas land on the first node
    try:
        cluster.http.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", deployment("web", 2, spec))
        pdb = {
            "metadata": {"name": "web"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
        cluster.http.request("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", pdb)

        def ready_on_first() -> bool:
            current = pods(cluster, ns, "app=web")
            return len(current) == 2 and all(
                p["spec"].get("nodeName") == first and condition(p, "Ready").get("status") == "True"
                for p in current
            )

        poll_until("2 web pods Ready on the first node", ready_on_first, 90)
        budget = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web"
        poll_until(
            "the PDB to allow 1",
            lambda: cluster.http.get(budget)["status"].get("disruptionsAllowed") == 1,
            30,
        )
        before = {p["metadata"]["name"] for p in pods(cluster, ns, "app=web")}
    finally:
        assert kubectl(cluster, "uncordon", *others).returncode == 0
    try:
        drained = kubectl(
            cluster, "drain", first, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=150s"
        )
        assert drained.returncode == 0, drained.stderr
        output = drained.stdout + drained.stderr
        # kubectl evicts both pods at once: the second is refused (429) until the first one's
        # replacement is Ready elsewhere, then evicted on a retry.
        assert "Cannot evict pod as it would violate the pod's disruption budget" in output
        assert all(f"pod/{name} evicted" in output for name in before)
        assert cluster.http.get(f"/api/v1/nodes/{first}")["spec"]["unschedulable"] is True
        now = pods(cluster, ns, "app=web")
        assert {p["spec"]["nodeName"] for p in now} <= set(others)
        assert before.isdisjoint(p["metadata"]["name"] for p in now)
        assert sorted((hooks / "ran").read_text().split()) == sorted(before)  # preStop ran in each
    finally:
        assert kubectl(cluster, "uncordon", first).returncode == 0
