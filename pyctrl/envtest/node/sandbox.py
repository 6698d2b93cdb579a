"""Container sandbox: a private mount namespace whose root shows the host plus the Pod's volumes.

Run as ``python -I sandbox.py SPEC.json`` by the node (``runtime.py``), in the process that then
becomes the container (same pid, by ``execve``). Standard library only, so it starts fast and
imports nothing from pyctrl.

What it does, in order (the equivalent of ``unshare --mount --uts --propagation private`` followed
by bind mounts and a chroot):
1. ``PR_SET_PDEATHSIG=SIGKILL``, then exits if the node already died (closes the fork race);
2. a new mount and UTS namespace; every mount becomes private, so nothing here reaches the host;
   the hostname becomes the Pod's hostname;
3. a tmpfs "view" root: each host directory is bind-mounted (recursively) into it, except the
   directories on the way to a ``mountPath``, which are recreated in the tmpfs with their entries
   bind-mounted one by one; so a mountPath that does not exist on the host (``/data``) is created
   in the view only and the host's filesystem is never written;
   for a container with a non-zero ``runAsUser``, the directories above its executable are
   recreated that way too, with execute permission for all (the local node's "image" is the
   host, whose interpreter may sit under a private ``/root``); the host's modes never change;
4. each volume bind-mounted at its mountPath (read-only when asked), parents before children;
5. with ``read_only_root`` (``readOnlyRootFilesystem``): every host directory's bind in the view
   and the view's tmpfs are remounted read-only (the volumes keep their own mode; mounts nested
   under a host directory on the host keep theirs);
6. ``chroot`` into the view, ``chdir`` to workingDir (created in the view when missing);
7. with ``user`` (``runAsUser``/``runAsGroup``/``fsGroup``/``supplementalGroups``, resolved by
   ``identity.py``): ``setgroups``, ``setgid``, ``setuid`` (a non-zero uid loses every
   capability here), then ``PR_SET_NO_NEW_PRIVS`` with ``no_new_privs``
   (``allowPrivilegeEscalation: false``) and ``execve`` the container's executable with its argv
   and environment.

Any failure before ``execve`` is written to the status pipe (``status_fd``) and the process exits
128; a successful ``execve`` closes the pipe (close-on-exec) with nothing written, which is how the
node tells a started container from a StartError.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import stat
import sys
from typing import Any

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_MS_RDONLY = 1
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            None if source is None else source.encode(),
            target.encode(),
            None if fstype is None else fstype.encode(),
            ctypes.c_ulong(flags),
            None if data is None else data.encode(),
        ),
        f"mount {source or fstype} on {target}",
    )


def _ancestors(path: str) -> list[str]:
    out, current = [], path
    while current != "/":
        current = os.path.dirname(current)
        out.append(current)
    return out


def _replicate(
    host_dir: str,
    view_dir: str,
    shadow: set[str],
    targets: set[str],
    skip: str,
    *,
    binds: list[str],
    traversable: frozenset[str] = frozenset(),
) -> None:
    """Make ``view_dir`` show ``host_dir``'s entries; recurse into ``shadow`` directories (those
    in ``traversable`` get execute permission for all in the view); the bind mounts made are
    appended to ``binds``."""
    for name in sorted(os.listdir(host_dir)):
        host, view = os.path.join(host_dir, name), os.path.join(view_dir, name)
        if host == skip:
            continue
        try:
            info = os.lstat(host)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(host), view)
            elif stat.S_ISDIR(info.st_mode):
                os.mkdir(view)
                os.chmod(view, stat.S_IMODE(info.st_mode) | (0o111 if host in traversable else 0))
                if host in shadow:
                    _replicate(host, view, shadow, targets, skip, binds=binds, traversable=traversable)
                elif host not in targets:
                    _mount(host, view, None, _MS_BIND | _MS_REC)
                    binds.append(view)
            else:
                with open(view, "w"):
                    pass
                _mount(host, view, None, _MS_BIND)
                binds.append(view)
        except OSError as exc:  # an odd host entry must not stop the container
            print(f"local-node sandbox: skipping {host}: {exc}", file=sys.stderr)


def _setup(spec: dict[str, Any]) -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != spec["parent_pid"]:
        raise OSError("the local node exited before the container started")
    _check(_libc.unshare(_CLONE_NEWNS | _CLONE_NEWUTS), "unshare")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    hostname = spec.get("hostname", "").encode()
    if hostname:
        _check(_libc.sethostname(hostname, len(hostname)), "sethostname")
    root = spec["root"]
    _mount("tmpfs", root, "tmpfs", 0, "mode=755")
    mounts = [dict(m, target=os.path.realpath(m["target"])) for m in spec["mounts"]]
    workdir = os.path.realpath(spec["workdir"]) if spec.get("workdir") else None
    targets = {m["target"] for m in mounts}
    needed = targets | ({workdir} if workdir else set())
    shadow = {a for path in needed for a in _ancestors(path)}
    # A non-root container must be able to reach its own executable, as in an image of its own:
    # the directories above it are made traversable in the view (the host's stay as they are).
    user = spec.get("user") or {}
    traversable: frozenset[str] = frozenset()
    if user.get("uid"):
        traversable = frozenset(_ancestors(os.path.realpath(spec["executable"])))
        shadow |= traversable
    binds: list[str] = []
    _replicate("/", root, shadow, targets, root, binds=binds, traversable=traversable)
    if spec.get("read_only_root"):  # before the volumes, which may cover some of these binds
        # /dev and /proc stay writable, as container runtimes mount them apart from the image's root
        runtime_dirs = (root + "/dev", root + "/proc")
        for view in binds:
            if not view.startswith(runtime_dirs):
                _mount(None, view, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY)
    for mount in sorted(mounts, key=lambda m: m["target"].count("/")):
        inside = root + mount["target"]
        if os.path.isdir(mount["source"]):
            os.makedirs(inside, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(inside), exist_ok=True)
            if not os.path.exists(inside):
                with open(inside, "w"):
                    pass
        _mount(mount["source"], inside, None, _MS_BIND | _MS_REC)
        if mount.get("readonly"):
            _mount(None, inside, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY)
    if workdir:
        os.makedirs(root + workdir, exist_ok=True)
    if spec.get("read_only_root"):
        _mount(None, root, None, _MS_REMOUNT | _MS_RDONLY)
    os.chroot(root)
    os.chdir(workdir or "/")
    user = spec.get("user")
    if user:
        os.setgroups(user["groups"])
        if user["gid"] is not None:
            os.setresgid(user["gid"], user["gid"], user["gid"])
        if user["uid"] is not None:
            os.setresuid(user["uid"], user["uid"], user["uid"])


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    status_fd = int(spec["status_fd"])
    os.set_inheritable(status_fd, False)
    try:
        _setup(spec)
    except OSError as exc:
        os.write(status_fd, f"setting up the container failed: {exc}".encode())
        os._exit(128)
    try:
        if spec.get("no_new_privs"):
            _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        os.execve(spec["executable"], spec["argv"], spec["env"])
    except OSError as exc:
        os.write(status_fd, f'exec: "{spec["executable"]}": {exc.strerror or exc}'.encode())
        os._exit(128)


if __name__ == "__main__":
    main()
