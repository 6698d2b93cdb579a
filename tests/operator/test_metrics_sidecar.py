"""The redis_exporter sidecar (``spec.monitoring.exporter``, on by default) in the RedisCluster's
pods on the local node: real control plane, real redis-server and the real redis_exporter binary
(``tools/redis_exporter/build.sh``, which the local node maps the exporter image to). Each pod's
``/metrics`` shows ``redis_up 1`` and its replication and memory series while the default user
has a password and ACL users are on (the exporter logs in as its own least-privilege ACL user,
whose password the operator generated into the ``<name>-acl`` Secret); the chart's PodMonitor
selects the pods and their metrics port."""

from __future__ import annotations

import asyncio
import base64
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from examples.rediscluster.shared.exporter import CONTAINER_NAME, EXPORTER_USER, METRICS_PORT, PORT_NAME
from pyctrl.testing import eventually
from tests.operator.conftest import Cluster

pytestmark = [pytest.mark.controlplane, pytest.mark.usefixtures("operator")]

POD_MONITOR = Path(__file__).resolve().parents[2] / "config" / "prometheus" / "redis_monitor.yaml"


def scrape(ip: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """metric name -> its samples (labels, value), from the sidecar's /metrics."""
    with urllib.request.urlopen(f"http://{ip}:{METRICS_PORT}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


async def test_every_pod_serves_redis_metrics_through_the_exporter_sidecar_with_auth(
    cluster_factory: Callable[[str], Cluster],
) -> None:
    c = cluster_factory("metrics")
    secret = {
        "metadata": {"name": "metrics-pw"},
        "data": {"password": base64.b64encode(b"s3cret-pw").decode()},
    }
    c.envtest.http.request("POST", f"/api/v1/namespaces/{c.namespace}/secrets", secret)
    await c.create_ready(2, auth={"passwordSecret": {"name": "metrics-pw", "key": "password"}}, users=[])
    master = c.status()["currentMaster"]
    acl = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/secrets/metrics-acl")["data"]
    assert "exporter-password" in acl
    assert f"user {EXPORTER_USER} on #" in base64.b64decode(acl["users.acl"]).decode()

    pods = c.pods()
    assert len(pods) == 2
    for name, pod in pods.items():
        sidecar = next(ct for ct in pod["spec"]["containers"] if ct["name"] == CONTAINER_NAME)
        assert [p["name"] for p in sidecar["ports"]] == [PORT_NAME]

        async def up(ip: str = pod["status"]["podIP"]) -> dict[str, list[tuple[dict[str, str], float]]]:
            metrics = await asyncio.to_thread(scrape, ip)
            assert metrics["redis_up"][0][1] == 1, metrics.get("redis_up")
            return metrics

        metrics = await eventually(up, within=60, what=f"redis_up 1 from {name}'s sidecar", interval=0.5)
        assert metrics["redis_memory_used_bytes"][0][1] > 0
        if name == master:
            assert metrics["redis_connected_slaves"][0][1] == 1
        else:
            assert metrics["redis_master_link_up"][0][1] == 1
        role = {labels["role"] for labels, _ in metrics["redis_instance_info"]}
        assert role == {"master" if name == master else "slave"}

    # the PodMonitor (config/prometheus, rendered from the chart) selects these pods and this port
    (monitor,) = [d for d in yaml.safe_load_all(POD_MONITOR.read_text()) if d]
    wanted = monitor["spec"]["selector"]["matchLabels"]
    for pod in pods.values():
        assert wanted.items() <= pod["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == [PORT_NAME]
    assert monitor["spec"]["podMetricsEndpoints"][0]["relabelings"][0] == {
        "sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"],
        "targetLabel": "name",
    }
