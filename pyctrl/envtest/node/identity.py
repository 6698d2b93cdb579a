"""Who a container's processes run as: the Pod's and the container's ``securityContext``
(``runAsUser``, ``runAsGroup``, ``fsGroup``, ``supplementalGroups``), resolved as containerd does.

Guarantees (``credentials_for``):
- the container's ``securityContext`` overrides the Pod's for ``runAsUser``/``runAsGroup``;
  ``fsGroup`` and ``supplementalGroups`` are the Pod's;
- ``runAsUser`` without ``runAsGroup``: the primary group of that uid in the "image's"
  ``/etc/passwd`` (the local node's image is the host's filesystem), else 0, as containerd;
- supplementary groups, in order and without repeats: the primary gid, the groups ``/etc/group``
  gives that user (``supplementalGroupsPolicy: Merge``, the default; ``Strict`` leaves them out),
  ``supplementalGroups``, then ``fsGroup`` (the kubelet adds it so the process can use its volumes);
- nothing set at all: ``None`` (the container runs as root, the local node's "image user").

The sandbox (``sandbox.py``) applies them just before ``execve``: ``setgroups``, ``setgid``,
``setuid``, in that order, after every mount is made. A non-zero uid has no capabilities after
``setuid`` (the kernel clears them), so such a container holds none, whatever it asked for.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Credentials", "credentials_for", "home_for"]


@dataclass(frozen=True)
class Credentials:
    """The ids a container's processes get (``None``: unchanged, root's)."""

    uid: int | None
    gid: int | None
    groups: tuple[int, ...]

    def setpriv_args(self) -> list[str]:
        """setpriv(1) options giving a process these ids (``kubectl exec``, exec probes)."""
        args = [f"--groups={','.join(map(str, self.groups))}" if self.groups else "--clear-groups"]
        if self.gid is not None:
            args.append(f"--regid={self.gid}")
        if self.uid is not None:
            args.append(f"--reuid={self.uid}")
        return args


def _int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"securityContext.{what} must be a non-negative integer, got {value!r}")
    return value


def credentials_for(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> Credentials | None:
    """The ids of ``container``'s processes (see the module docstring)."""
    pod_sc = pod_spec.get("securityContext") or {}
    own = container.get("securityContext") or {}
    uid = _int(own.get("runAsUser", pod_sc.get("runAsUser")), "runAsUser")
    gid = _int(own.get("runAsGroup", pod_sc.get("runAsGroup")), "runAsGroup")
    fs_group = _int(pod_sc.get("fsGroup"), "fsGroup")
    supplemental = [_int(g, "supplementalGroups") for g in pod_sc.get("supplementalGroups") or []]
    if uid is None and gid is None and fs_group is None and not supplemental:
        return None
    try:
        entry: pwd.struct_passwd | None = pwd.getpwuid(uid) if uid is not None else None
    except KeyError:
        entry = None
    if uid is not None and gid is None:
        gid = entry.pw_gid if entry is not None else 0
    groups: list[int] = [] if gid is None else [gid]
    if entry is not None and gid is not None and pod_sc.get("supplementalGroupsPolicy") != "Strict":
        groups += os.getgrouplist(entry.pw_name, gid)  # gid and the groups listing the user
    groups += [g for g in supplemental if g is not None]
    if fs_group is not None:
        groups.append(fs_group)
    return Credentials(uid, gid, tuple(dict.fromkeys(groups)))


def home_for(uid: int | None) -> str:
    """``HOME`` for a container running as ``uid``: its passwd home, ``/`` for an unknown uid,
    ``/root`` for root (as the kubelet sets it from the image's passwd)."""
    if uid is None or uid == 0:
        return "/root"
    try:
        return pwd.getpwuid(uid).pw_dir or "/"
    except KeyError:
        return "/"
