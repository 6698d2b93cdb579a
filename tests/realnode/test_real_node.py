"""Real nodes (``Environment(runtime="kubelet")``): the upstream kubelet runs Pods under containerd
and runc, kube-proxy serves ClusterIPs, CoreDNS answers cluster names. Two nodes, one environment
for the module; its teardown checks that nothing of it is left on the machine.

Run with ``make e2e`` (these tests are not part of ``make test``).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from pyctrl.envtest import Environment, poll_until

# The session environment starts within the first test's budget: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(1200)

REDIS_IMAGE = "localhost/pyctrl/redis:7"
RESTRICTED: dict[str, Any] = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _links() -> str:
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def ns(env: Environment) -> Iterator[str]:
    name = f"realnode-{uuid.uuid4().hex[:6]}"
    env.create_namespace(name)
    try:
        yield name
    finally:
        env.delete_namespace(name)


def kubectl(env: Environment, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert env.bin_dir is not None
    argv = [str(env.bin_dir / "kubectl"), f"--kubeconfig={env.kubeconfig_path}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    for c in containers:
        c.setdefault("image", REDIS_IMAGE)
        c.setdefault("imagePullPolicy", "IfNotPresent")
        c.setdefault("securityContext", RESTRICTED)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": containers, "terminationGracePeriodSeconds": 5, **spec},
    }


def create(env: Environment, ns: str, obj: dict[str, Any]) -> None:
    plural = {"Pod": "pods", "Service": "services"}[obj["kind"]]
    env.http.request("POST", f"/api/v1/namespaces/{ns}/{plural}", obj)


def get_pod(env: Environment, ns: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = env.http.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return result


def wait_pod(
    env: Environment, ns: str, name: str, check: Any, what: str, *, timeout: float = 180
) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def done() -> bool:
        seen.update(get_pod(env, ns, name))
        return bool(check(seen))

    poll_until(
        what, done, timeout, interval=0.5, on_timeout=lambda: f"; status: {json.dumps(seen.get('status'))}"
    )
    return seen


def is_ready(p: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions") or []
    )


def container_state(p: dict[str, Any]) -> dict[str, Any]:
    statuses = p.get("status", {}).get("containerStatuses") or [{}]
    return dict(statuses[0])


def test_nodes_run_containerd_and_the_upstream_kubelet(env: Environment) -> None:
    nodes = env.http.get("/api/v1/nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["real-node-1", "real-node-2"]
    for node in nodes:
        info = node["status"]["nodeInfo"]
        assert info["containerRuntimeVersion"].startswith("containerd://1.6"), info
        assert info["kubeletVersion"] == "v1.36.3", info
        addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
        assert env.real is not None
        assert env.real.plan is not None
        assert env.real.plan.contains(addresses["InternalIP"]), addresses


def test_container_runs_the_images_filesystem_as_its_non_root_user(env: Environment, ns: str) -> None:
    create(env, ns, pod("shell", [{"name": "main", "command": ["sleep", "3600"]}]))
    p = wait_pod(env, ns, "shell", is_ready, "the Pod Ready")
    assert container_state(p)["containerID"].startswith("containerd://")
    uid = kubectl(env, "exec", "-n", ns, "shell", "--", "id", "-u")
    assert uid.returncode == 0, uid
    assert uid.stdout.strip() == "999", uid  # the image's USER, not root
    # The image's own filesystem: its /data (redis's WORKDIR), and not the host's Go toolchain.
    fs = kubectl(env, "exec", "-n", ns, "shell", "--", "sh", "-c", "pwd; test -e /usr/local/go || echo no-go")
    assert fs.stdout.split() == ["/data", "no-go"], fs
    caps = kubectl(env, "exec", "-n", ns, "shell", "--", "grep", "CapEff", "/proc/self/status")
    assert caps.stdout.split() == ["CapEff:", "0000000000000000"], caps  # drop: [ALL] applied by runc


def test_port_forward_reaches_the_container_through_the_apiserver(env: Environment, ns: str) -> None:
    """``kubectl port-forward``: apiserver -> the kubelet's streaming server -> containerd, into the
    Pod's network namespace; a Redis client on the host's loopback talks to the container."""
    create(env, ns, pod("served", [{"name": "redis", "args": ["redis-server", "--save", ""]}]))
    wait_pod(env, ns, "served", is_ready, "the Pod Ready")
    assert env.bin_dir is not None
    argv = [str(env.bin_dir / "kubectl"), f"--kubeconfig={env.kubeconfig_path}", "port-forward",
            "-n", ns, "pod/served", "--address=127.0.0.1", ":6379"]  # fmt: skip
    forward = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert forward.stdout is not None
        first = forward.stdout.readline()  # "Forwarding from 127.0.0.1:<port> -> 6379"
        assert first.startswith("Forwarding from 127.0.0.1:"), first
        port = int(first.split()[2].rsplit(":", 1)[1])
        with redis.Redis(host="127.0.0.1", port=port, socket_timeout=30, decode_responses=True) as client:
            assert client.set("through", "port-forward")
            assert client.get("through") == "port-forward"
            assert client.info("server")["tcp_port"] == 6379  # the container's server
    finally:
        forward.terminate()
        forward.wait(30)


def test_memory_limit_is_enforced(env: Environment, ns: str) -> None:
    hog = {
        "name": "hog",
        "command": ["tail", "/dev/zero"],  # buffers an endless line: memory grows until killed
        "resources": {"limits": {"memory": "32Mi"}, "requests": {"memory": "32Mi"}},
    }
    create(env, ns, pod("hog", [hog], restartPolicy="Never"))
    p = wait_pod(
        env, ns, "hog", lambda p: "terminated" in container_state(p).get("state", {}), "the hog terminated"
    )
    terminated = container_state(p)["state"]["terminated"]
    assert terminated["reason"] == "OOMKilled", terminated
    assert terminated["exitCode"] == 137, terminated


def test_exec_probes_and_pre_stop_hook_run_in_the_container(env: Environment, ns: str) -> None:
    """The liveness probe fails once /scratch/alive is gone; before restarting the container the
    kubelet runs its preStop hook, which leaves a mark in the Pod's emptyDir; the next instance
    of the container finds it (restartCount 1)."""
    main = {
        "name": "main",
        "command": ["sh", "-c", "touch /scratch/alive /tmp/ready; exec sleep 3600"],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1},
        "livenessProbe": {
            "exec": {"command": ["test", "-f", "/scratch/alive"]},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
        "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "id -u > /scratch/pre-stop-ran-as"]}}},
    }
    create(env, ns, pod("probed", [main], volumes=[{"name": "scratch", "emptyDir": {}}]))
    wait_pod(env, ns, "probed", is_ready, "readiness from the exec probe")
    assert kubectl(env, "exec", "-n", ns, "probed", "--", "rm", "/scratch/alive").returncode == 0
    wait_pod(
        env, ns, "probed", lambda p: container_state(p).get("restartCount", 0) >= 1, "a liveness restart"
    )
    wait_pod(env, ns, "probed", is_ready, "Ready again")
    mark = kubectl(env, "exec", "-n", ns, "probed", "--", "cat", "/scratch/pre-stop-ran-as")
    assert mark.returncode == 0, mark
    assert mark.stdout.strip() == "999", mark  # ran in the container, as its user


def test_http_probe(env: Environment, ns: str) -> None:
    """CoreDNS's image with a Corefile serving only /health: an httpGet readiness probe from the
    kubelet (the node's network namespace) to the Pod's address makes it Ready."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "corefile"}}
    config["data"] = {"Corefile": ".:1053 {\n    errors\n    health :8080\n}\n"}
    env.http.request("POST", f"/api/v1/namespaces/{ns}/configmaps", config)
    assert env.real is not None
    from pyctrl.envtest.realnode.addons import coredns_image

    web = {
        "name": "web",
        "image": coredns_image(),
        "args": ["-conf", "/etc/coredns/Corefile"],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 1},
    }
    create(env, ns, pod("web", [web], volumes=[{"name": "config", "configMap": {"name": "corefile"}}]))
    p = wait_pod(env, ns, "web", is_ready, "readiness from the HTTP probe")
    assert container_state(p)["ready"] is True


