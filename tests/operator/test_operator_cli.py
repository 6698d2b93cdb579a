"""The operator process refuses bad configuration with a clear message and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from pyctrl.envtest import Environment
from pyctrl.envtest._process import free_port
from pyctrl.testing import eventually
from tests.operator.conftest import Cluster, RunningOperator

ROOT = Path(__file__).resolve().parents[2]


def run_operator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.rediscluster",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_unreadable_kubeconfig_exits_2_naming_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("this: [is not a kubeconfig")
    result = run_operator(f"--kubeconfig={bad}")
    assert result.returncode == 2
    assert "Cannot load the Kubernetes configuration" in result.stderr


def test_an_unreachable_apiserver_exits_2_naming_the_host(tmp_path: Path, kubeconfig: Path) -> None:
    config = yaml.safe_load(kubeconfig.read_text())
    dead = f"https://127.0.0.1:{free_port()}"
    config["clusters"][0]["cluster"]["server"] = dead
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    result = run_operator(f"--kubeconfig={path}")
    assert result.returncode == 2
    assert "Cannot reach the apiserver" in result.stderr
    assert dead in result.stderr


def test_lease_timings_client_go_refuses_exit_2_naming_the_rule() -> None:
    result = run_operator(
        "--leader-elect", "--leader-elect-lease-duration=10", "--leader-elect-renew-deadline=10"
    )
    assert result.returncode == 2
    assert "--leader-elect-*: lease_duration must be greater than renew_deadline" in result.stderr
    result = run_operator("--leader-elect-retry-period=0")
    assert result.returncode == 2
    assert "--leader-elect-retry-period: must be positive: '0'" in result.stderr


@pytest.mark.controlplane
def test_a_cluster_without_the_crd_exits_2_saying_how_to_install_it() -> None:
    with Environment(local_node=False) as bare:
        result = run_operator(f"--kubeconfig={bare.kubeconfig_path}")
    assert result.returncode == 2
    assert "RedisCluster CRD is not installed" in result.stderr
    assert "crds/redis.pyctrl.dev_redisclusters.yaml" in result.stderr


@pytest.mark.controlplane
async def test_a_redis_config_overriding_managed_settings_is_reported_and_not_applied(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("badconf")
    # the CRD's CEL admits it (allowlisted key); the operator refuses the replica class
    c.create(replicas=1, redisConfig={"client-output-buffer-limit": "replica 0 0 0"})

    async def reported() -> bool:
        events = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
        return any(
            e["reason"] == "InvalidSpec" and "client-output-buffer-limit" in e["message"] for e in events
        )

    await eventually(reported, within=30, what="an InvalidSpec event naming the key", interval=0.2)
    sts = c.envtest.http.get(f"/apis/apps/v1/namespaces/{c.namespace}/statefulsets")["items"]
    assert sts == []

    async def condition() -> dict[str, str] | None:
        ready = [x for x in c.status().get("conditions", []) if x["type"] == "Ready"]
        return ready[0] if ready and ready[0]["reason"] == "InvalidSpec" else None

    ready = await eventually(condition, within=30, what="Ready=False with reason InvalidSpec", interval=0.2)
    assert ready["status"] == "False"
    assert "spec.redisConfig key 'client-output-buffer-limit'" in ready["message"]
