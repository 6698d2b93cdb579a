"""The Node itself: registration, Lease, scheduling, and that stopping or killing the node (or the
whole environment) leaves no Pod process behind."""

from __future__ import annotations

import asyncio
import ctypes
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest import Environment, poll_until
from pyctrl.envtest.node.kube import ApiError, Kube
from pyctrl.testing import eventually
from tests.node.helpers import alive, children, condition, container_pid, create, get_pod

pytestmark = pytest.mark.controlplane


async def test_the_node_registers_ready_on_loopback_and_renews_its_lease(kube: Kube) -> None:
    node = await kube.get("/api/v1/nodes/local-node")
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions == {
        "Ready": "True",
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
    }
    [internal] = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
    assert re.fullmatch(r"127\.\d+\.0\.1", internal)  # its own loopback block
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "local-node"
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-a"
    assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] > 0
    assert int(node["status"]["allocatable"]["pods"]) > 0
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.")
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/local-node"
    lease = await kube.get(lease_path)
    assert lease["spec"]["holderIdentity"] == "local-node"
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    first = lease["spec"]["renewTime"]

    async def renewed() -> str | None:
        renew = (await kube.get(lease_path))["spec"]["renewTime"]
        return renew if renew != first else None

    later = await eventually(renewed, within=25, what="the lease to be renewed", interval=0.1)
    assert lease["spec"]["leaseDurationSeconds"] == 10  # renewed every 2 s
    assert datetime.fromisoformat(later) > datetime.fromisoformat(first)


async def test_pending_pods_are_bound_unless_their_node_selector_does_not_match(
    kube: Kube, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    container = {"name": "c", "image": "redis:7", "command": ["sleep", "300"]}
    await create(kube, path, {"metadata": {"name": "fits"}, "spec": {"containers": [container]}})
    picky = {"nodeSelector": {"disktype": "ssd"}, "containers": [container]}
    await create(kube, path, {"metadata": {"name": "picky"}, "spec": picky})

    async def running() -> dict[str, Any] | None:
        pod = await get_pod(kube, namespace, "fits")
        return pod if pod and pod["status"].get("phase") == "Running" else None

    fits = await eventually(running, within=60, what="fits Running", interval=0.1)
    assert fits["spec"]["nodeName"] == "local-node"
    assert condition(fits, "PodScheduled") == "True"

    async def unschedulable() -> dict[str, Any] | None:
        pod = await get_pod(kube, namespace, "picky")
        return pod if pod and condition(pod, "PodScheduled") == "False" else None

    picky_pod = await eventually(unschedulable, within=60, what="picky Unschedulable", interval=0.1)
    assert "nodeName" not in picky_pod["spec"]
    [cond] = [c for c in picky_pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["reason"] == "Unschedulable"  # written by kube-scheduler, not by the node
    assert "didn't match Pod's node affinity/selector" in cond["message"]


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: never outlive the test run


@pytest.fixture
def extra_node(kubeconfig: Path, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A second node agent (no provisioner, its own image map) on the session's control plane."""
    name = f"extra-{uuid.uuid4().hex[:6]}"
    argv = [sys.executable, "-m", "pyctrl.envtest.node", f"--kubeconfig={kubeconfig}"]
    argv += [f"--state-dir={tmp_path / 'node'}", f"--node-name={name}", "--no-provisioner"]
    argv += ["--image-map=example.com/sleeper*=sleep"]  # replaces the default map
    with (tmp_path / "node.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)  # noqa: PLW1509
    try:
        yield name, proc
    finally:
        proc.kill()
        proc.wait(10)


def node_log(proc: subprocess.Popen[bytes], lines: int = 60) -> str:
    """The end of an ``extra_node``'s log (written beside its ``--state-dir``)."""
    state_dir = next(str(a).split("=", 1)[1] for a in proc.args if str(a).startswith("--state-dir="))  # type: ignore[union-attr]
    text = (Path(state_dir).parent / "node.log").read_text(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


@pytest.fixture
async def extra_node_pod(
    extra_node: tuple[str, subprocess.Popen[bytes]], kube: Kube, namespace: str
) -> AsyncIterator[tuple[subprocess.Popen[bytes], int]]:
    """A Pod running on the extra node: (node process, container pid). Cleaned up afterwards."""
    name, proc = extra_node

    async def node_ready() -> bool:
        try:
            node = await kube.get(f"/api/v1/nodes/{name}")
        except ApiError:
            return False
        return condition(node, "Ready") == "True"

    await eventually(node_ready, within=60, what=f"node {name} Ready", interval=0.1)
    # The image is known only through the node's --image-map.
    container = {
        "name": "c",
        "image": "example.com/sleeper:1",
        "command": ["sh", "-c", "sleep 300 & sleep 300"],
    }
    pod = {"metadata": {"name": "on-extra"}, "spec": {"nodeName": name, "containers": [container]}}
    await create(kube, f"/api/v1/namespaces/{namespace}/pods", pod)

    async def running() -> dict[str, Any] | None:
        current = await get_pod(kube, namespace, "on-extra")
        return current if current and current["status"].get("phase") == "Running" else None

    running_pod = await eventually(running, within=60, what="pod on the extra node Running", interval=0.1)
    assert running_pod["status"]["podIP"].startswith("127.")
    pid = container_pid(running_pod)
    try:
        yield proc, pid
    finally:
        body = {"gracePeriodSeconds": 0}
        for path in (f"/api/v1/namespaces/{namespace}/pods/on-extra", f"/api/v1/nodes/{name}"):
            try:
                await kube.request("DELETE", path, body=body)
            except ApiError as exc:
                if exc.code != 404:
                    raise


async def test_stopping_the_node_stops_every_pod_process_and_exits_zero(
    extra_node_pod: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, pid = extra_node_pod
    forked = children(pid)
    assert forked, "the container's shell should have a background child"
    proc.send_signal(signal.SIGTERM)
    # a generous bound: the node stops its pods (SIGTERM, --stop-grace 5 s, SIGKILL), then reports
    # its Node NotReady to the apiserver and closes its connections; on a loaded 2-core CI machine
    # that once took over 30 s. Waited for in a thread: the test's event loop keeps serving.
    try:
        code = await asyncio.to_thread(proc.wait, 120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the node did not stop within 120 s; its log ends:\n{node_log(proc)}")
    assert code == 0, node_log(proc)
    assert not alive(pid)
    assert [c for c in forked if alive(c)] == []


async def test_a_killed_node_leaves_no_pod_process(
    extra_node_pod: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, pid = extra_node_pod
    proc.kill()
    proc.wait(10)

    async def dead() -> bool:
        return not alive(pid)

    await eventually(dead, within=10, what="the container to die with its node", interval=0.1)


def test_stopping_the_environment_leaves_no_pod_process() -> None:
    env = Environment().start()
    try:
        pod = {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "redis:7", "command": ["sleep", "300"]}]},
        }
        env.create_namespace("stop-test")
        env.http.request("POST", "/api/v1/namespaces/stop-test/pods", pod)
        deadline = 60.0
        pid = 0

        def started() -> bool:
            nonlocal pid
            status = env.http.get("/api/v1/namespaces/stop-test/pods/p").get("status", {})
            statuses = status.get("containerStatuses") or [{}]
            if "running" in statuses[0].get("state", {}):
                pid = container_pid({"status": status})
                return True
            return False

        poll_until("pod p running", started, deadline)
        assert alive(pid)
    finally:
        env.stop()
    assert not alive(pid)
