"""pyctrl.client.config loads kubeconfigs without kubernetes-asyncio's generated client.

Each case runs in a fresh interpreter: this test process has usually imported kubernetes-asyncio
in full already (the local node uses its ApiClient), and what is imported is the point.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

_GENERATED = ("kubernetes_asyncio.client.api.core_v1_api", "kubernetes_asyncio.client.models.v1_pod")


def _kubeconfig(tmp_path: Path) -> Path:
    """Three contexts: a bearer token, inline client certificate data, an exec plugin."""
    plugin = "import json; print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', "
    plugin += "'kind': 'ExecCredential', 'status': {'token': 'from-the-plugin'}}))"
    pem = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "token",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://c:6443", "certificate-authority-data": pem}}
        ],
        "users": [
            {"name": "token", "user": {"token": "secret-token"}},
            {"name": "cert", "user": {"client-certificate-data": pem, "client-key-data": pem}},
            {
                "name": "exec",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": sys.executable,
                        "args": ["-c", plugin],
                        "interactiveMode": "Never",
                    }
                },
            },
        ],
        "contexts": [{"name": u, "context": {"cluster": "c", "user": u}} for u in ("token", "cert", "exec")],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(script: str, **paths: Path) -> dict[str, object]:
    """Run ``script`` in a fresh interpreter; it prints one JSON document as its last line."""
    head = "import asyncio, json, sys\n" + "".join(f"{k} = {str(v)!r}\n" for k, v in paths.items())
    proc = subprocess.run(
        [sys.executable, "-c", head + textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_every_kubeconfig_shape_loads_without_importing_the_generated_client(tmp_path: Path) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("pod-token")
    ca.write_text("ca")
    out = _run(
        f"""
        from pyctrl.client.config import load_incluster_config, load_kubeconfig

        async def main():
            seen = {{}}
            for context in ("token", "cert", "exec"):
                cfg = await load_kubeconfig(kubeconfig, context=context)
                seen[context] = [cfg.host, bool(cfg.cert_file and cfg.key_file), await cfg.authorization()]
            env = {{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}}
            cfg = await load_incluster_config(token_file=token, ca_file=ca, environ=env)
            seen["incluster"] = [cfg.host, cfg.ca_file == ca, await cfg.authorization()]
            return seen

        seen = asyncio.run(main())
        seen["generated"] = [m for m in {_GENERATED!r} if m in sys.modules]
        print(json.dumps(seen))
        """,
        kubeconfig=_kubeconfig(tmp_path),
        token=token,
        ca=ca,
    )
    assert out == {
        "token": ["https://c:6443", False, "Bearer secret-token"],
        "cert": ["https://c:6443", True, None],
        "exec": ["https://c:6443", False, "Bearer from-the-plugin"],
        "incluster": ["https://10.0.0.1:443", True, "Bearer pod-token"],
        "generated": [],
    }


def test_the_whole_kubernetes_asyncio_still_imports_after_a_load(tmp_path: Path) -> None:
    out = _run(
        """
        from pyctrl.client.config import load_kubeconfig

        asyncio.run(load_kubeconfig(kubeconfig))
        import kubernetes_asyncio
        from kubernetes_asyncio.client import ApiClient, Configuration, V1Pod
        from kubernetes_asyncio.config import new_client_from_config
        from pyctrl.client._kubeloader import loaders

        async def decode():
            async with ApiClient() as api:  # deserializing reads kubernetes_asyncio.client.models
                return api._ApiClient__deserialize({"metadata": {"name": "p"}}, "V1Pod")

        pod = asyncio.run(decode())
        print(json.dumps({
            "api": kubernetes_asyncio.client.CoreV1Api.__name__,
            "model": type(pod).__name__ if isinstance(pod, V1Pod) else None,
            "name": pod.metadata.name,
            "same_configuration": Configuration is loaders().Configuration,
            "watch": kubernetes_asyncio.watch.Watch.__name__,
            "version": kubernetes_asyncio.__version__ != "",
            "loader": callable(new_client_from_config),
        }))
        """,
        kubeconfig=_kubeconfig(tmp_path),
    )
    assert out == {
        "api": "CoreV1Api",
        "model": "V1Pod",
        "name": "p",
        "same_configuration": True,
        "watch": "Watch",
        "version": True,
        "loader": True,
    }


def test_a_kubernetes_asyncio_imported_in_full_first_is_used_as_it_is(tmp_path: Path) -> None:
    out = _run(
        """
        import kubernetes_asyncio.client
        from pyctrl.client.config import load_kubeconfig
        from pyctrl.client._kubeloader import loaders

        cfg = asyncio.run(load_kubeconfig(kubeconfig, context="exec"))
        print(json.dumps({
            "auth": asyncio.run(cfg.authorization()),
            "same": loaders().Configuration is kubernetes_asyncio.client.Configuration,
        }))
        """,
        kubeconfig=_kubeconfig(tmp_path),
    )
    assert out == {"auth": "Bearer from-the-plugin", "same": True}


def test_importing_pyctrl_loads_neither_the_generated_client_nor_the_http_server() -> None:
    out = _run(
        f"""
        import pyctrl, pyctrl.client, pyctrl.manager, pyctrl.webhook
        print(json.dumps({{"loaded": [m for m in {(*_GENERATED, "aiohttp.web", "kubernetes_asyncio")!r}
                                       if m in sys.modules]}}))
        """
    )
    assert out == {"loaded": []}
