"""The RedisCluster API graduating to v1beta1 on the real apiserver: an upgrade of the CRD with
existing v1alpha1 objects, the conversion webhook (pyctrl's ``/convert``, serving the scheme of
both versions), the storage migration, and the webhook going down and coming back.

It runs on its own control plane (no local node): it replaces the RedisCluster CRD, which the
session's control plane shares with every other test."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.v1beta1 import (
    PRESERVED_ANNOTATION,
    V1ALPHA1_DEPRECATION,
    RedisClusterV1beta1,
    graduated_crd,
)
from pyctrl.builder import CONVERT_PATH
from pyctrl.client.client import ApiClient
from pyctrl.client.config import load_kubeconfig
from pyctrl.client.errors import ApiError
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.scheme import default_scheme
from pyctrl.crdgen import generate_crd
from pyctrl.envtest import Environment
from pyctrl.envtest._components import etcd_post
from pyctrl.migrate import CRD_GVK, MigrationError, migrate_storage, storage_version
from pyctrl.testing import eventually
from pyctrl.webhook import ConversionHandler, Server

from ._kube import kubectl, kubectl_run

pytestmark = pytest.mark.controlplane

CRD = "redisclusters.redis.pyctrl.dev"
NS = "upgrade"
V1ALPHA1 = GroupVersionKind("redis.pyctrl.dev", "v1alpha1", "RedisCluster")
V1BETA1 = GroupVersionKind("redis.pyctrl.dev", "v1beta1", "RedisCluster")
#: the apiserver's error when it cannot convert from the stored version (the webhook is down)
CONVERSION_FAILED = "conversion webhook for redis.pyctrl.dev/v1beta1, Kind=RedisCluster failed"


@pytest.fixture(scope="module")
def plane() -> Iterator[Environment]:
    env = Environment(local_node=False)
    env.start()
    try:
        env.create_namespace(NS)
        yield env
    finally:
        env.stop()


def apply_crd(env: Environment, tmp: Path, crd: dict[str, Any]) -> None:
    path = tmp / "crd.yaml"
    path.write_text(yaml.safe_dump(crd))
    kubectl(env, env.kubeconfig_path, "apply", "--server-side", "--force-conflicts", "-f", str(path))


def stored_api_version(env: Environment, name: str) -> str:
    """The apiVersion etcd holds the object in (the storage encoding, not a served view)."""
    key = base64.b64encode(f"/registry/redis.pyctrl.dev/redisclusters/{NS}/{name}".encode()).decode()
    (kv,) = etcd_post(env.etcd_url, "/v3/kv/range", {"key": key})["kvs"]
    return str(json.loads(base64.b64decode(kv["value"]))["apiVersion"])


@contextlib.asynccontextmanager
async def conversion_webhook(port: int, cert_dir: Path) -> AsyncIterator[Server]:
    scheme = default_scheme.copy()
    scheme.add(RedisCluster, RedisClusterV1beta1)
    server = Server(host="127.0.0.1", port=port, cert_dir=cert_dir)
    server.register(CONVERT_PATH, ConversionHandler(scheme))
    await server.listen()
    stop = asyncio.Event()
    task = asyncio.create_task(server.start(stop))
    try:
        yield server
    finally:
        stop.set()
        await task


OLD: dict[str, Any] = {
    "apiVersion": "redis.pyctrl.dev/v1alpha1",
    "kind": "RedisCluster",
    "metadata": {"name": "old", "namespace": NS},
    "spec": {
        "replicas": 2,
        "image": "redis:7.2.4",
        "downAfterMilliseconds": 60000,
        "enablePersistence": True,
        "storageSize": "2Gi",
        "redisConfig": {"maxmemory-policy": "noeviction"},
    },
}


async def kubectl_async(env: Environment, *args: str, stdin: str | None = None) -> Any:
    """kubectl off the event loop: the conversion webhook it may need is served on this loop."""
    return await asyncio.to_thread(kubectl_run, env, env.kubeconfig_path, *args, stdin=stdin)


async def test_an_upgrade_converts_migrates_and_survives_the_webhook_going_down(
    plane: Environment, tmp_path: Path
) -> None:
    # the previous release: v1alpha1 only, as crds/ ships it today, with an object in it
    apply_crd(plane, tmp_path, generate_crd(RedisCluster))
    await eventually(lambda: _established(plane), within=60, what="the v1alpha1-only CRD established")
    kubectl(plane, plane.kubeconfig_path, "apply", "-f", "-", stdin=json.dumps(OLD))
    assert stored_api_version(plane, "old") == "redis.pyctrl.dev/v1alpha1"

    # the upgrade: both versions, v1beta1 stored, conversion by the webhook
    apply_crd(plane, tmp_path, graduated_crd())
    options = plane.install_webhooks(conversion_crds=[CRD])
    port, certs = options.local_serving_port, options.local_serving_cert_dir
    try:
        async with ApiClient(await load_kubeconfig(plane.kubeconfig_path)) as client:
            async with conversion_webhook(port, certs):
                await _both_versions_served(plane, client)
                await _round_trips_and_refusals(client)
                await _migration(plane, client)
            spec = await _webhook_down(plane, client)
            async with conversion_webhook(port, certs):  # back up: everything reads again, unchanged
                for name in ("old", "new", "spelled"):
                    alpha = await client.get(V1ALPHA1, name, namespace=NS)
                    assert alpha["spec"]["downAfterMilliseconds"] == 60000
                assert (await client.get(V1BETA1, "old", namespace=NS))["spec"] == spec
    finally:
        plane.uninstall_webhooks(options)


async def _both_versions_served(plane: Environment, client: ApiClient) -> None:
    async def old_as_v1beta1() -> dict[str, Any] | None:
        try:
            got = await client.get(V1BETA1, "old", namespace=NS)
        except ApiError:
            return None  # the apiserver picks up the CRD change
        return got if "redis" in got.get("spec", {}) else None

    beta = await eventually(old_as_v1beta1, within=60, what="the v1alpha1 object served as v1beta1")
    spec = beta["spec"]
    assert spec["redis"] == {"image": "redis:7.2.4", "config": {"maxmemory-policy": "noeviction"}}
    assert spec["persistence"] == {"enabled": True, "size": "2Gi"}
    assert (spec["failover"]["downAfter"], spec["replicas"]) == ("60s", 2)

    # kubectl, both versions; v1alpha1 warns that it is deprecated
    as_alpha = await kubectl_async(
        plane, "get", "redisclusters.v1alpha1.redis.pyctrl.dev", "old", "-n", NS, "-o", "yaml"
    )
    assert as_alpha.returncode == 0, as_alpha.stderr
    assert V1ALPHA1_DEPRECATION in as_alpha.stderr
    assert yaml.safe_load(as_alpha.stdout)["spec"]["downAfterMilliseconds"] == 60000
    as_beta = await kubectl_async(
        plane, "get", "redisclusters.v1beta1.redis.pyctrl.dev", "old", "-n", NS, "-o", "yaml"
    )
    assert as_beta.returncode == 0, as_beta.stderr
    assert "deprecated" not in as_beta.stderr
    assert yaml.safe_load(as_beta.stdout)["spec"]["failover"]["downAfter"] == "60s"

    # a v1alpha1 manifest applied after the upgrade is stored as v1beta1
    new = {**OLD, "metadata": {"name": "new", "namespace": NS}}
    applied = await kubectl_async(plane, "apply", "-f", "-", stdin=json.dumps(new))
    assert applied.returncode == 0, applied.stderr
    assert V1ALPHA1_DEPRECATION in applied.stderr
    assert stored_api_version(plane, "new") == "redis.pyctrl.dev/v1beta1"


async def _round_trips_and_refusals(client: ApiClient) -> None:
    # a v1beta1 spelling v1alpha1 cannot hold survives a write through v1alpha1
    spelled = {
        "apiVersion": "redis.pyctrl.dev/v1beta1",
        "kind": "RedisCluster",
        "metadata": {"name": "spelled", "namespace": NS},
        "spec": {"failover": {"downAfter": "1m"}},
    }
    await client.create(spelled)
    alpha = await client.get(V1ALPHA1, "spelled", namespace=NS)
    assert alpha["spec"]["downAfterMilliseconds"] == 60000
    assert PRESERVED_ANNOTATION in alpha["metadata"]["annotations"]
    alpha["metadata"].setdefault("labels", {})["touched"] = "yes"
    await client.update(alpha)
    back = await client.get(V1BETA1, "spelled", namespace=NS)
    assert (back["spec"]["failover"]["downAfter"], back["metadata"]["labels"]) == ("1m", {"touched": "yes"})
    assert PRESERVED_ANNOTATION not in (back["metadata"].get("annotations") or {})

    # an object v1alpha1 cannot represent: reading it so is refused, naming the field
    odd = {
        **spelled,
        "metadata": {"name": "odd", "namespace": NS},
        "spec": {"failover": {"downAfter": "1.0005s"}},
    }
    created = await client.create(odd)  # stored as v1beta1: no conversion needed
    with pytest.raises(ApiError, match=r"spec\.failover\.downAfter '1\.0005s' is not a whole number"):
        await client.get(V1ALPHA1, "odd", namespace=NS)
    await client.delete(created)


async def _migration(plane: Environment, client: ApiClient) -> None:
    crd = await client.get(CRD_GVK, CRD)
    assert sorted(crd["status"]["storedVersions"]) == ["v1alpha1", "v1beta1"]
    lines: list[str] = []
    result = await migrate_storage(client, CRD, page_size=1, progress=lines.append)
    assert result.stored_versions_before == ("v1alpha1", "v1beta1")
    assert result.rewritten + result.changed_meanwhile == 3  # old, new, spelled
    assert any("storedVersions" in line for line in lines)
    assert (await client.get(CRD_GVK, CRD))["status"]["storedVersions"] == ["v1beta1"]
    assert stored_api_version(plane, "old") == "redis.pyctrl.dev/v1beta1"
    # harmless a second time; here as the one-shot command
    command = [sys.executable, "-m", "pyctrl.migrate", CRD, "--kubeconfig", str(plane.kubeconfig_path)]
    again = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert (
        f"{CRD}: 3 rewritten, 0 changed meanwhile; storedVersions ['v1beta1'] -> ['v1beta1']" in again.stdout
    )
    with pytest.raises(
        MigrationError, match=re.escape("CRD widgets.example.com not found: install the new CRD")
    ):
        await migrate_storage(client, "widgets.example.com")


async def _webhook_down(plane: Environment, client: ApiClient) -> dict[str, Any]:
    """Reads in the stored version work, reads in the other fail with the apiserver's conversion
    error; returns the stored spec to compare once it is back."""
    stored = await client.get(V1BETA1, "old", namespace=NS)
    assert stored["spec"]["redis"]["image"] == "redis:7.2.4"
    with pytest.raises(ApiError, match=re.escape(CONVERSION_FAILED)):
        await client.get(V1ALPHA1, "old", namespace=NS)
    down = await kubectl_async(plane, "get", "redisclusters.v1alpha1.redis.pyctrl.dev", "old", "-n", NS)
    assert down.returncode != 0
    assert CONVERSION_FAILED in down.stderr
    return dict(stored["spec"])


async def _established(env: Environment) -> bool:
    crd = env.http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
    conditions = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
    return conditions.get("Established") == "True"


def test_storage_version_names_a_crd_without_exactly_one() -> None:
    assert storage_version(graduated_crd()) == "v1beta1"
    broken = {"metadata": {"name": "w.example.com"}, "spec": {"versions": [{"name": "v1"}]}}
    with pytest.raises(
        MigrationError, match=re.escape("CRD w.example.com: expected exactly one storage version, found none")
    ):
        storage_version(broken)
