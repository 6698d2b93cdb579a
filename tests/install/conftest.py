"""The real helm, promtool and kubectl for the install tests (built by the project's scripts when
missing, like the control plane), and ``render``: ``helm template`` parsed into objects."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyctrl.envtest._binaries import bin_dir

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rediscluster-operator"

Render = Callable[..., list[dict[str, Any]]]


def built(tool: str) -> str:
    """``tools/<tool>/build.sh`` (a no-op when built) and the binary's path."""
    out = subprocess.run(
        [str(ROOT / "tools" / tool / "build.sh"), "--print-bin-dir", "--quiet"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return str(Path(out.stdout.strip()) / tool)


@pytest.fixture(scope="session")
def helm() -> str:
    return built("helm")


@pytest.fixture(scope="session")
def promtool() -> str:
    return built("promtool")


@pytest.fixture(scope="session")
def monitoring_crds() -> Path:
    """The Prometheus Operator's ServiceMonitor, PodMonitor and PrometheusRule CRDs (fetched when missing)."""
    out = subprocess.run(
        [str(ROOT / "tools" / "prometheus-operator" / "fetch-crds.sh"), "--print-bin-dir", "--quiet"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return Path(out.stdout.strip())


@pytest.fixture(scope="session")
def kubectl() -> str:
    return str(bin_dir() / "kubectl")


def run(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


@pytest.fixture(scope="session")
def render(helm: str) -> Render:
    def render(*values: str, namespace: str = "ops", release: str = "rco") -> list[dict[str, Any]]:
        args = [helm, "template", release, str(CHART), "--namespace", namespace]
        for value in values:
            args += ["--set", value]
        return [d for d in yaml.safe_load_all(run(*args).stdout) if d]

    return render


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(matches) == 1, f"{kind} {name or ''}: {[o['metadata']['name'] for o in matches]}"
    return matches[0]


def kinds(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objects)
