"""Pod volumes on the host (kubelet ``volumemanager`` and the in-tree volume plugins).

Each volume becomes a host directory; containers see it at their ``mountPath`` through the
sandbox's bind mounts (``sandbox.py``).

Guarantees:
- emptyDir: ``<pod dir>/volumes/<name>``, empty at Pod start, removed with the Pod;
- configMap, secret, downwardAPI and projected volumes: their files (``items`` with ``path`` and
  ``mode``, else every key; ``defaultMode``, default 0644) written when the Pod starts, in the
  kubelet's ``AtomicWriter`` layout: the files live in a timestamped ``..<time>`` directory,
  ``..data`` is a symlink to it and each top-level name a symlink into ``..data``;
  :func:`refresh_volumes` (the pod worker calls it periodically, as the kubelet's sync does) writes
  changed contents into a new directory and swaps ``..data`` with one ``rename``, so a reader
  sees either every old file or every new one (a rotated ``tls.crt`` never beside the old
  ``tls.key``); a subPath mount keeps what it saw at start, as with the kubelet;
  a missing ConfigMap/Secret/key that is not ``optional`` raises ``VolumeNotReady`` and the Pod
  waits (the caller retries), like the kubelet's FailedMount;
- projected ``serviceAccountToken`` (the ``kube-api-access-*`` volume ServiceAccount admission adds):
  a token from the TokenRequest API bound to the Pod; if the request fails the token file is
  left out (logged) but the directory and ``ca.crt``/``namespace`` are there, so the Pod still runs.
  The token is written once (not refreshed);
- persistentVolumeClaim (and generic ``ephemeral`` volumes, whose claim is ``<pod>-<volume>``):
  the bound PersistentVolume's hostPath / local path; an unbound claim raises ``VolumeNotReady``;
- hostPath: the path itself (created for ``DirectoryOrCreate``);
- emptyDir directories are mode 0777 (the kubelet's), so a container of any uid can write them;
- ``fsGroup`` (the Pod's ``securityContext``; the kubelet's ``SetVolumeOwnership``): emptyDir and
  persistentVolumeClaim volumes get group ``fsGroup`` on every file and directory, group
  read-write (directories also group execute and the setgid bit, so new files inherit the
  group); the files of configMap, secret, downwardAPI and projected volumes get group
  ``fsGroup`` and group read. ``fsGroupChangePolicy: OnRootMismatch`` skips a claim whose root
  already has that group, mode and setgid bit. hostPath volumes are left as they are.
- Not supported (the Pod waits with a message): other volume types, clusterTrustBundle sources.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import shutil
import stat
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pyctrl.envtest.node.envvars import (
    ContainerConfigError,
    PodFacts,
    SourceLookup,
    field_value,
    resource_value,
)

__all__ = [
    "VolumeContext",
    "VolumeNotReady",
    "prepare_volumes",
    "refresh_volumes",
    "remove_pod_volumes",
    "set_volume_ownership",
]

log = logging.getLogger(__name__)


class TokenFn(Protocol):
    """TokenRequest for a ServiceAccount, bound to the Pod; returns the token."""

    def __call__(
        self, namespace: str, sa: str, *, audience: str | None, expiration: int, pod: str, uid: str
    ) -> Awaitable[str]: ...


# (namespace, claim name) -> host path of the bound volume, or None while it is not bound
ClaimFn = Callable[[str, str], str | None]

_DEFAULT_MODE = 0o644


class VolumeNotReady(Exception):
    """A volume cannot be set up yet (missing object, unbound claim, unsupported type)."""


@dataclass(frozen=True)
class VolumeContext:
    facts: PodFacts
    lookup: SourceLookup
    request_token: TokenFn
    claim_path: ClaimFn


def _mkdir(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)


_DATA = "..data"
Files = Mapping[str, tuple[bytes, int]]


def _current(directory: Path) -> dict[str, tuple[bytes, int]] | None:
    """What ``..data`` holds now (None before the first write)."""
    data = directory / _DATA
    if not data.is_symlink():
        return None
    root = data.resolve()
    return {
        str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mode & 0o7777)
        for path in root.rglob("*")
        if path.is_file()
    }


def _fs_group(pod: Mapping[str, Any]) -> int | None:
    value = (pod["spec"].get("securityContext") or {}).get("fsGroup")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


_RW, _RO, _EXEC = 0o660, 0o440, 0o110


def _own(path: Path | str, fs_group: int, mask: int) -> None:
    """One entry of SetVolumeOwnership: group ``fs_group``, ``mask`` added (directories: also
    group execute and setgid); symlinks are left alone."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return
    if info.st_gid != fs_group:
        os.chown(path, -1, fs_group, follow_symlinks=False)
    mode = stat.S_IMODE(info.st_mode) | mask
    if stat.S_ISDIR(info.st_mode):
        mode |= stat.S_ISGID | _EXEC
    if mode != stat.S_IMODE(info.st_mode):
        os.chmod(path, mode)


