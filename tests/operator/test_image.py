"""The operator image's content, checked without a Docker engine (none runs on this machine kind).

The Dockerfile is read, not trusted: its build stage's COPY lines are replayed into a scratch
directory and the package is built from there (so a file missing from the build context fails),
the wheel and the distributions of its declared dependencies (with the extra named in the
``pip install`` line) are copied into one directory, and its ENTRYPOINT is run from the final
stage's COPY lines with ``python -S`` (no site-packages): an import that the declared
dependencies do not cover fails here as it would in the image. That process then runs the
operator on the real control plane, as the least-privileged user, until a RedisCluster is ready.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pyctrl.testing import eventually
from tests.operator.conftest import Cluster

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.controlplane


@dataclass
class Stage:
    base: str
    workdir: str = "/"
    copies: list[tuple[list[str], str]] = field(default_factory=list)  # sources, destination
    runs: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)


def parse_dockerfile(text: str) -> list[Stage]:
    """The instructions this test replays; anything else it meets is refused, not skipped."""
    stages: list[Stage] = []
    logical = re.sub(r"\\\n", " ", text)
    for raw in logical.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        match op.upper():
            case "FROM":
                stages.append(Stage(rest.split()[0]))
            case "WORKDIR":
                stages[-1].workdir = rest.strip()
            case "COPY" if rest.startswith("--from="):
                continue  # the build stage's output: replaced by the wheel + dependencies below
            case "COPY":
                *sources, dest = shlex.split(rest)
                stages[-1].copies.append((sources, dest))
            case "RUN":
                stages[-1].runs.append(rest)
            case "ENTRYPOINT":
                stages[-1].entrypoint = json.loads(rest)
            case "USER" | "ENV" | "EXPOSE" | "LABEL" | "ARG":
                continue
            case _:
                raise AssertionError(f"the Dockerfile uses {op}, which this check does not replay")
    return stages


def replay_copies(stage: Stage, root: Path) -> Path:
    """Copy the stage's COPY sources (relative to the repo) under ``root``; returns its WORKDIR."""
    workdir = root / stage.workdir.lstrip("/")
    workdir.mkdir(parents=True, exist_ok=True)
    for sources, dest in stage.copies:
        target = workdir / dest
        for source in sources:
            src = ROOT / source
            assert src.exists(), f"COPY {source}: not in the build context"
            if src.is_dir():
                shutil.copytree(src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            elif dest.endswith("/") or len(sources) > 1:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / src.name)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)
    return workdir


def dependency_closure(requirements: list[str], extras: set[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions ``requirements`` need, transitively (markers evaluated)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(Requirement(r), extras) for r in requirements]
    while todo:
        req, wanted = todo.pop()
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (wanted or {""})):
            continue
        name = canonicalize_name(req.name)
        if name in found:
            continue
        dist = metadata.distribution(req.name)
        assert dist.version in req.specifier or not req.specifier, f"{req} but {dist.version} is installed"
        found[name] = dist
        todo.extend((Requirement(r), set(req.extras)) for r in dist.requires or [])
    return found


def copy_distribution(dist: metadata.Distribution, target: Path) -> None:
    for file in dist.files or []:
        if file.parts[0] == ".." or "__pycache__" in file.parts:
            continue  # console scripts and byte code
        src = Path(str(dist.locate_file(file)))
        if src.is_file():
            (target / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / file)


@dataclass
class Image:
    app: Path  # the final stage's WORKDIR
    site: Path  # what pip would have put in /usr/local: the wheel and its dependencies
    entrypoint: list[str]

    def run(self, *args: str, stdout: int | IO[str], stderr: int | IO[str]) -> subprocess.Popen[str]:
        # -S: no site-packages, so only what the image would hold is importable (PYTHONPATH)
        program, *rest = self.entrypoint
        argv = [sys.executable if program == "python" else program, "-S", *rest, *args]
        env = {"PYTHONPATH": str(self.site), "PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"}
        return subprocess.Popen(argv, cwd=self.app, env=env, text=True, stdout=stdout, stderr=stderr)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    build, final = parse_dockerfile((ROOT / "Dockerfile").read_text())
    root = tmp_path_factory.mktemp("image")
    context = replay_copies(build, root / "build")
    (install,) = [r for r in build.runs if "pip install" in r]
    installed = re.search(r'"\.(?:\[([\w,-]+)\])?"', install)
    assert installed is not None, f"cannot find what RUN {install} installs"
    extras = set((installed.group(1) or "").split(",")) - {""}
    wheels = root / "wheels"
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels)]
    built = subprocess.run([*argv, str(context)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, (
        f"the package does not build from the image's build context:\n{built.stderr}"
    )
    (wheel,) = wheels.glob("pyctrl-*.whl")
    site = root / "site-packages"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        (meta_name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [
            line.split(":", 1)[1].strip()
            for line in zf.read(meta_name).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    for dist in dependency_closure(requires, extras).values():
        copy_distribution(dist, site)
    return Image(replay_copies(final, root / "final"), site, final.entrypoint)


def test_the_markers_of_the_dependency_walk_are_evaluated() -> None:
    # the closure must follow extras only where asked: a guard for the check itself
    assert Marker('extra == "redis"').evaluate({"extra": "redis"})
    closure = dependency_closure(['redis>=5; extra == "redis"'], set())
    assert closure == {}
    assert "redis" in dependency_closure(['redis>=5; extra == "redis"'], {"redis"})


def test_the_image_content_shows_the_operator_usage(image: Image) -> None:
    proc = image.run("--help", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "--leader-elect" in out


@pytest.fixture
def image_operator(
    image: Image, operator_kubeconfig: Path, namespace: str, tmp_path: Path
) -> Iterator[subprocess.Popen[str]]:
    """Start the operator from the image content; SIGTERM (then SIGKILL) it after the test."""
    log = (tmp_path / "operator.log").open("w")
    proc = image.run(
        f"--kubeconfig={operator_kubeconfig}",
        f"--namespace={namespace}",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        code: int | None
        try:
            code = proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            code = None
        log.close()
        print((tmp_path / "operator.log").read_text()[-3000:])
        assert code == 0, "the operator did not stop cleanly on SIGTERM"


async def test_the_image_content_runs_the_operator_until_a_cluster_is_ready(
    image_operator: subprocess.Popen[str], cluster_factory: Callable[[str], Cluster]
) -> None:
    cluster = cluster_factory("from-image")
    cluster.create(replicas=2)

    async def ready() -> bool:
        assert image_operator.poll() is None, "the operator exited (its log is printed below)"
        return await cluster.ready(2)

    await eventually(ready, within=120, what="the RedisCluster to be Running with 2 ready")
    roles = await cluster.roles()
    assert sorted(roles.values()) == ["master", "slave"]
