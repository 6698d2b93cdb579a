"""Kubeconfig files written by envtest (one per identity)."""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["write_kubeconfig"]


def write_kubeconfig(path: Path, *, server: str, ca: Path, cert: Path, key: Path, user: str) -> Path:
    """Write a kubeconfig for ``user`` authenticating with a client certificate; return ``path``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": user + "@envtest", "context": {"cluster": "envtest", "user": user}}],
        "current-context": user + "@envtest",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)
    return path
