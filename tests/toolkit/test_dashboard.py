"""The chart's Grafana dashboard: Grafana's real dashboard-linter passes it (and fails a broken
one), and every ``redis_*`` series a panel or an alert queries is one the real redis_exporter serves
— scraped from real redis-servers in replication and in cluster mode. (The operator's names are
checked against its registry in tests/operator/test_kubectl_plugin.py, and on a live operator's
``/metrics`` in tests/install/test_helm_install.py.)"""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path
from xml.etree import ElementTree

import pytest

from examples.rediscluster import dashboard_preview
from examples.rediscluster.api import RedisCluster
from examples.rediscluster.shared.exporter import exporter_container
from tests.install._promql import dashboard_exprs, metric_names, named_by_dashboard_and_alerts
from tests.install.conftest import CHART, built, run
from tests.rediscluster._servers import RedisServer, RedisServers, free_port
from tests.toolkit._exporter import replicate, run_sidecar

DASHBOARD = CHART / "files" / "dashboard.json"
LINT_CONFIG = CHART.parents[1] / "tests" / "install" / "dashboard_lint.yaml"


@pytest.fixture(scope="module")
def linter() -> str:
    return built("dashboard-linter")


def lint(linter: str, path: Path) -> tuple[int, str]:
    result = run(linter, "lint", "--strict", "--config", str(LINT_CONFIG), str(path), check=False)
    return result.returncode, result.stdout + result.stderr


def test_the_dashboard_passes_the_linter_strictly(linter: str) -> None:
    code, out = lint(linter, DASHBOARD)
    assert code == 0, out
    assert "❌" not in out
    assert "⚠" not in out


def test_the_linter_fails_a_panel_without_description_or_rate_interval(linter: str, tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panel = next(p for p in dashboard["panels"] if p["title"] == "Commands per second")
    panel["description"] = ""
    panel["targets"][0]["expr"] = panel["targets"][0]["expr"].replace("$__rate_interval", "5m")
    broken = tmp_path / "dashboard.json"
    broken.write_text(json.dumps(dashboard))
    code, out = lint(linter, broken)
    assert code != 0
    assert "panel 'Commands per second' has missing title or description" in out
    assert "should use $__rate_interval" in out


def test_the_dashboard_has_redis_and_operator_panels_per_cluster() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    titles = {p["title"] for p in dashboard["panels"]}
    assert {
        "Memory used vs maxmemory", "Commands per second", "Connected clients",
        "Evictions and rejected connections", "Replication offset", "Replica lag",
        "cluster_state (cluster mode)", "Slots (cluster mode)", "Masters (1 is healthy)", "Backup age",
    } <= titles  # fmt: skip
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            names = metric_names([target["expr"]])
            if any(n.startswith(("redis_", "rediscluster_")) for n in names):
                assert 'namespace=~"$namespace", name=~"$cluster"' in target["expr"], panel["title"]
    assert len(dashboard_exprs()) > len(titles)  # some panels have several queries


def cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is valid and free too."""
    while True:
        port = free_port()
        if port <= 55535:
            with socket.socket() as bus, contextlib.suppress(OSError):
                bus.bind(("127.0.0.1", port + 10000))
                return port


def served(redis_servers: RedisServers, tmp_path: Path) -> set[str]:
    """Sample names the real exporter serves for a master with a replica (maxmemory set) and for
    a cluster-mode node holding every slot."""
    master, replica = redis_servers.start(2, extra=("--maxmemory", "64mb"))
    replicate(replica, master)
    node = RedisServer("cluster-node", tmp_path / "cluster-node", port=cluster_port())
    node.extra = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
    redis_servers.servers.append(node)  # stopped with the others
    node.start()
    with node.client() as c:
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
    spec = exporter_container(
        # the test's servers are open: an explicitly open cluster (auth is on by default)
        RedisCluster.model_validate(
            {"metadata": {"name": "rc", "namespace": "ns"}, "spec": {"auth": {"enabled": False}}}
        ),
        image="exporter",
    )
    names: set[str] = set()
    for server in (master, replica, node):
        with run_sidecar(spec, log_dir=tmp_path, address=f"redis://{server.host}:{server.port}") as side:
            samples = side.scrape()
            assert any(s.name == "redis_up" and s.value == 1 for s in samples)
            names |= {s.name for s in samples}
    return names


def test_every_redis_series_queried_is_served_by_the_real_exporter(
    redis_servers: RedisServers, tmp_path: Path
) -> None:
    queried = {n for n in named_by_dashboard_and_alerts() if n.startswith("redis_")}
    assert len(queried) >= 10, queried
    missing = queried - served(redis_servers, tmp_path)
    assert not missing, f"queried but not served by redis_exporter: {sorted(missing)}"


def test_the_docs_layout_preview_is_drawn_from_the_dashboard_and_fresh() -> None:
    """docs/guide/dashboard-preview.svg: every panel's box with its title, and as generated now."""
    dashboard = json.loads(DASHBOARD.read_text())
    svg = ElementTree.fromstring(dashboard_preview.render(dashboard))
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    boxes = list(svg.iter("{http://www.w3.org/2000/svg}rect"))
    assert len(boxes) == 1 + len(dashboard["panels"])  # the background, then one per panel
    assert all(p["title"] in texts for p in dashboard["panels"])
    assert dashboard_preview.main(["--check"]) == 0, "run python -m examples.rediscluster.dashboard_preview"
