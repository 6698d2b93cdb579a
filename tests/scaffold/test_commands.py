"""The commands' refusals: a repeated command and bad names are refused with the rule they break,
and nothing is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyctrl.scaffold import ScaffoldError, create_api, create_webhook, init_project

from .conftest import pyctrl


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "demo-operator"
    init_project(root, domain="example.com", project_name="demo-operator")
    create_api(root, group="cache", version="v1alpha1", kind="Memcached")
    return root


def test_create_api_twice_is_refused_and_writes_nothing(project: Path) -> None:
    before = _tree(project)
    result = pyctrl(
        project,
        "create",
        "api",
        "--group",
        "cache",
        "--version",
        "v1alpha1",
        "--kind",
        "Memcached",
        check=False,
    )
    assert result.returncode == 2
    assert "the API cache.example.com/v1alpha1 Memcached already exists" in result.stderr
    assert _tree(project) == before


@pytest.mark.parametrize(
    ("flags", "rule"),
    [
        (["--kind", "memcached", "--group", "cache"], "--kind 'memcached': a kind must be UpperCamelCase"),
        (["--kind", "Memcached", "--group", "Foo_Bar"], "--group 'Foo_Bar': must be a DNS-1123 label"),
        (["--kind", "Memcached", "--group", "cache", "--version", "1"], "must be a Kubernetes API version"),
    ],
)
def test_bad_names_are_refused_with_the_rule(project: Path, flags: list[str], rule: str) -> None:
    before = _tree(project)
    args = (
        ["create", "api", "--version", "v1", *flags]
        if "--version" not in flags
        else ["create", "api", *flags]
    )
    result = pyctrl(project, *args, check=False)
    assert result.returncode == 2
    assert rule in result.stderr
    assert _tree(project) == before


def test_init_twice_and_webhooks_of_unknown_apis_are_refused(project: Path) -> None:
    with pytest.raises(ScaffoldError, match="already a pyctrl project"):
        init_project(project, domain="example.com")
    with pytest.raises(ScaffoldError, match="run `pyctrl create api --group cache --version v2"):
        create_webhook(project, group="cache", version="v2", kind="Memcached", validation=True)
    with pytest.raises(ScaffoldError, match="at least one of --defaulting, --validation, --conversion"):
        create_webhook(project, group="cache", version="v1alpha1", kind="Memcached")
    with pytest.raises(ScaffoldError, match="has only the version v1alpha1: create another one first"):
        create_webhook(project, group="cache", version="v1alpha1", kind="Memcached", conversion=True)
    create_webhook(project, group="cache", version="v1alpha1", kind="Memcached", validation=True)
    with pytest.raises(ScaffoldError, match="already has the --validation webhook"):
        create_webhook(project, group="cache", version="v1alpha1", kind="Memcached", validation=True)


def test_a_second_controller_for_a_kind_is_refused(project: Path) -> None:
    with pytest.raises(ScaffoldError, match="already has a controller"):
        create_api(project, group="cache", version="v1", kind="Memcached", controller=True)
    create_api(project, group="cache", version="v1", kind="Memcached")  # types only, by default
    assert not (project / "demo_operator" / "controllers" / "memcached_v1.py").exists()
    with pytest.raises(
        ScaffoldError, match="the hub must be the storage version: Memcached is stored as v1alpha1"
    ):
        create_webhook(project, group="cache", version="v1", kind="Memcached", conversion=True)


def test_a_file_in_the_way_is_never_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "other"
    root.mkdir()
    (root / "Makefile").write_text("mine\n")
    with pytest.raises(ScaffoldError, match="Makefile already exists"):
        init_project(root, domain="example.com")
    assert _tree(root) == {"Makefile": b"mine\n"}


def test_scaffolded_python_passes_ruff_whatever_the_versions_and_kinds(tmp_path: Path) -> None:
    """Imports come out in ruff's isort order (``v2`` before ``v10``, ``v1`` before ``v1alpha1``,
    kinds ``Aa`` and ``AB`` in one version) and webhook modules with one webhook are formatted as
    ruff format writes them. (The shared project's test also runs ``mypy --strict``.)"""
    root = tmp_path / "edge"
    init_project(root, domain="example.com")
    for version, kind in [("v2", "Memcached"), ("v10", "Memcached"), ("v1alpha1", "Memcached")]:
        create_api(root, group="cache", version=version, kind=kind)
    create_api(root, group="cache", version="v2", kind="Aa")
    create_api(root, group="ops", version="v2", kind="AB", namespaced=False, scale=True)
    create_webhook(root, group="cache", version="v2", kind="Memcached", validation=True)
    create_webhook(root, group="cache", version="v10", kind="Memcached", defaulting=True)
    create_webhook(root, group="cache", version="v2", kind="Memcached", conversion=True)
    for check in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *check, "--no-cache", "."],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
    wiring = (root / "edge" / "_wiring.py").read_text()
    assert "from edge.api import v1alpha1, v2, v10\n" in wiring
    assert "from edge.webhooks import memcached_v2, memcached_v10\n" in wiring
