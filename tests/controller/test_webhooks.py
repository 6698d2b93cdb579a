"""Admission webhooks on the real apiserver: envtest points the configurations at the manager's
webhook server; the apiserver calls it for Widgets in the test's namespace."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from pyctrl.builder import BuilderError, WebhookBuilder, mutate_path, validate_path, webhook_configurations
from pyctrl.client.errors import ApiError, Forbidden
from pyctrl.client.objects import ConfigMap
from pyctrl.envtest import Environment, EnvtestError
from pyctrl.testing import eventually
from pyctrl.webhook import Server, WebhookError

from ._manager import new_manager, running
from ._util import Widget, metric, widget

pytestmark = [pytest.mark.controlplane, pytest.mark.usefixtures("widget_crd")]


class WidgetDefaulter:
    async def default(self, obj: Widget) -> None:
        obj.metadata.labels = {"tier": "standard", **(obj.metadata.labels or {})}


class WidgetValidator:
    async def validate_create(self, obj: Widget) -> list[str] | None:
        if (obj.metadata.name or "").startswith("forbidden-"):
            raise ValueError(f"the name {obj.metadata.name} is reserved")
        return ["size 5 is the largest a Widget can be"] if obj.spec.size == 5 else None

    async def validate_update(self, old: Widget, new: Widget) -> list[str] | None:
        if new.spec.size < old.spec.size:
            raise ValueError(f"spec.size may not shrink ({old.spec.size} -> {new.spec.size})")
        return None

    async def validate_delete(self, obj: Widget) -> list[str] | None:
        if (obj.metadata.labels or {}).get("protected") == "true":
            raise ValueError("a protected Widget cannot be deleted; remove the label first")
        return None


def test_the_generated_configurations_call_the_builders_paths() -> None:
    selector = {"matchLabels": {"kubernetes.io/metadata.name": "ns"}}
    mutating, validating = webhook_configurations(
        Widget, defaulting=True, validating=True, namespace_selector=selector
    )
    assert mutating == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mwidget.test.pyctrl.dev"},
        "webhooks": [
            {
                "name": "mwidget.test.pyctrl.dev",
                "clientConfig": {
                    "service": {"name": "webhook-service", "namespace": "system", "path": mutate_path(Widget)}
                },
                "rules": [
                    {
                        "apiGroups": ["test.pyctrl.dev"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["widgets"],
                    }
                ],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "namespaceSelector": selector,
            }
        ],
    }
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    (hook,) = validating["webhooks"]
    assert hook["clientConfig"]["service"]["path"] == validate_path(Widget)
    assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE", "DELETE"]
    (config_map_hook,) = webhook_configurations(ConfigMap, defaulting=False, validating=True)[0]["webhooks"]
    assert config_map_hook["rules"][0]["resources"] == ["configmaps"]
    assert config_map_hook["name"] == "vconfigmap.core"


async def kubectl_apply(envtest: Environment, kubeconfig: Path, manifest: str) -> tuple[int, str]:
    """(exit code, stderr); asynchronous, as the webhook server it calls runs on this loop."""
    assert envtest.bin_dir is not None
    proc = await asyncio.create_subprocess_exec(
        str(envtest.bin_dir / "kubectl"),
        f"--kubeconfig={kubeconfig}",
        "apply",
        "-f",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(manifest.encode()), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def test_the_paths_are_controller_runtimes() -> None:
    assert mutate_path(Widget) == "/mutate-test-pyctrl-dev-v1-widget"
    assert validate_path(ConfigMap) == "/validate--v1-configmap"


async def test_the_webhook_builder_reports_misuse(kubeconfig: Path, namespace: str) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    with pytest.raises(BuilderError, match="needs for_"):
        WebhookBuilder(mgr).with_validator(WidgetValidator()).complete()
    with pytest.raises(BuilderError, match="with_defaulter"):
        WebhookBuilder(mgr).for_(Widget).complete()
    await mgr.api_client.close()


async def test_defaulting_and_validating_webhooks_are_called_by_the_apiserver(
    envtest: Environment, kubeconfig: Path, namespace: str
) -> None:
    # what the builder serves, limited to this test's namespace
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    configurations = webhook_configurations(
        Widget, defaulting=True, validating=True, namespace_selector=selector
    )
    options = envtest.install_webhooks(configurations)
    try:
        server = Server(
            host=options.local_serving_host,
            port=options.local_serving_port,
            cert_dir=options.local_serving_cert_dir,
        )
        mgr = await new_manager(kubeconfig, namespace, webhook_server=server)
        paths = (
            WebhookBuilder(mgr)
            .for_(Widget)
            .with_defaulter(WidgetDefaulter())
            .with_validator(WidgetValidator())
        ).complete()
        assert paths == [mutate_path(Widget), validate_path(Widget)]
        mgr.add_readyz_check("webhook", mgr.webhook_server.started_checker())
        async with running(mgr):
            client = mgr.api_client

            async def defaulted() -> bool:  # the apiserver sees new configurations within moments
                probe = await client.create(widget(namespace, "probe"), dry_run=True)
                return (probe.metadata.labels or {}).get("tier") == "standard"

            await eventually(defaulted, within=30, what="the mutating webhook to be called")

            created = await client.create(widget(namespace, "a", size=2, team="x"))
            assert created.metadata.labels == {"tier": "standard", "team": "x"}

            with pytest.raises(Forbidden, match="denied the request: the name forbidden-b is reserved"):
                await client.create(widget(namespace, "forbidden-b"))

            created.spec.size = 1
            with pytest.raises(ApiError, match=r"spec.size may not shrink \(2 -> 1\)"):
                await client.update(created)

            guarded = await client.create(widget(namespace, "guarded", protected="true"))
            with pytest.raises(Forbidden, match="cannot be deleted; remove the label first"):
                await client.delete(guarded)
            guarded.metadata.labels = {"tier": "standard"}
            await client.delete(await client.update(guarded))

            manifest = (
                "apiVersion: test.pyctrl.dev/v1\nkind: Widget\n"
                f"metadata: {{name: big, namespace: {namespace}}}\nspec: {{size: 5}}\n"
            )
            code, stderr = await kubectl_apply(envtest, kubeconfig, manifest)
            assert code == 0, stderr
            assert "Warning: size 5 is the largest a Widget can be" in stderr

            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{mgr.probe_port}/readyz/webhook") as ready,
            ):
                assert (ready.status, await ready.text()) == (200, "ok")
            assert (
                metric("controller_runtime_webhook_requests_total", webhook=validate_path(Widget), code="200")
                >= 5
            )
    finally:
        envtest.uninstall_webhooks(options)


async def test_a_manager_whose_webhook_server_has_no_certificate_fails_to_start_naming_it(
    kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    server = Server(host="127.0.0.1", port=0, cert_dir=tmp_path / "no-certs")
    mgr = await new_manager(kubeconfig, namespace, webhook_server=server)
    with pytest.raises(WebhookError, match=r"cannot load the serving certificate .*no-certs/tls.crt"):
        await mgr.start(asyncio.Event())


def test_install_webhooks_refuses_an_empty_request(envtest: Environment) -> None:
    with pytest.raises(EnvtestError, match="no MutatingWebhookConfiguration or Validating"):
        envtest.install_webhooks([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}])
