"""The scaffolded operator (see conftest), started as its own process against the real control
plane with its webhooks installed: it reconciles the generated sample (a Deployment with a
controller reference, the status written, the finalizer run on deletion), the apiserver calls its
defaulting and validating webhooks, and a conversion round trip through its /convert is lossless."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyctrl import load_config
from pyctrl.client import ApiClient
from pyctrl.client.errors import ApiError, NotFound
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.envtest import Environment
from pyctrl.envtest._process import free_port
from pyctrl.testing import eventually

from .conftest import GROUP, PACKAGE, Scaffolded, project_env

pytestmark = pytest.mark.controlplane

V1 = GroupVersionKind(GROUP, "v1", "Memcached")
V2 = GroupVersionKind(GROUP, "v2", "Memcached")
DEPLOYMENT = GroupVersionKind("apps", "v1", "Deployment")


@pytest.fixture
def operator(scaffolded: Scaffolded, envtest: Environment, tmp_path: Path) -> Iterator[None]:
    """The operator process, its CRD installed and its webhooks pointed at it."""
    root = scaffolded.root
    envtest.install_crds([root / "crds"])
    options = envtest.install_webhooks(
        [root / "config" / "webhook" / "manifests.yaml"], conversion_crds=[f"memcacheds.{GROUP}"]
    )
    log = (tmp_path / "operator.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            PACKAGE,
            "--kubeconfig",
            str(envtest.kubeconfig_path),
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            f"127.0.0.1:{free_port()}",
            "--webhook-host",
            options.local_serving_host,
            "--webhook-port",
            str(options.local_serving_port),
            "--webhook-cert-dir",
            str(options.local_serving_cert_dir),
        ],
        cwd=root,
        env=project_env(root),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
            envtest.uninstall_webhooks(options)
        assert proc.returncode == 0, (tmp_path / "operator.log").read_text()[-4000:]


@pytest.fixture
async def client(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    api = ApiClient(await load_config(str(kubeconfig)))
    try:
        yield api
    finally:
        await api.close()


def _sample(root: Path, namespace: str) -> dict[str, Any]:
    sample: dict[str, Any] = yaml.safe_load(
        (root / "config" / "samples" / "cache_v1_memcached.yaml").read_text()
    )
    sample["metadata"]["namespace"] = namespace
    return sample


async def test_the_operator_reconciles_the_sample_and_serves_its_webhooks(
    scaffolded: Scaffolded, operator: None, client: ApiClient, namespace: str
) -> None:
    sample = _sample(scaffolded.root, namespace)
    name = sample["metadata"]["name"]

    async def create() -> dict[str, Any]:  # the webhook server may still be starting
        created: dict[str, Any] = await client.create(sample)
        return created

    created = await eventually(create, within=60, what="the sample created through the webhooks")
    # the defaulting webhook labelled it
    assert created["metadata"]["labels"]["app.kubernetes.io/name"] == "memcached"

    async def reconciled() -> dict[str, Any] | None:
        obj: dict[str, Any] = await client.get(V1, name, namespace=namespace)
        status = obj.get("status") or {}
        return obj if status.get("observedGeneration") == obj["metadata"]["generation"] else None

    obj = await eventually(reconciled, within=60, what="the sample's status written")
    assert f"{GROUP}/finalizer" in obj["metadata"]["finalizers"]
    assert [c["type"] for c in obj["status"]["conditions"]] == ["Available"]
    deployment: dict[str, Any] = await client.get(DEPLOYMENT, name, namespace=namespace)
    (owner,) = deployment["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Memcached",
        name,
        created["metadata"]["uid"],
        True,
    )
    assert deployment["spec"]["replicas"] == sample["spec"]["size"]

    # the validating webhook refuses an image without a tag, naming the field
    bad = _sample(scaffolded.root, namespace)
    bad["metadata"]["name"] = "untagged"
    bad["spec"]["image"] = "memcached"
    with pytest.raises(ApiError, match="needs a tag or digest"):
        await client.create(bad)

    # conversion through /convert: the stored v1 object served as v2 and back, nothing lost
    as_v2: dict[str, Any] = await client.get(V2, name, namespace=namespace)
    assert as_v2["apiVersion"] == f"{GROUP}/v2"
    assert as_v2["spec"] == obj["spec"]
    v2 = {**_sample(scaffolded.root, namespace), "apiVersion": f"{GROUP}/v2"}
    v2["metadata"]["name"] = "from-v2"
    v2["spec"] = {"size": 0, "image": "memcached:1.6.21", "containerPort": 11300}
    await client.create(v2)
    stored: dict[str, Any] = await client.get(V1, "from-v2", namespace=namespace)
    back: dict[str, Any] = await client.get(V2, "from-v2", namespace=namespace)
    assert stored["spec"] == back["spec"] == v2["spec"]

    # deletion waits for the finalizer, which the operator runs and removes
    await client.delete(obj)

    async def gone() -> bool:
        try:
            await client.get(V1, name, namespace=namespace)
        except NotFound:
            return True
        return False

    await eventually(gone, within=60, what="the sample deleted once the operator ran its finalizer")
