"""Upgrading the RedisCluster API under a running operator: a cluster created as v1alpha1 keeps
serving, with the same pods, while the CRD gains v1beta1 as its storage version, the operator's
own webhook converts, and the objects are migrated; the operator then reconciles a change made
through v1beta1.

Its own control plane (with a local node): the test replaces the RedisCluster CRD, which the
session's control plane shares with every other test. Every apiserver call after the upgrade is
asynchronous: the operator serving the conversion runs on this event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples.rediscluster.api import RedisBackup, RedisCluster
from examples.rediscluster.api.v1beta1 import graduated_crd
from examples.rediscluster.operator import OperatorOptions, build_operator
from pyctrl.builder import webhook_configurations
from pyctrl.client import ApiClient, load_kubeconfig
from pyctrl.client.errors import InternalError
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.crdgen import generate_crd
from pyctrl.envtest import Environment
from pyctrl.migrate import CRD_GVK, migrate_storage
from pyctrl.testing import eventually
from tests.operator.conftest import _redis_at, password_of

pytestmark = pytest.mark.controlplane

CRD = "redisclusters.redis.pyctrl.dev"
NS = "upgrade"
POD = GroupVersionKind("", "v1", "Pod")
V1ALPHA1 = GroupVersionKind("redis.pyctrl.dev", "v1alpha1", "RedisCluster")
V1BETA1 = GroupVersionKind("redis.pyctrl.dev", "v1beta1", "RedisCluster")


@pytest.fixture(scope="module")
def plane() -> Iterator[Environment]:
    env = Environment()
    env.start()
    try:
        env.create_namespace(NS)
        yield env
    finally:
        env.stop()


def apply_crd(env: Environment, tmp: Path, crd: dict[str, Any]) -> None:
    path = tmp / "crd.yaml"
    path.write_text(yaml.safe_dump(crd))
    env.install_crds([path])


@contextlib.asynccontextmanager
async def running_operator(config: Any, port: int, certs: str) -> AsyncIterator[asyncio.Task[None]]:
    """The operator watching NS, its webhook server (validation and conversion) on ``port``."""
    options = OperatorOptions(
        namespace=NS,
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
        webhook_port=port,
        webhook_cert_dir=certs,
    )
    op = build_operator(config, options)
    stop = asyncio.Event()
    task = asyncio.create_task(op.manager.start(stop))
    try:
        yield task
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, 40)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def pods(client: ApiClient) -> dict[str, dict[str, Any]]:
    listed = await client.list(POD, namespace=NS, label_selector="app.kubernetes.io/instance=rc")
    return {p["metadata"]["name"]: p for p in listed.items}


CLUSTER = {
    "apiVersion": "redis.pyctrl.dev/v1alpha1",
    "kind": "RedisCluster",
    "metadata": {"name": "rc", "namespace": NS},
    "spec": {"replicas": 2, "downAfterMilliseconds": 5000},
}


async def created(task: asyncio.Task[None], client: ApiClient) -> bool:
    """Create the cluster once the operator's webhook server listens."""
    if task.done():
        task.result()  # surface an operator failure
    try:
        await client.create(CLUSTER)
    except InternalError:
        return False
    return True


async def running(
    task: asyncio.Task[None], client: ApiClient, kind: GroupVersionKind, replicas: int
) -> dict[str, Any] | None:
    """The cluster read as ``kind`` once it is Running with ``replicas`` ready pods."""
    if task.done():
        task.result()
    with contextlib.suppress(Exception):
        got = await client.get(kind, "rc", namespace=NS)
        status = got.get("status") or {}
        if status.get("phase") == "Running" and status.get("readyReplicas") == replicas:
            return dict(got)
    return None


async def test_a_cluster_keeps_serving_through_the_upgrade_and_the_migration(
    plane: Environment, tmp_path: Path
) -> None:
    apply_crd(plane, tmp_path, generate_crd(RedisBackup))
    apply_crd(plane, tmp_path, generate_crd(RedisCluster))  # the previous release: v1alpha1 only
    selector = {"matchLabels": {"kubernetes.io/metadata.name": NS}}
    validating = webhook_configurations(
        RedisCluster, defaulting=False, validating=True, namespace_selector=selector
    )
    options = plane.install_webhooks(validating)
    port, certs = options.local_serving_port, str(options.local_serving_cert_dir)
    config = await load_kubeconfig(plane.kubeconfig_path)
    upgraded = None
    try:
        async with running_operator(config, port, certs) as task, ApiClient(config) as client:
            await eventually(
                lambda: created(task, client), within=60, what="rc created (the webhook listens)"
            )
            before = await eventually(
                lambda: running(task, client, V1ALPHA1, 2), within=180, what="rc Running with 2 pods"
            )
            master = before["status"]["currentMaster"]
            uids = {name: p["metadata"]["uid"] for name, p in (await pods(client)).items()}
            master_ip = (await pods(client))[master]["status"]["podIP"]
            writer = _redis_at(master_ip, password_of(plane, NS, "rc"))  # auth on by default: generated
            await writer.set("before-upgrade", "1")

            # the upgrade: both versions, v1beta1 stored, the operator's webhook converting
            apply_crd(plane, tmp_path, graduated_crd())
            upgraded = plane.install_webhooks(conversion_crds=[CRD], port=port)
            beta = await eventually(
                lambda: running(task, client, V1BETA1, 2), within=60, what="rc served as v1beta1"
            )
            assert beta["spec"]["failover"]["downAfter"] == "5s"
            result = await migrate_storage(client, CRD)
            assert result.rewritten + result.changed_meanwhile == 1
            assert (await client.get(CRD_GVK, CRD))["status"]["storedVersions"] == ["v1beta1"]

            # the same pods, the same master, the data still there: no restart
            now = await pods(client)
            assert {name: p["metadata"]["uid"] for name, p in now.items()} == uids
            assert await writer.get("before-upgrade") == "1"
            assert (await client.get(V1ALPHA1, "rc", namespace=NS))["status"]["currentMaster"] == master

            # a change through v1beta1 is reconciled by the operator reading v1alpha1
            beta = await client.get(V1BETA1, "rc", namespace=NS)
            beta["spec"]["replicas"] = 3
            await client.update(beta)
            await eventually(
                lambda: running(task, client, V1BETA1, 3), within=180, what="rc scaled to 3 through v1beta1"
            )
            await writer.aclose()
    finally:
        plane.uninstall_webhooks(options)
        if upgraded is not None:
            plane.uninstall_webhooks(upgraded)