def set_volume_ownership(root: str, fs_group: int, *, policy: str | None = None) -> None:
    """The kubelet's ``SetVolumeOwnership`` of a writable volume (see the module docstring)."""
    info = os.stat(root)
    if policy == "OnRootMismatch" and (
        info.st_gid == fs_group and info.st_mode & _RW == _RW and info.st_mode & stat.S_ISGID
    ):
        return
    _own(root, fs_group, _RW)
    for directory, dirs, names in os.walk(root):
        for name in dirs + names:
            _own(os.path.join(directory, name), fs_group, _RW)


def _write(directory: Path, files: Files, fs_group: int | None = None) -> bool:
    """Make ``directory`` hold exactly ``files`` (AtomicWriter), group ``fs_group`` and
    group-readable when given; False when it did already."""
    for rel in files:
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise VolumeNotReady(f"invalid item path {rel!r}")
    if fs_group is not None:
        files = {rel: (data, mode | _RO) for rel, (data, mode) in files.items()}
    if _current(directory) == dict(files):
        return False
    stamp = datetime.datetime.now(datetime.UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
    fresh = directory / stamp
    for rel, (data, mode) in files.items():
        target = fresh / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)
    fresh.mkdir(parents=True, exist_ok=True)  # even for no files
    if fs_group is not None:
        for entry in [directory, fresh, *fresh.rglob("*")]:
            _own(entry, fs_group, _RO)
    old = (directory / _DATA).resolve() if (directory / _DATA).is_symlink() else None
    tmp = directory / "..data_tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(stamp)
    tmp.rename(directory / _DATA)  # the one atomic step: readers switch to every new file at once
    tops = {Path(rel).parts[0] for rel in files}
    for top in tops:
        link = directory / top
        if link.is_symlink():
            continue
        if link.is_dir():  # a directory left by a node that wrote files in place
            shutil.rmtree(link)
        else:
            link.unlink(missing_ok=True)
        link.symlink_to(f"{_DATA}/{top}")
    for entry in directory.iterdir():
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in tops:
            entry.unlink()
    if old is not None and old != fresh:
        shutil.rmtree(old, ignore_errors=True)
    return True


async def _object_files(
    kind: str, name: str, source: Mapping[str, Any], ctx: VolumeContext, default_mode: int
) -> dict[str, tuple[bytes, int]]:
    namespace = ctx.facts.pod["metadata"]["namespace"]
    data = await ctx.lookup(kind, namespace, name)
    optional = bool(source.get("optional"))
    if data is None:
        if optional:
            return {}
        raise VolumeNotReady(f'{kind.lower()} "{name}" not found')
    items = source.get("items")
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    files = {}
    for item in items:
        if item["key"] not in data:
            if optional:
                continue
            raise VolumeNotReady(f'configmap or secret "{name}": key "{item["key"]}" not found')
        files[item["path"]] = (data[item["key"]], int(item.get("mode", default_mode)))
    return files


def _downward_files(
    items: list[Mapping[str, Any]], ctx: VolumeContext, default_mode: int
) -> dict[str, tuple[bytes, int]]:
    files = {}
    containers = {c["name"]: c for c in ctx.facts.pod["spec"].get("containers", [])}
    for item in items:
        try:
            if "fieldRef" in item:
                value = field_value(item["fieldRef"].get("fieldPath", ""), ctx.facts)
            else:
                ref = item.get("resourceFieldRef", {})
                value = resource_value(containers.get(ref.get("containerName", ""), {}), ref, ctx.facts)
        except ContainerConfigError as exc:
            raise VolumeNotReady(str(exc)) from exc
        files[item["path"]] = (value.encode(), int(item.get("mode", default_mode)))
    return files


async def _projected(volume: Mapping[str, Any], ctx: VolumeContext) -> dict[str, tuple[bytes, int]]:
    mode = int(volume.get("defaultMode", _DEFAULT_MODE))
    meta = ctx.facts.pod["metadata"]
    files: dict[str, tuple[bytes, int]] = {}
    for source in volume.get("sources") or []:
        if "configMap" in source:
            files.update(
                await _object_files("ConfigMap", source["configMap"]["name"], source["configMap"], ctx, mode)
            )
        elif "secret" in source:
            files.update(await _object_files("Secret", source["secret"]["name"], source["secret"], ctx, mode))
        elif "downwardAPI" in source:
            files.update(_downward_files(source["downwardAPI"].get("items") or [], ctx, mode))
        elif "serviceAccountToken" in source:
            sat = source["serviceAccountToken"]
            sa = ctx.facts.pod["spec"].get("serviceAccountName") or "default"
            try:
                token = await ctx.request_token(
                    meta["namespace"],
                    sa,
                    audience=sat.get("audience"),
                    expiration=int(sat.get("expirationSeconds", 3600)),
                    pod=meta["name"],
                    uid=meta["uid"],
                )
            except Exception as exc:
                log.warning("pod %s/%s: no service account token (%s)", meta["namespace"], meta["name"], exc)
                continue
            files[sat.get("path", "token")] = (token.encode(), mode)
        else:
            raise VolumeNotReady(f"unsupported projected volume source {sorted(source)}")
    return files


