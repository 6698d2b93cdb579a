"""One scaffolded project shared by the scaffold tests (scaffolding it once keeps ``make test``
short): ``pyctrl init``, ``create api`` of ``Memcached`` v1 (with its controller),
``create webhook --defaulting --validation`` for v1, ``create api`` of v2 and
``create webhook --conversion`` making v1 the hub, ``create api`` of a cluster-scoped ``CachePolicy``
with the scale subresource in a second group, then ``pyctrl generate`` with the real helm."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAME = "memcached-operator"
PACKAGE = "memcached_operator"
GROUP = "cache.example.com"

#: The commands that make the shared project, in order.
COMMANDS = [
    ["init", "--domain", "example.com", "--project", NAME],
    ["create", "api", "--group", "cache", "--version", "v1", "--kind", "Memcached"],
    [
        "create",
        "webhook",
        "--group",
        "cache",
        "--version",
        "v1",
        "--kind",
        "Memcached",
        "--defaulting",
        "--validation",
    ],
    ["create", "api", "--group", "cache", "--version", "v2", "--kind", "Memcached"],
    ["create", "webhook", "--group", "cache", "--version", "v1", "--kind", "Memcached", "--conversion"],
    # the templates' other branches: a second group, a cluster-scoped kind, the scale subresource
    [
        "create",
        "api",
        "--group",
        "ops",
        "--version",
        "v1alpha1",
        "--kind",
        "CachePolicy",
        "--cluster-scoped",
        "--scale",
    ],
]


def helm_binary() -> str:
    """The real helm built by ``tools/helm/build.sh`` (a no-op when built)."""
    out = subprocess.run(
        [str(ROOT / "tools" / "helm" / "build.sh"), "--print-bin-dir", "--quiet"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return str(Path(out.stdout.strip()) / "helm")


def project_env(project: Path) -> dict[str, str]:
    """The generated project importable with this checkout's pyctrl, offline (no install):
    the project and this checkout on ``PYTHONPATH``, this checkout on ``MYPYPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(project), str(ROOT)])
    env["MYPYPATH"] = str(ROOT)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def pyctrl(directory: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m pyctrl -C directory ARGS`` with this checkout's interpreter."""
    result = subprocess.run(
        [sys.executable, "-m", "pyctrl", "-C", str(directory), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=project_env(directory),
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"pyctrl {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


@dataclass(frozen=True)
class Scaffolded:
    root: Path
    helm: str


@pytest.fixture(scope="session")
def helm() -> str:
    return helm_binary()


@pytest.fixture(scope="session")
def scaffolded(tmp_path_factory: pytest.TempPathFactory, helm: str) -> Scaffolded:
    root = tmp_path_factory.mktemp("scaffold") / NAME
    for command in COMMANDS:
        pyctrl(root, *command)
    pyctrl(root, "generate", "--helm", helm)
    return Scaffolded(root, helm)
