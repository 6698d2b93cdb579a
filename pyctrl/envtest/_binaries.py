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

__all__ = ["BINARIES", "BinariesError", "bin_dir", "built_bin_dir"]

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


class BinariesError(RuntimeError):
    """The control-plane binaries are missing and cannot be built."""


def built_bin_dir(tool: str, error: type[RuntimeError], missing: str) -> Path:
    """The bin directory ``tools/<tool>/build.sh`` of the source checkout prints, building what it
    lacks first (idempotent, cached under ``$PYCTRL_CACHE_DIR``; progress goes to our stderr as it
    happens). Raises ``error`` with ``missing`` when there is no checkout, or when the build fails.
    """
    scripts = (parent / "tools" / tool / "build.sh" for parent in Path(__file__).resolve().parents)
    script = next((candidate for candidate in scripts if candidate.is_file()), None)
    if script is None:
        raise error(missing)
    if shutil.which("bash") is None:
        raise error(f"bash is needed to run {script}")
    args = ["bash", str(script), "--print-bin-dir", "--quiet"]
    proc = subprocess.run(args, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise error(f"building {tool} ({script}) failed (exit {proc.returncode}); see the messages above")
    return Path(proc.stdout.strip().splitlines()[-1])


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
    missing = (
        "no control-plane binaries: set KUBEBUILDER_ASSETS to a directory with "
        f"{', '.join(BINARIES)}, or run from a pyctrl checkout (tools/controlplane/build.sh)"
    )
    return _check(built_bin_dir("controlplane", BinariesError, missing), "tools/controlplane/build.sh")
