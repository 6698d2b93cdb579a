"""Helpers for control-plane tests: kubectl and raw HTTPS as a kubeconfig's user (no pyctrl client)."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from pyctrl.envtest import Environment


def kubectl(envtest: Environment, kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    """Run kubectl; fail the test with its stderr when it exits non-zero."""
    proc = kubectl_run(envtest, kubeconfig, *args, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def kubectl_run(
    envtest: Environment, kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    assert envtest.bin_dir is not None
    return subprocess.run(
        [str(envtest.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def request_as(kubeconfig: Path, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One HTTPS request with the credentials of ``kubeconfig``; returns (status, decoded body)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
    ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(cluster["server"] + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