async def _prepare(volume: Mapping[str, Any], directory: Path, ctx: VolumeContext) -> str:
    namespace, pod_name = ctx.facts.pod["metadata"]["namespace"], ctx.facts.pod["metadata"]["name"]
    if "persistentVolumeClaim" in volume or "ephemeral" in volume:
        claim = (
            volume["persistentVolumeClaim"]["claimName"]
            if "persistentVolumeClaim" in volume
            else f"{pod_name}-{volume['name']}"
        )
        path = ctx.claim_path(namespace, claim)
        if path is None:
            raise VolumeNotReady(f'persistentvolumeclaim "{claim}" is not bound')
        fs_group = _fs_group(ctx.facts.pod)
        if fs_group is not None:
            policy = (ctx.facts.pod["spec"].get("securityContext") or {}).get("fsGroupChangePolicy")
            await asyncio.to_thread(set_volume_ownership, path, fs_group, policy=policy)
        return path
    if "hostPath" in volume:
        host = volume["hostPath"]
        if host.get("type") == "DirectoryOrCreate":
            os.makedirs(host["path"], exist_ok=True)
        return str(host["path"])
    _mkdir(directory)
    fs_group = _fs_group(ctx.facts.pod)
    if "emptyDir" in volume:
        os.chmod(directory, 0o777)
        if fs_group is not None:
            set_volume_ownership(str(directory), fs_group)
        return str(directory)
    _write(directory, await _api_files(volume, ctx), fs_group)
    return str(directory)


def _is_api_data(volume: Mapping[str, Any]) -> bool:
    return bool({"configMap", "secret", "downwardAPI", "projected"} & set(volume))


async def _api_files(volume: Mapping[str, Any], ctx: VolumeContext) -> dict[str, tuple[bytes, int]]:
    """The files of a configMap, secret, downwardAPI or projected volume."""
    if "configMap" in volume:
        source = volume["configMap"]
        return await _object_files(
            "ConfigMap", source["name"], source, ctx, int(source.get("defaultMode", _DEFAULT_MODE))
        )
    if "secret" in volume:
        source = volume["secret"]
        return await _object_files(
            "Secret", source["secretName"], source, ctx, int(source.get("defaultMode", _DEFAULT_MODE))
        )
    if "downwardAPI" in volume:
        source = volume["downwardAPI"]
        return _downward_files(source.get("items") or [], ctx, int(source.get("defaultMode", _DEFAULT_MODE)))
    if "projected" in volume:
        return await _projected(volume["projected"], ctx)
    kinds = sorted(k for k in volume if k != "name")
    raise VolumeNotReady(f"volume {volume['name']!r}: type {kinds} is not supported by the local node")


async def prepare_volumes(pod: Mapping[str, Any], pod_dir: Path, ctx: VolumeContext) -> dict[str, str]:
    """Host path of every volume of ``pod``; raises ``VolumeNotReady`` naming the first not ready."""
    paths = {}
    for volume in pod["spec"].get("volumes") or []:
        paths[volume["name"]] = await _prepare(volume, pod_dir / "volumes" / volume["name"], ctx)
    return paths


async def refresh_volumes(pod: Mapping[str, Any], pod_dir: Path, ctx: VolumeContext) -> list[str]:
    """Bring configMap, secret and downwardAPI volumes up to date; the names of those that changed.

    A projected volume with a service account token is left as it is (its token is not
    refreshed); a source that went missing keeps the files it had (the kubelet does the same)."""
    changed = []
    for volume in pod["spec"].get("volumes") or []:
        if not _is_api_data(volume):
            continue
        sources = (volume.get("projected") or {}).get("sources") or []
        if any("serviceAccountToken" in source for source in sources):
            continue
        try:
            files = await _api_files(volume, ctx)
        except VolumeNotReady:
            continue
        if _write(pod_dir / "volumes" / volume["name"], files, _fs_group(pod)):
            changed.append(volume["name"])
    return changed


def remove_pod_volumes(pod_dir: Path) -> None:
    """Delete the Pod's own volume directories (emptyDir, configMap, ...); never a PV's data."""
    shutil.rmtree(pod_dir / "volumes", ignore_errors=True)
