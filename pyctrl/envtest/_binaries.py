"""Where envtest finds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl.

Mirrors controller-runtime envtest's ``KUBEBUILDER_ASSETS`` lookup. In order:

1. ``KUBEBUILDER_ASSETS`` (or ``PYCTRL_CONTROLPLANE_BIN_DIR``): a directory holding all five;
2. a pyctrl source checkout: ``tools/controlplane/build.sh`` builds them from the Kubernetes Go
   modules into ``~/.cache/pyctrl/controlplane/<version>/bin`` when missing, and prints where.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["BINARIES", "BinariesError", "bin_dir"]

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


class BinariesError(RuntimeError):
    """The control-plane binaries are missing and cannot be built."""


def _build_script() -> Path | None:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "tools" / "controlplane" / "build.sh"
        if candidate.is_file():
            return candidate
    return None


def _check(directory: Path, origin: str) -> Path:
    missing = [b for b in BINARIES if not os.access(directory / b, os.X_OK)]
    if missing:
        raise BinariesError(f"{origin} ({directory}) lacks {', '.join(missing)}")
    return directory


def bin_dir() -> Path:
    """The directory holding the five binaries, building them first when they are missing."""
    for var in ("KUBEBUILDER_ASSETS", "PYCTRL_CONTROLPLANE_BIN_DIR"):
        if os.environ.get(var):
            return _check(Path(os.environ[var]), f"${var}")
    script = _build_script()
    if script is None:
        raise BinariesError(
            "no control-plane binaries: set KUBEBUILDER_ASSETS to a directory with "
            f"{', '.join(BINARIES)}, or run from a pyctrl checkout (tools/controlplane/build.sh)"
        )
    if shutil.which("bash") is None:
        raise BinariesError("bash is needed to run tools/controlplane/build.sh")
    args = ["bash", str(script), "--print-bin-dir", "--quiet"]
    # Progress goes to our stderr as it happens; stdout carries the directory.
    proc = subprocess.run(args, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise BinariesError(
            f"building the control plane failed (exit {proc.returncode}); see the messages above"
        )
    return _check(Path(proc.stdout.strip().splitlines()[-1]), str(script))
