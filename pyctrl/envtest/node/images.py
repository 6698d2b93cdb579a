"""Images as local executables (the local node's stand-in for image pulling and ENTRYPOINT/CMD).

The node pulls nothing. An image is "present" when one of the node's ``--image-map`` rules
(``PATTERN=[NAME=VALUE ...] EXECUTABLE [ARG ...]``, shell words; fnmatch patterns matched against
the full image reference, first match wins) maps it to an ``ImageConfig``: the executable and
arguments that play the image's ENTRYPOINT, and the variables that play its ENV (the container's
own ``env`` overrides them, as with a real image). The default rules:

- ``*rediscluster-operator*`` → this checkout's operator: ``PATH=<venv bin>:<default PATH>
  PYTHONPATH=<repo root> <the node's python> -m examples.rediscluster`` — the Dockerfile's
  ``ENTRYPOINT ["python", "-m", "examples.rediscluster"]``; with ``PATH`` leading to the venv's
  ``python``, a ``command: [python, -m, examples.rediscluster.<module>]`` (a Job of the same image)
  runs the same code;
- ``*redis_exporter*`` (the RedisCluster's metrics sidecar, ``oliver006/redis_exporter:<tag>``) →
  the ``redis_exporter`` binary ``tools/redis_exporter/build.sh`` built into the cache, when it did
  (before the next rule, which its name would match);
- ``redis*`` → ``redis-server``.

A mapped image's own files are host paths here (its executable's installation and the absolute
directories its ENV names, e.g. this checkout for the operator image); a volume mounted over one
of their parents (an ``emptyDir`` at ``/tmp`` while the checkout lives under ``/tmp``) would hide
them, where in a real container the image's files sit apart from the volume. ``image_paths_under``
names those paths so the node binds them back, read-only, above the volumes.

Guarantees — the argv rule, in order:
1. ``command`` set: argv = command + args, as in Kubernetes (the ENTRYPOINT is replaced);
   ``command[0]`` must be an absolute path or an executable on PATH (``redis-server``, ``sh``);
2. no ``command`` and ``args[0]`` is an executable on PATH (and does not start with ``-``):
   argv = args — what official images' ``docker-entrypoint.sh`` does when its first argument is a
   program (``args: [redis-server, --port, "7000"]`` runs redis-server);
3. otherwise argv = the mapped ENTRYPOINT + args.
- An image no rule maps is reported as ``ImageNotMapped`` (the Pod waits; the node is unaffected).
- An executable that cannot be found is a ``StartError`` with the message a container runtime
  gives (``exec: "x": executable file not found in $PATH``).
- ``$(VAR)`` references in command and args are expanded by the caller before ``resolve_argv``.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyctrl.envtest.node.envvars import ContainerConfigError

__all__ = [
    "DEFAULT_IMAGE_MAP",
    "DEFAULT_PATH",
    "OPERATOR_IMAGE_RULE",
    "ImageConfig",
    "ImageMap",
    "ImageNotMapped",
    "StartError",
    "find_executable",
    "image_paths_under",
    "resolve_argv",
    "verify_run_as_non_root",
]

# PATH of a typical image, used when the container sets none.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_REPO_ROOT = Path(__file__).resolve().parents[3]  # the checkout holding pyctrl/ and examples/
OPERATOR_IMAGE_RULE = "*rediscluster-operator*=" + shlex.join(
    [
        f"PATH={Path(sys.executable).parent}:{DEFAULT_PATH}",
        f"PYTHONPATH={_REPO_ROOT}",
        sys.executable,
        "-m",
        "examples.rediscluster",
    ]
)


def _exporter_rules() -> tuple[str, ...]:
    """``*redis_exporter*`` → the redis_exporter that ``tools/redis_exporter/build.sh`` built in the
    cache (``$PYCTRL_CACHE_DIR``, default ``~/.cache/pyctrl``; the newest version there), when one is."""
    cache = Path(os.environ.get("PYCTRL_CACHE_DIR") or Path.home() / ".cache" / "pyctrl")
    built = sorted(p for p in cache.glob("redis_exporter/*/bin/redis_exporter") if os.access(p, os.X_OK))
    return (f"*redis_exporter*={shlex.quote(str(built[-1]))}",) if built else ()


DEFAULT_IMAGE_MAP = (OPERATOR_IMAGE_RULE, *_exporter_rules(), "redis*=redis-server")
_RULE_FORM = "PATTERN=[NAME=VALUE ...] EXECUTABLE [ARG ...]"
_ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class ImageNotMapped(Exception):
    """No ``--image-map`` rule covers the image (the node cannot pull images)."""


class StartError(Exception):
    """The executable to run does not exist (a container runtime's StartError, exit code 128)."""


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image's config the node plays: ENTRYPOINT and ENV."""

    entrypoint: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, words: str) -> ImageConfig:
        """``[NAME=VALUE ...] EXECUTABLE [ARG ...]`` (shell words, as ``env(1)`` takes them)."""
        parts = shlex.split(words)
        env = []
        while parts and _ENV_WORD.match(parts[0]):
            name, _, value = parts.pop(0).partition("=")
            env.append((name, value))
        if not parts:
            raise ValueError(f"{words!r} names no executable")
        return cls(tuple(parts), tuple(env))


