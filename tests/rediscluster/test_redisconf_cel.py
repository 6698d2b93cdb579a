"""The CEL rules of ``redisConfig`` (``redisconf.crd_schema``) on the real apiserver: a tiny test
CRD carries them (independent of the operator's CRD), and ``kubectl apply``'s server-side check
refuses every hostile entry of the security review, naming the key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples.rediscluster.api.redisconf import MAX_ENTRIES, check, crd_schema
from pyctrl.client import ApiClient, GroupVersionKind, Invalid, load_kubeconfig
from pyctrl.envtest import Environment
from tests.rediscluster.test_redisconf import HOSTILE_KEYS, HOSTILE_VALUES

pytestmark = pytest.mark.controlplane

GROUP = "redisconf.security.pyctrl.test"
PROBE = GroupVersionKind(GROUP, "v1", "RedisConfProbe")


@pytest.fixture(scope="module")
def probe_crd(envtest: Environment, tmp_path_factory: pytest.TempPathFactory) -> str:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"redisconfprobes.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "redisconfprobes", "singular": "redisconfprobe", "kind": "RedisConfProbe"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"redisConfig": crd_schema()}}
                            },
                        }
                    },
                }
            ],
        },
    }
    path = tmp_path_factory.mktemp("crd") / "probe.yaml"
    path.write_text(yaml.safe_dump(crd))
    return envtest.install_crds([path])[0]


@pytest.fixture
async def api(kubeconfig: Path, probe_crd: str) -> AsyncIterator[ApiClient]:
    client = ApiClient(await load_kubeconfig(kubeconfig))
    try:
        yield client
    finally:
        await client.close()


def probe(namespace: str, name: str, config: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "RedisConfProbe",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"redisConfig": config},
    }


async def test_every_hostile_key_is_refused_by_the_apiserver_naming_it(
    api: ApiClient, namespace: str
) -> None:
    for i, key in enumerate(sorted(HOSTILE_KEYS)):
        with pytest.raises(Invalid) as refused:
            await api.create(probe(namespace, f"k{i}", {"maxmemory": "1gb", key: "1"}))
        assert f"redisConfig may not set {key}" in refused.value.message, refused.value.message
        assert "maxmemory," not in refused.value.message  # only the bad key is named


async def test_every_hostile_value_is_refused_by_the_apiserver_naming_the_key(
    api: ApiClient, namespace: str
) -> None:
    for i, value in enumerate(HOSTILE_VALUES):
        if "\x00" in value:
            continue  # not valid JSON text for the apiserver either: refused before CEL
        with pytest.raises(Invalid) as refused:
            await api.create(probe(namespace, f"v{i}", {"hz": "10", "maxmemory": value}))
        assert "without backslashes or newlines: maxmemory" in refused.value.message, refused.value.message


async def test_what_the_apiserver_admits_the_code_renders(api: ApiClient, namespace: str) -> None:
    config = {
        "maxmemory": "1gb",
        "maxmemory-policy": "allkeys-lru",
        "notify-keyspace-events": "",
        "client-output-buffer-limit": "normal 0 0 0 pubsub 32mb 8mb 60",
        "lazyfree-lazy-eviction": "yes",
    }
    stored = await api.create(probe(namespace, "fine", config))
    assert stored["spec"]["redisConfig"] == config
    assert [check(k, v).name for k, v in sorted(config.items())] == sorted(config)


async def test_the_map_is_bounded(api: ApiClient, namespace: str) -> None:
    too_many = {f"k{i}": "1" for i in range(MAX_ENTRIES + 1)}
    with pytest.raises(Invalid, match="must have at most 64 items"):
        await api.create(probe(namespace, "many", too_many))
