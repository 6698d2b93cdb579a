"""The RedisCluster validating webhook: the reconciler's InvalidSpec check, moved up front."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.webhook import RedisClusterValidator
from pyctrl.builder import CONVERT_PATH, webhook_configurations
from pyctrl.client import ApiClient, load_kubeconfig
from pyctrl.client.errors import ApiError, Invalid
from pyctrl.envtest import Environment
from pyctrl.envtest._process import free_port
from pyctrl.testing import eventually
from tests.operator.conftest import OperatorFactory
from tests.operator.test_operator_cli import run_operator


async def _converted_by(port: int, ca: bytes) -> Any:
    """spec.failover of a v1alpha1 RedisCluster converted to v1beta1 by the operator's /convert."""
    obj = {"apiVersion": "redis.pyctrl.dev/v1alpha1", "kind": "RedisCluster", "metadata": {"name": "c"}}
    review = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "u",
            "desiredAPIVersion": "redis.pyctrl.dev/v1beta1",
            "objects": [{**obj, "spec": {"downAfterMilliseconds": 7000}}],
        },
    }
    context = ssl.create_default_context(cadata=ca.decode())
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"https://127.0.0.1:{port}{CONVERT_PATH}", json=review, ssl=context) as answer,
    ):
        body = await answer.json()
    return body["response"]["convertedObjects"][0]["spec"]["failover"]


def cluster(**spec: Any) -> RedisCluster:
    return RedisCluster.model_validate({"metadata": {"name": "rc", "namespace": "ns"}, "spec": spec})


async def test_the_validator_refuses_managed_directives_naming_the_field() -> None:
    v = RedisClusterValidator()
    with pytest.raises(Invalid) as refused:
        await v.validate_create(cluster(redisConfig={"port": "7000", '"dir"': "/etc", "hz": "10"}))
    assert refused.value.code == 422
    assert refused.value.message == (  # every bad entry, each naming its key
        "spec.redisConfig key '\"dir\"' (that is dir): dir is managed by the operator; "
        "spec.redisConfig key 'port': port is managed by the operator"
    )
    assert [c.field for c in refused.value.causes] == ["spec.redisConfig", "spec.redisConfig"]
    with pytest.raises(Invalid, match=r"spec\.redisConfig key 'maxmemory-policy': the value holds '\\n'"):
        await v.validate_update(cluster(), cluster(redisConfig={"maxmemory-policy": "a\nb"}))
    assert (
        await v.validate_create(cluster(replicas=3, redisConfig={"maxmemory-policy": "allkeys-lru"})) is None
    )
    assert await v.validate_create(cluster(replicas=1)) == [
        "spec.replicas is 1: there is no replica to fail over to"
    ]
    assert await v.validate_delete(cluster(redisConfig={"port": "1"})) is None  # deleting is always fine


@pytest.mark.controlplane
async def test_the_apiserver_refuses_an_unrunnable_spec_through_the_operators_webhook(
    envtest: Environment, kubeconfig: Path, namespace: str, start_operator: OperatorFactory
) -> None:
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    configurations = webhook_configurations(
        RedisCluster, defaulting=False, validating=True, namespace_selector=selector
    )
    options = envtest.install_webhooks(configurations)
    # an asynchronous client: the operator (and its webhook server) runs on this event loop
    client = ApiClient(await load_kubeconfig(kubeconfig))
    try:
        running = await start_operator(
            webhook_port=options.local_serving_port, webhook_cert_dir=str(options.local_serving_cert_dir)
        )
        assert await _converted_by(options.local_serving_port, options.ca_data) == {
            "auto": True,
            "downAfter": "7s",
            "nodeLoss": {"afterSeconds": 30, "forceDeletePods": False},
        }
        assert CONVERT_PATH in running.operator.manager.webhook_server.paths
        bad: dict[str, Any] = {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisCluster",
            "metadata": {"name": "bad", "namespace": namespace},
            # admitted by the CRD's CEL rules (allowlisted key, printable value), refused by the
            # operator's check: the replica class sizes the operator's own replication links
            "spec": {"replicas": 1, "redisConfig": {"client-output-buffer-limit": "replica 0 0 0"}},
        }

        async def refused() -> ApiError | None:  # the apiserver sees the new configuration within moments
            try:
                await client.create(bad, dry_run=True)
            except ApiError as exc:
                return exc
            return None

        error = await eventually(refused, within=30, what="the webhook to refuse the spec")
        assert error.code == 422
        assert "denied the request: spec.redisConfig key 'client-output-buffer-limit'" in error.message
        good: dict[str, Any] = {
            **bad,
            "metadata": {"name": "good", "namespace": namespace},
            "spec": {"replicas": 1},
        }
        created = await client.create(good)
        assert created["metadata"]["name"] == "good"
    finally:
        await client.close()
        envtest.uninstall_webhooks(options)


@pytest.mark.controlplane
def test_the_operator_exits_2_when_the_webhook_has_no_certificate(tmp_path: Path, kubeconfig: Path) -> None:
    result = run_operator(
        f"--kubeconfig={kubeconfig}",
        f"--webhook-port={free_port()}",
        f"--webhook-cert-dir={tmp_path / 'none'}",
    )
    assert result.returncode == 2, result.stderr
    assert "Cannot serve the webhook" in result.stderr
    assert f"{tmp_path / 'none'}/tls.crt" in result.stderr