@dataclass(frozen=True)
class ImageMap:
    """Ordered ``(pattern, image config)`` rules, kept with the specs they came from."""

    rules: tuple[tuple[str, ImageConfig], ...]
    specs: tuple[str, ...] = ()

    @classmethod
    def parse(cls, specs: Sequence[str]) -> ImageMap:
        rules = []
        for spec in specs:
            pattern, sep, words = spec.partition("=")
            try:
                if not sep or not pattern:
                    raise ValueError("no pattern")
                rules.append((pattern, ImageConfig.parse(words)))
            except ValueError as exc:
                raise ValueError(f"image map entry {spec!r} is not {_RULE_FORM} ({exc})") from None
        return cls(tuple(rules), tuple(specs))

    def config_for(self, image: str) -> ImageConfig:
        for pattern, config in self.rules:
            if fnmatch.fnmatchcase(image, pattern):
                return config
        known = ", ".join(self.specs) or "none"
        raise ImageNotMapped(
            f"image {image!r} has no local executable (the local node does not pull images); "
            f"map it with --image-map {_RULE_FORM} (current rules: {known})"
        )


def image_paths_under(image: ImageConfig, executable: str, mount_targets: Sequence[str]) -> list[str]:
    """The image's host directories that a volume at one of ``mount_targets`` would hide.

    The image's files: the installation holding ``executable`` (the parent of its ``bin``
    directory, before and after resolving symlinks) and every absolute directory named in the
    image's ENV values (``PATH``, ``PYTHONPATH``). Returned outermost first; paths that no mount
    target covers are left out.
    """
    # both the installation the path names (a venv: its pyvenv.cfg sits beside bin/) and the one
    # its symlinks lead to (the interpreter the venv was made from)
    candidates = {os.path.dirname(os.path.dirname(p)) for p in (executable, os.path.realpath(executable))}
    candidates |= {p for _, value in image.env for p in value.split(os.pathsep) if os.path.isabs(p)}
    targets = [os.path.normpath(t) for t in mount_targets]
    hidden = {
        os.path.normpath(p)
        for p in candidates
        if os.path.isdir(p) and any(p == t or p.startswith(t.rstrip("/") + "/") for t in targets)
    }
    return sorted(hidden, key=lambda p: (p.count("/"), p))


def find_executable(name: str, env: Mapping[str, str]) -> str | None:
    """``name`` as an absolute path: looked up on the container's PATH unless it contains a /."""
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH") or DEFAULT_PATH)


def resolve_argv(
    image: ImageConfig, container: Mapping[str, Any], env: Mapping[str, str]
) -> tuple[str, list[str]]:
    """``(executable path, argv)`` for ``container`` of ``image`` (command/args already expanded;
    ``env`` already holds the image's ENV under the container's own variables)."""
    command = [str(c) for c in (container.get("command") or [])]
    args = [str(a) for a in (container.get("args") or [])]
    if command:
        argv = command + args
    elif args and not args[0].startswith("-") and find_executable(args[0], env):
        argv = args
    else:
        argv = [*image.entrypoint, *args]
    path = find_executable(argv[0], env)
    if path is None:
        raise StartError(f'exec: "{argv[0]}": executable file not found in $PATH')
    return path, argv


def verify_run_as_non_root(security: Mapping[str, Any], pod: str, container: str) -> None:
    """The kubelet's ``verifyRunAsNonRoot`` on the container's effective securityContext (its own
    over the Pod's): with ``runAsNonRoot`` a ``runAsUser`` of 0 is refused, and so is none at all —
    an image rule names no USER, and a container of the local node runs as root unless told
    otherwise. Raises ``ContainerConfigError`` (``CreateContainerConfigError``, retried)."""
    if not security.get("runAsNonRoot"):
        return
    uid = security.get("runAsUser")
    if uid is None:
        raise ContainerConfigError(
            f'container has runAsNonRoot and image will run as root (pod: "{pod}", container: {container}):'
            " the local node knows no image's USER, set runAsUser"
        )
    if int(uid) == 0:
        raise ContainerConfigError(
            f'container\'s runAsUser breaks non-root policy (pod: "{pod}", container: {container})'
        )
