"""The operator's OCI image as ``make image`` built it (buildah, no daemon; ``make image-test``).

Not part of ``make test``: ``make image-test`` runs ``make image`` first, which takes minutes (a
Debian base from mmdebstrap, then the Dockerfile with its RUN lines reaching PyPI). Checks: the
archive is an OCI layout, the image runs as the non-root user with the Dockerfile's entrypoint,
labels and PATH, its size, and the entrypoint's ``--help`` run from the image's own filesystem
(chroot into it as that user).
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CACHE = Path(os.environ.get("PYCTRL_CACHE_DIR", Path.home() / ".cache" / "pyctrl")) / "image"
VERSION = "0.1.0"
IMAGE = f"localhost/pyctrl/rediscluster-operator:{VERSION}"
ARCHIVE = CACHE / f"rediscluster-operator-{VERSION}.oci.tar"
BUILDAH = [
    "buildah",
    "--storage-driver",
    "vfs",
    "--root",
    str(CACHE / "storage"),
    "--runroot",
    str(CACHE / "run"),
]


def buildah(*args: str) -> str:
    result = subprocess.run([*BUILDAH, *args], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"buildah {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    assert ARCHIVE.exists(), f"{ARCHIVE} is missing: `make image-test` builds it first (make image)"
    return dict(json.loads(buildah("inspect", "--type", "image", IMAGE))["OCIv1"]["config"])


@pytest.fixture(scope="module")
def rootfs(config: dict[str, Any]) -> Iterator[Path]:
    container = buildah("from", "--pull=never", IMAGE)
    try:
        yield Path(buildah("mount", container))
    finally:
        buildah("umount", container)
        buildah("rm", container)


def test_the_archive_is_an_oci_image_layout(config: dict[str, Any]) -> None:
    with tarfile.open(ARCHIVE) as tar:
        names = set(tar.getnames())
    assert {"oci-layout", "index.json"} <= names
    print(f"\nOCI archive {ARCHIVE}: {ARCHIVE.stat().st_size / 2**20:.0f} MiB")
    assert ARCHIVE.stat().st_size < 600 * 2**20


def test_the_image_runs_the_entrypoint_as_the_non_root_user_with_its_labels(config: dict[str, Any]) -> None:
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["python", "-m", "examples.rediscluster"]
    assert config["WorkingDir"] == "/app"
    assert config["Labels"]["org.opencontainers.image.title"] == "rediscluster-operator"
    assert config["Labels"]["org.opencontainers.image.version"] == VERSION
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PATH"].startswith("/opt/venv/bin:")
    assert "PIP_CERT" not in env  # the build stage's proxy CA stays out of the image
    assert set(config["ExposedPorts"]) == {"8080/tcp", "8081/tcp"}


def test_the_entrypoint_help_runs_from_the_images_own_filesystem(
    config: dict[str, Any], rootfs: Path
) -> None:
    # What a container runtime adds: HOME from /etc/passwd, "/" for a user without an entry (65532).
    env = [*config["Env"], "HOME=/"]
    user = config["User"]
    script = f'cd {config["WorkingDir"]} && exec "$@"'
    argv = ["chroot", f"--userspec={user}", str(rootfs), "/usr/bin/env", "-i", *env, "/bin/sh", "-c", script]
    result = subprocess.run(
        [*argv, "sh", *config["Entrypoint"], "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "The RedisCluster operator." in result.stdout
    assert "--leader-elect" in result.stdout
    # Nothing of the host: the interpreter is the image's own (Debian's python3 under /opt/venv).
    assert (rootfs / "opt" / "venv" / "pyvenv.cfg").exists()
    assert not (rootfs / "work").exists()
