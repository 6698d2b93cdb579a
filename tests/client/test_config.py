"""pyctrl.client.config: kubeconfig and in-cluster loading, clear errors."""

from __future__ import annotations

import os
import socket
import types
from pathlib import Path

import pytest
import yaml

from pyctrl.client import ApiClient, ConfigError, ConfigMap, TransportError, load_config, load_kubeconfig
from pyctrl.client.config import Config, load_incluster_config


def write_kubeconfig(path: Path, contexts: dict[str, str], current: str | None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in contexts.items()],
        "users": [{"name": "u", "user": {"token": "secret-token"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in contexts],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_an_explicit_kubeconfig_path_uses_its_current_context(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"one": "https://one:6443", "two": "https://two:6443"}, "one")
    cfg = await load_kubeconfig(path)
    assert cfg.host == "https://one:6443"
    assert await cfg.authorization() == "Bearer secret-token"


async def test_a_context_can_be_selected_by_name(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"one": "https://one:6443", "two": "https://two:6443"}, "one")
    assert (await load_kubeconfig(path, context="two")).host == "https://two:6443"


async def test_kubeconfig_env_var_is_used_and_its_paths_are_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = write_kubeconfig(tmp_path / "a", {"one": "https://one:6443"}, None)
    b = write_kubeconfig(tmp_path / "b", {"two": "https://two:6443"}, "two")
    monkeypatch.setenv("KUBECONFIG", f"{a}{os.pathsep}{b}")
    assert (await load_config()).host == "https://two:6443"
    assert (await load_config(context="one")).host == "https://one:6443"


@pytest.mark.parametrize(
    ("content", "context", "message"),
    [
        (None, None, "does not exist"),
        ("clusters: [unclosed", None, "kubeconfig"),
        ("just a string", None, "empty or not a mapping"),
        ("valid", "nope", "nope"),
        ("nocurrent", None, "no current-context"),
    ],
)
async def test_a_bad_kubeconfig_raises_config_error_naming_the_problem(
    tmp_path: Path, content: str | None, context: str | None, message: str
) -> None:
    path = tmp_path / "kc"
    if content == "valid":
        write_kubeconfig(path, {"one": "https://one:6443"}, "one")
    elif content == "nocurrent":
        write_kubeconfig(path, {"one": "https://one:6443"}, None)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        await load_kubeconfig(path, context=context)


async def test_in_cluster_config_rereads_a_rotated_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("first")
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = await load_incluster_config(token_file=str(token), ca_file=str(ca), environ=env)
    assert cfg.host == "https://10.0.0.1:443"
    assert await cfg.authorization() == "Bearer first"
    token.write_text("second")
    import datetime

    from kubernetes_asyncio.config import incluster_config

    later = datetime.datetime.now() + incluster_config.TOKEN_REFRESH_PERIOD * 2

    class _Later(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> _Later:
            return cls.fromtimestamp(later.timestamp(), tz)

    monkeypatch.setattr(incluster_config, "datetime", types.SimpleNamespace(datetime=_Later))
    assert await cfg.authorization() == "Bearer second"


async def test_in_cluster_config_outside_a_pod_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not running in a cluster"):
        await load_incluster_config(token_file=str(tmp_path / "t"), ca_file=str(tmp_path / "c"), environ={})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"host": "localhost:6443"}, "http"),
        ({"qps": 0.0}, "qps"),
        ({"burst": 0}, "burst"),
        ({"retries": -1}, "retries"),
    ],
)
def test_invalid_config_values_are_rejected(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config(**{"host": "https://h:1", **changes})  # type: ignore[arg-type]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_an_unreachable_apiserver_raises_transport_error_without_hanging() -> None:
    cfg = Config(host=f"https://127.0.0.1:{_closed_port()}", retries=1, timeout=5)
    async with ApiClient(cfg) as client:
        with pytest.raises(TransportError, match="cannot connect"):
            await client.get(ConfigMap, "x", namespace="default")
