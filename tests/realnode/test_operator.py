"""The operator on real nodes: the chart installed with the real helm from the image built here
(``make image``), its Pods under containerd as the chart's non-root user, one leading, the
validating webhook reached through its Service (kube-proxy); a RedisCluster of real Redis
containers (``localhost/pyctrl/redis:7``) becomes Running, fails over when its master's node loses
power, and takes the old master back as a replica once the node is up again.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator

import pytest

from pyctrl.envtest import Environment, poll_until
from pyctrl.envtest.realnode.node import operator_image_archives
from pyctrl.testing import eventually
from tests.install.conftest import CHART, built
from tests.install.test_helm_install import (
    APPS,
    CRD,
    NS,
    RELEASE,
    holder,
    is_ready,
    operator_pods,
    the_webhook_refuses_an_invalid_spec,
)
from tests.operator.conftest import Cluster
from tests.realnode.test_real_node import container_state, kubectl

# The session environment starts within the first test's budget: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(1200)

REDIS_IMAGE = "localhost/pyctrl/redis:7"


@pytest.fixture(scope="module")
def helm(env: Environment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """helm against the real-node environment; the release is uninstalled at the end."""
    assert operator_image_archives(), "the operator's image is not built: run `make image` first"
    home = tmp_path_factory.mktemp("helm")
    environ = {
        **os.environ,
        "KUBECONFIG": str(env.kubeconfig_path),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    binary = built("helm")

    def run(*args: str, check: bool = True) -> str:
        out = subprocess.run(
            [binary, *args], env=environ, capture_output=True, text=True, timeout=600, check=False
        )
        assert not check or out.returncode == 0, f"helm {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
        return out.stdout

    yield run
    run("uninstall", RELEASE, "-n", NS, "--wait", check=False)


async def test_the_chart_runs_the_operator_in_containers_one_leading(
    env: Environment, helm: Callable[..., str]
) -> None:
    helm("install", RELEASE, str(CHART), "-n", NS, "--create-namespace", "--set", "webhook.enabled=true",
         "--wait", "--timeout", "8m")  # fmt: skip
    assert env.http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")

    def one_leading() -> bool:
        pods = operator_pods(env)
        names = {p["metadata"]["name"] for p in pods}
        return len(pods) == 2 and all(is_ready(p) for p in pods) and holder(env) in names

    poll_until("two Ready operator Pods, one holding the Lease", one_leading, 240, interval=1)
    for pod in operator_pods(env):
        assert container_state(pod)["containerID"].startswith("containerd://")
        uid = kubectl(env, "exec", "-n", NS, pod["metadata"]["name"], "--", "id", "-u")
        assert uid.stdout.strip() == "65532", uid  # the chart's runAsUser, enforced by runc
    env.create_namespace(APPS)
    await the_webhook_refuses_an_invalid_spec(env)  # apiserver -> Service -> kube-proxy -> Pod


async def test_a_redis_cluster_fails_over_a_power_loss_and_the_old_master_rejoins(
    env: Environment, helm: Callable[..., str]
) -> None:
    """Three Redis containers over two nodes; the master's node loses power (kubelet, containerd
    and its containers SIGKILLed at once): the operator promotes a replica on the other node; the
    node boots again and its Pods come back as replicas of the new master."""
    cluster = Cluster(env, APPS, "cache")
    cluster.create(replicas=3, image=REDIS_IMAGE, downAfterMilliseconds=2000)
    await eventually(lambda: cluster.ready(3), within=300, what="the RedisCluster Running", interval=1)
    pods = cluster.pods()
    for pod in pods.values():
        assert container_state(pod)["containerID"].startswith("containerd://")
    status = cluster.status()
    master, epoch = str(status["currentMaster"]), int(status["masterEpoch"])
    node = pods[master]["spec"]["nodeName"]
    survivors = [name for name, pod in pods.items() if pod["spec"]["nodeName"] != node]
    assert survivors, f"every Pod is on {node}"  # the scheduler spreads them (the StatefulSet's spread)
    env.stop_node(node)
    try:

        async def failed_over() -> bool:
            s = cluster.status()
            return bool(s.get("currentMaster") in survivors and s.get("masterEpoch", 0) > epoch)

        await eventually(
            failed_over, within=180, what=f"a failover away from {master} on {node}", interval=0.5
        )
        new = str(cluster.status()["currentMaster"])
        assert (await cluster.info(new))["role"] == "master"
    finally:
        env.start_node(node)
    await eventually(lambda: cluster.ready(3), within=300, what="all three Pods back", interval=1)
    roles = await cluster.roles()
    assert roles[master] == "slave", roles  # the old master rejoined as a replica
    assert list(roles.values()).count("master") == 1, roles
