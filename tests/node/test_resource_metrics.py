"""The node's ``/metrics/resource`` (what metrics-server scrapes): the series and labels
metrics-server's decoder reads, measured from the container's real processes (children included),
and authorized on ``nodes/metrics`` as the kubelet does."""

from __future__ import annotations

import ssl
import sys
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from pyctrl.envtest import Environment, poll_until
from tests.node.helpers import comm, container_pid

pytestmark = pytest.mark.controlplane

MIB = 1 << 20
# A child process (started by the container's shell, which waits for it) holds 48 MiB it wrote to
# (bytes, so every page is resident); a second container only sleeps.
HOLDER = f"{sys.executable} -c 'import time; b = b\"x\" * (48 << 20); time.sleep(3600)' & wait"
# CPU work in a child that exits and is reaped: its time must stay in the container's counter.
BURNER = "sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; exec sleep 3600"


@pytest.fixture
def measured(envtest: Environment, namespace: str) -> str:
    pod = {
        "metadata": {"name": "measured"},
        "spec": {
            "containers": [
                {"name": "holder", "image": "redis:7", "command": ["sh", "-c", HOLDER]},
                {"name": "burner", "image": "redis:7", "command": ["sh", "-c", BURNER]},
            ],
        },
    }
    envtest.http.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)

    def running() -> bool:
        status = envtest.http.get(f"/api/v1/namespaces/{namespace}/pods/measured").get("status", {})
        states = [s.get("state", {}) for s in status.get("containerStatuses") or []]
        return len(states) == 2 and all("running" in s for s in states)

    poll_until("both containers running", running, 60)
    return "measured"


def _context(envtest: Environment, user: str, groups: tuple[str, ...] = ()) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(envtest.pki.ca_cert))
    cert, key = envtest.pki.client_cert(user, groups)
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


def _get(envtest: Environment, path: str, ctx: ssl.SSLContext) -> tuple[int, str]:
    node = envtest.http.get(f"/api/v1/nodes/{envtest.node_names[0]}")
    ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    try:
        with urllib.request.urlopen(f"https://{ip}:{port}{path}", context=ctx, timeout=20) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(page: str) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def _grant_node_metrics(envtest: Environment, user: str) -> None:
    """RBAC for ``user``: get on nodes/metrics only (what system:metrics-server has of the kubelet)."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": user},
        "rules": [{"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    for collection, obj in ((f"{rbac}/clusterroles", role), (f"{rbac}/clusterrolebindings", binding)):
        envtest.http.request(
            "PATCH",
            f"{collection}/{user}?fieldManager=test&force=true",
            obj,
            content_type="application/apply-patch+yaml",
        )


def test_resource_metrics_measure_the_containers_processes_and_their_children(
    envtest: Environment, namespace: str, measured: str
) -> None:
    reader = "node-metrics-reader"
    _grant_node_metrics(envtest, reader)
    ctx = _context(envtest, reader)
    series: dict[str, list[Sample]] = {}

    def mine(name: str, container: str) -> float:
        found = [
            s.value
            for s in series.get(name, [])
            if (s.labels.get("pod"), s.labels.get("namespace"), s.labels.get("container"))
            == (measured, namespace, container)
        ]
        return found[0] if found else 0.0

    def scrape() -> bool:
        status, page = _get(envtest, "/metrics/resource", ctx)
        series.clear()
        series.update(_samples(page) if status == 200 else {})
        return status == 200

    # RBAC reaches the authorizer's cache within a moment; the holder writes its 48 MiB.
    poll_until(
        "the holder's 48 MiB measured",
        lambda: scrape() and mine("container_memory_working_set_bytes", "holder") >= 48 * MIB,
        90,
    )
    # The burner's child has finished its loop and was reaped once the shell became ``sleep``.
    pods = f"/api/v1/namespaces/{namespace}/pods/{measured}"
    pod = envtest.http.get(pods)
    names = [c["name"] for c in pod["status"]["containerStatuses"]]
    burner_pid = container_pid(pod, names.index("burner"))
    poll_until("the burner's child done", lambda: comm(burner_pid) == "sleep", 120)
    assert scrape()
    assert mine("container_cpu_usage_seconds_total", "burner") >= 0.05
    for name in ("node_cpu_usage_seconds_total", "node_memory_working_set_bytes"):
        (node,) = series[name]
        assert node.value > 0, node
        assert node.timestamp is not None, node
    starts = {
        s.labels["container"]: s
        for s in series["container_start_time_seconds"]
        if s.labels["pod"] == measured
    }
    assert set(starts) == {"holder", "burner"}
    assert all(s.value > 1e9 and s.labels["namespace"] == namespace for s in starts.values())
    pod_memory = [s for s in series["pod_memory_working_set_bytes"] if s.labels["pod"] == measured]
    containers = [
        s.value for s in series["container_memory_working_set_bytes"] if s.labels["pod"] == measured
    ]
    assert [s.value for s in pod_memory] == [sum(containers)]
    assert series["resource_scrape_error"][0].value == 0


def test_resource_metrics_are_authorized_on_nodes_metrics_not_nodes_proxy(
    envtest: Environment, namespace: str, measured: str
) -> None:
    status, body = _get(envtest, "/metrics/resource", _context(envtest, "nobody"))
    assert status == 403
    assert "subresource=metrics" in body
    reader = "node-metrics-only"
    _grant_node_metrics(envtest, reader)
    ctx = _context(envtest, reader)
    poll_until("nodes/metrics granted", lambda: _get(envtest, "/metrics/resource", ctx)[0] == 200, 30)
    status, body = _get(envtest, f"/containerLogs/{namespace}/{measured}/holder", ctx)
    assert status == 403
    assert "subresource=proxy" in body
