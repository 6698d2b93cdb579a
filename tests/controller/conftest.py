"""Fixtures of the controller tests: the Widget CRD installed once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyctrl.envtest import Environment

WIDGETS_CRD = Path(__file__).parents[1] / "envtest" / "testdata" / "widgets.yaml"


@pytest.fixture(scope="session")
def widget_crd(envtest: Environment) -> str:
    """Install the Widget CRD (server-side apply: safe if another test package installed it)."""
    return envtest.install_crds([WIDGETS_CRD])[0]
