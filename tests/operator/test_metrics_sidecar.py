"""The redis_exporter sidecar (``spec.monitoring.exporter``, on by default) in the RedisCluster's
pods on the local node: real control plane, real redis-server and the real redis_exporter binary
(``tools/redis_exporter/build.sh``, which the local node maps the exporter image to). Each pod's
``/metrics`` shows ``redis_up 1`` and its replication and memory series while the default user
has a password and ACL users are on (the exporter logs in as its own least-privilege ACL user,
whose password the operator generated into the ``<name>-acl`` Secret); the chart's PodMonitor
selects the pods and their metrics port. Over TLS: tests/operator/test_tls.py scrapes its TLS
cluster's sidecars with :func:`assert_sidecars_serve`."""

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


Scraped = dict[str, list[tuple[dict[str, str], float]]]


def scrape(ip: str) -> Scraped:
    """metric name -> its samples (labels, value), from the sidecar's /metrics."""
    with urllib.request.urlopen(f"http://{ip}:{METRICS_PORT}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


async def assert_sidecars_serve(c: Cluster) -> None:
    """Each pod's sidecar: ``redis_up 1``, memory, and its side of replication (the master's
    replica count, the replica's link up), its role as the operator sees it. Polled until all
    hold: a replica's link comes up a moment after its pod is Ready."""
    master = c.status()["currentMaster"]
    pods = c.pods()
    for name, pod in pods.items():
        sidecar = next(ct for ct in pod["spec"]["containers"] if ct["name"] == CONTAINER_NAME)
        assert [p["name"] for p in sidecar["ports"]] == [PORT_NAME]
        role = "master" if name == master else "slave"

        async def serves(ip: str = pod["status"]["podIP"], role: str = role) -> Scraped | None:
            metrics = await asyncio.to_thread(scrape, ip)
            value = {n: samples[0][1] for n, samples in metrics.items() if samples}
            replication = (
                value.get("redis_connected_slaves") == len(pods) - 1
                if role == "master"
                else value.get("redis_master_link_up") == 1
            )
            roles = {labels["role"] for labels, _ in metrics.get("redis_instance_info", [])}
            complete = value.get("redis_up") == 1 and replication and roles == {role}
            return metrics if complete and value.get("redis_memory_used_bytes", 0) > 0 else None

        await eventually(serves, within=60, what=f"{name}'s sidecar: redis_up 1, {role} series", interval=0.5)


async def assert_cluster_mode_sidecars_serve(c: Cluster) -> None:
    """Cluster mode: each pod's sidecar shows ``redis_up 1``, ``cluster_state`` ok, every slot
    served, and the role the status gives the pod (its shard's master, or a replica)."""
    masters = {s["master"] for s in c.status()["shards"]}
    for name, pod in c.pods().items():
        role = "master" if name in masters else "slave"

        async def serves(ip: str = pod["status"]["podIP"], role: str = role) -> Scraped | None:
            metrics = await asyncio.to_thread(scrape, ip)
            value = {n: samples[0][1] for n, samples in metrics.items() if samples}
            roles = {labels["role"] for labels, _ in metrics.get("redis_instance_info", [])}
            cluster = value.get("redis_cluster_state") == 1 and value.get("redis_cluster_slots_ok") == 16384
            return metrics if value.get("redis_up") == 1 and cluster and roles == {role} else None

        await eventually(serves, within=60, what=f"{name}'s sidecar: redis_up 1, cluster ok", interval=0.5)


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
    acl = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/secrets/metrics-acl")["data"]
    assert "exporter-password" in acl
    assert f"user {EXPORTER_USER} on #" in base64.b64decode(acl["users.acl"]).decode()

    pods = c.pods()
    assert len(pods) == 2
    await assert_sidecars_serve(c)

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
