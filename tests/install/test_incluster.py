"""The in-cluster contract on the local node, as the operator's image sees it from inside its Pod.

The Pod runs the operator's image (mapped to this checkout's entry point, see
``pyctrl.envtest.node.images``) with ``command: [python, -c, ...]``: its own ServiceAccount's
projected token, ``ca.crt`` and ``namespace`` under ``/var/run/secrets/kubernetes.io/serviceaccount``
and ``KUBERNETES_SERVICE_HOST``/``PORT`` are enough for pyctrl's ``load_config`` (kubernetes-asyncio's
in-cluster loader) to reach the apiserver as ``system:serviceaccount:<namespace>:<name>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest import Environment
from pyctrl.envtest.node.pod import LOG_DIR_ANNOTATION
from pyctrl.testing import eventually

pytestmark = pytest.mark.controlplane

OPERATOR_IMAGE = "pyctrl/rediscluster-operator:0.1.0"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
CHECKOUT_TOP = "/" + Path(__file__).resolve().parts[1]  # /work, or /tmp for a clone there

# Runs inside the Pod's sandbox; prints one JSON line the test reads from the container's log.
IN_CLUSTER_SCRIPT = f"""
import asyncio, json, os, ssl, sys
import aiohttp
from pyctrl import load_config

async def main():
    config = await load_config()
    review = {{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}}
    headers = {{"Authorization": await config.authorization()}}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            config.host + "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json=review, headers=headers, ssl=ssl.create_default_context(cafile=config.ca_file),
        ) as answer:
            user = (await answer.json())["status"]["userInfo"]["username"]
    print(json.dumps({{
        "files": sorted(f for f in os.listdir("{SA_DIR}") if not f.startswith("..")),  # no atomic-writer dirs
        "namespace": open("{SA_DIR}/namespace").read(),
        "host": config.host,
        "user": user,
        "executable": sys.executable,
        "kubeconfig": os.environ.get("KUBECONFIG"),
    }}))

asyncio.run(main())
"""


def _pod(envtest: Environment, namespace: str, name: str) -> dict[str, Any]:
    return dict(envtest.http.get(f"/api/v1/namespaces/{namespace}/pods/{name}"))


def _create_pod(
    envtest: Environment,
    namespace: str,
    name: str,
    container: dict[str, Any],
    sa: str,
    *,
    volumes: list[dict[str, Any]] | None = None,
) -> None:
    spec = {"serviceAccountName": sa, "restartPolicy": "Never", "containers": [container]}
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": spec | {"volumes": volumes or []},
    }
    envtest.http.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)


async def _finished(envtest: Environment, namespace: str, name: str) -> tuple[str, dict[str, Any], str]:
    """Wait for the Pod to finish; its phase, the Pod and its container's log."""

    def done() -> str | None:
        phase = _pod(envtest, namespace, name).get("status", {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = await eventually(done, within=90, what=f"Pod {name} to finish", interval=0.5)
    pod = _pod(envtest, namespace, name)
    output = (Path(pod["metadata"]["annotations"][LOG_DIR_ANNOTATION]) / "main.log").read_text()
    return phase, pod, output


async def test_the_operator_image_reaches_the_apiserver_as_its_service_account_from_inside_the_pod(
    envtest: Environment, namespace: str
) -> None:
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "probe"}}
    envtest.http.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", sa)
    container = {"name": "main", "image": OPERATOR_IMAGE, "command": ["python", "-c", IN_CLUSTER_SCRIPT]}
    _create_pod(envtest, namespace, "incluster", container, sa="probe")
    phase, pod, output = await _finished(envtest, namespace, "incluster")
    assert phase == "Succeeded", output
    seen = json.loads(output.strip().splitlines()[-1])
    assert seen["user"] == f"system:serviceaccount:{namespace}:probe"
    assert seen["namespace"] == namespace
    assert seen["files"] == ["ca.crt", "namespace", "token"]
    assert seen["host"] == envtest.server_url.rstrip("/")
    assert seen["kubeconfig"] is None  # nothing but the in-cluster contract
    # ServiceAccount admission added the projected volume the node mounted.
    volumes = [v["name"] for v in pod["spec"]["volumes"]]
    assert any(name.startswith("kube-api-access-") for name in volumes), volumes


async def test_the_operator_image_still_runs_under_an_empty_dir_mounted_over_its_checkouts_parent(
    envtest: Environment, namespace: str
) -> None:
    # The chart mounts an emptyDir at /tmp; a checkout (a CI clone) under /tmp must not vanish.
    top = CHECKOUT_TOP
    script = f"import examples.rediscluster.operator; open('{top}/written', 'w').write('ok'); print('ran')"
    container = {
        "name": "main",
        "image": OPERATOR_IMAGE,
        "command": ["python", "-c", script],
        "volumeMounts": [{"name": "scratch", "mountPath": top}],
    }
    _create_pod(
        envtest, namespace, "shadowed", container, sa="default", volumes=[{"name": "scratch", "emptyDir": {}}]
    )
    phase, _, output = await _finished(envtest, namespace, "shadowed")
    assert phase == "Succeeded", output
    assert output.strip().splitlines()[-1] == "ran"


async def test_an_image_the_node_does_not_map_waits_as_image_not_mapped(
    envtest: Environment, namespace: str
) -> None:
    container = {"name": "main", "image": "example.com/unmapped-operator:1.0"}
    _create_pod(envtest, namespace, "unmapped", container, sa="default")

    def waiting() -> dict[str, Any] | None:
        statuses = _pod(envtest, namespace, "unmapped").get("status", {}).get("containerStatuses") or []
        state = statuses[0].get("state", {}).get("waiting") if statuses else None
        return state if state and state.get("reason") == "ImageNotMapped" else None

    state = await eventually(waiting, within=60, what="ImageNotMapped", interval=0.5)
    assert "example.com/unmapped-operator:1.0" in state["message"]
    assert _pod(envtest, namespace, "unmapped")["status"]["phase"] == "Pending"
