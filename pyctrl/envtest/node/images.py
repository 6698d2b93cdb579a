"""Images as local executables (the local node's stand-in for image pulling and ENTRYPOINT/CMD).

The node pulls nothing. An image is "present" when one of the node's ``--image-map`` rules
(``PATTERN=EXECUTABLE``, fnmatch patterns matched against the full image reference, first match
wins; default ``redis*=redis-server``) maps it to an executable, which plays the image's
ENTRYPOINT.

Guarantees — the argv rule, in order:
1. ``command`` set: argv = command + args, as in Kubernetes (the ENTRYPOINT is replaced);
   ``command[0]`` must be an absolute path or an executable on PATH (``redis-server``, ``sh``);
2. no ``command`` and ``args[0]`` is an executable on PATH (and does not start with ``-``):
   argv = args — what official images' ``docker-entrypoint.sh`` does when its first argument is a
   program (``args: [redis-server, --port, "7000"]`` runs redis-server);
3. otherwise argv = [mapped executable] + args.
- An image no rule maps is reported as ``ImageNotMapped`` (the Pod waits; the node is unaffected).
- An executable that cannot be found is a ``StartError`` with the message a container runtime
  gives (``exec: "x": executable file not found in $PATH``).
- ``$(VAR)`` references in command and args are expanded by the caller before ``resolve_argv``.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_IMAGE_MAP",
    "DEFAULT_PATH",
    "ImageMap",
    "ImageNotMapped",
    "StartError",
    "find_executable",
    "resolve_argv",
]

DEFAULT_IMAGE_MAP = ("redis*=redis-server",)
# PATH of a typical image, used when the container sets none.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ImageNotMapped(Exception):
    """No ``--image-map`` rule covers the image (the node cannot pull images)."""


class StartError(Exception):
    """The executable to run does not exist (a container runtime's StartError, exit code 128)."""


@dataclass(frozen=True)
class ImageMap:
    """Ordered ``(pattern, executable)`` rules."""

    rules: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, specs: Sequence[str]) -> ImageMap:
        rules = []
        for spec in specs:
            pattern, sep, executable = spec.partition("=")
            if not sep or not pattern or not executable:
                raise ValueError(f"image map entry {spec!r} is not PATTERN=EXECUTABLE")
            rules.append((pattern, executable))
        return cls(tuple(rules))

    def executable_for(self, image: str) -> str:
        for pattern, executable in self.rules:
            if fnmatch.fnmatchcase(image, pattern):
                return executable
        known = ", ".join(f"{p}={e}" for p, e in self.rules) or "none"
        raise ImageNotMapped(
            f"image {image!r} has no local executable (the local node does not pull images); "
            f"map it with --image-map PATTERN=EXECUTABLE (current rules: {known})"
        )


def find_executable(name: str, env: Mapping[str, str]) -> str | None:
    """``name`` as an absolute path: looked up on the container's PATH unless it contains a /."""
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH") or DEFAULT_PATH)


def resolve_argv(
    image_map: ImageMap, container: Mapping[str, Any], env: Mapping[str, str]
) -> tuple[str, list[str]]:
    """``(executable path, argv)`` for ``container`` (command/args already expanded)."""
    mapped = image_map.executable_for(str(container.get("image", "")))
    command = [str(c) for c in (container.get("command") or [])]
    args = [str(a) for a in (container.get("args") or [])]
    if command:
        argv = command + args
    elif args and not args[0].startswith("-") and find_executable(args[0], env):
        argv = args
    else:
        argv = [mapped, *args]
    path = find_executable(argv[0], env)
    if path is None:
        raise StartError(f'exec: "{argv[0]}": executable file not found in $PATH')
    return path, argv
