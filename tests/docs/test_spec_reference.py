"""The guide's spec reference (``docs/operator/spec.md``) is generated from the pydantic types and
says what the CRDs say: the same fields, the same descriptions, and an example for each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples.rediscluster.api.backup import RedisBackupSpec
from examples.rediscluster.api.rediscluster import RedisClusterSpec
from examples.rediscluster.api.reference import EXAMPLES, OUTPUT, fields, render

CRDS = Path(__file__).resolve().parents[2] / "crds"
#: core/v1 types, documented as one entry each
OPAQUE = {
    "spec.affinity",
    "spec.tolerations",
    "spec.topologySpreadConstraints",
    # LabelSelectors (core/v1 meaning): one entry each, as reference.py's _OPAQUE
    "spec.networkPolicy.clients[].podSelector",
    "spec.networkPolicy.clients[].namespaceSelector",
}


def _crd_fields(crd: str) -> dict[str, str]:
    """path -> description of every property under ``spec`` in the generated CRD."""
    doc = yaml.safe_load((CRDS / crd).read_text())
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]

    def walk(schema: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
        for name, prop in (schema.get("properties") or {}).items():
            here = f"{path}.{name}"
            yield here, " ".join(prop.get("description", "").split())
            if here in OPAQUE:
                continue
            if prop.get("type") == "array" and "properties" in prop.get("items", {}):
                yield from walk(prop["items"], f"{here}[]")
            else:
                yield from walk(prop, here)

    return dict(walk(spec, "spec"))


def test_the_page_is_current() -> None:
    assert OUTPUT.read_text() == render(), "run: python -m examples.rediscluster.api.reference"


@pytest.mark.parametrize(
    ("model", "crd"),
    [
        (RedisClusterSpec, "redis.pyctrl.dev_redisclusters.yaml"),
        (RedisBackupSpec, "redis.pyctrl.dev_redisbackups.yaml"),
    ],
)
def test_every_field_of_the_crd_is_documented_with_its_description(model: Any, crd: str) -> None:
    documented = {f.path: f.description for f in fields(model)}
    assert documented == _crd_fields(crd)


def test_every_field_has_an_example_and_no_example_is_stale() -> None:
    every = [*fields(RedisClusterSpec), *fields(RedisBackupSpec)]
    for f in every:
        assert f.example is not None, f.path
    assert set(EXAMPLES) <= {f.path for f in every}


def test_an_example_is_where_its_path_says() -> None:
    page = OUTPUT.read_text()
    assert "### RedisCluster `spec.users[].rules`" in page
    assert "  users:\n  - rules: ~* +@read" in page