def test_cluster_ip_service_and_dns_from_a_pod(env: Environment, ns: str) -> None:
    server = {"name": "redis", "command": ["redis-server", "--protected-mode", "no"]}
    create(env, ns, pod("redis", [server], nodeName="real-node-2"))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "redis"},
        "spec": {"selector": {"app": "redis"}, "ports": [{"port": 6379, "targetPort": 6379}]},
    }
    create(env, ns, service)
    create(env, ns, pod("client", [{"name": "main", "command": ["sleep", "3600"]}], nodeName="real-node-1"))
    redis = wait_pod(env, ns, "redis", is_ready, "redis Ready")
    wait_pod(env, ns, "client", is_ready, "client Ready")
    name = f"redis.{ns}.svc.cluster.local"

    def answers() -> bool:  # the EndpointSlice reaches kube-proxy and CoreDNS within a few seconds
        out = kubectl(env, "exec", "-n", ns, "client", "--", "redis-cli", "-h", name, "ping")
        return out.stdout.strip() == "PONG"

    poll_until(f"PONG from {name} (another node, through DNS and the ClusterIP)", answers, 120, interval=1)
    cluster_ip = env.http.get(f"/api/v1/namespaces/{ns}/services/redis")["spec"]["clusterIP"]
    # From the host, as on kind: the Pod's address and the ClusterIP are routed into the nodes.
    for address in (redis["status"]["podIP"], cluster_ip):
        out = subprocess.run(
            ["redis-cli", "-h", address, "ping"], capture_output=True, text=True, timeout=30, check=False
        )
        assert out.stdout.strip() == "PONG", (address, out)
    logs = kubectl(env, "logs", "-n", ns, "redis")
    assert "Ready to accept connections" in logs.stdout, logs


def _node_processes(env: Environment, name: str) -> list[int]:
    """Processes of node ``name`` still on the machine: whatever runs with its files' paths."""
    marker = str(env.state_dir / "nodes" / name) + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found.append(int(entry.name))
    return found


def test_power_loss_and_reboot_of_a_node(env: Environment, ns: str) -> None:
    """stop_node kills the kubelet, containerd, its shims and containers at once; start_node boots
    the node again (a new boot ID), and the kubelet runs the Pod still bound to it anew."""
    create(env, ns, pod("pinned", [{"name": "main", "command": ["sleep", "3600"]}], nodeName="real-node-2"))
    before = container_state(wait_pod(env, ns, "pinned", is_ready, "the Pod Ready"))["containerID"]
    assert _node_processes(env, "real-node-2")
    boot = env.http.get("/api/v1/nodes/real-node-2")["status"]["nodeInfo"]["bootID"]
    env.stop_node("real-node-2")
    assert _node_processes(env, "real-node-2") == []
    env.start_node("real-node-2")
    assert env.http.get("/api/v1/nodes/real-node-2")["status"]["nodeInfo"]["bootID"] != boot

    def restarted(p: dict[str, Any]) -> bool:
        return is_ready(p) and container_state(p).get("containerID") not in (None, before)

    wait_pod(env, ns, "pinned", restarted, "the Pod running again in a new container")
