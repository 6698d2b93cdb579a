"""Storage version migration of a CRD's objects (kube-storage-version-migrator, in one call).

After a CRD changes its storage version, etcd still holds every existing object in the version it
was written in, and ``status.storedVersions`` still lists that version, so the old version can be
removed from the CRD only once every object has been rewritten. :func:`migrate_storage` does what
the `kube-storage-version-migrator` does for one resource:

1. list every object (all namespaces, in pages) in the storage version;
2. write each back unchanged (an ``update`` with its ``resourceVersion``): the apiserver encodes
   it in the current storage version; an object already stored so is left as it is (the apiserver
   skips a write whose bytes do not change);
3. set the CRD's ``status.storedVersions`` to ``[storage version]``.

Guarantees:

- no object changes content: the write carries exactly what was read; an object changed
  (``Conflict``) or deleted (``NotFound``) since the list needs no rewrite (whoever wrote it
  wrote it in the storage version) and is counted as such, never retried blindly;
- ``storedVersions`` is trimmed only after every listed object was rewritten or found changed,
  and kept when one write failed otherwise (the error is raised; running again resumes);
- it reads and writes in the storage version, so a conversion webhook is called only for objects
  still stored in an older version (which is the point);
- running it again is harmless (objects already migrated are no-op writes);
- progress goes to ``progress`` (one line per page and a summary), for a long migration.

Run it as a one-shot command after the upgrade (``python -m pyctrl.migrate CRD_NAME``, e.g. a Job
or a Helm post-upgrade hook with ``get/list/update`` on the resource and ``get/update`` on the
CRD's status), or call :func:`migrate_storage` from an operator at start.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyctrl.client.client import ApiClient
from pyctrl.client.errors import ApiError, Conflict, NotFound
from pyctrl.client.gvk import GroupVersionKind

__all__ = ["CRD_GVK", "MigrationError", "MigrationResult", "main", "migrate_storage", "storage_version"]

CRD_GVK = GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")


class MigrationError(RuntimeError):
    """The migration cannot run (no such CRD, no storage version); the message says which."""


@dataclass(frozen=True)
class MigrationResult:
    """What :func:`migrate_storage` did."""

    crd: str
    storage_version: str
    stored_versions_before: tuple[str, ...]
    rewritten: int
    changed_meanwhile: int

    @property
    def stored_versions_after(self) -> tuple[str, ...]:
        return (self.storage_version,)


def storage_version(crd: dict[str, Any]) -> str:
    """The version a CRD stores objects in (``MigrationError`` when none is marked)."""
    names = [v.get("name", "") for v in crd.get("spec", {}).get("versions") or [] if v.get("storage")]
    if len(names) != 1:
        name = crd.get("metadata", {}).get("name", "?")
        raise MigrationError(f"CRD {name}: expected exactly one storage version, found {names or 'none'}")
    return str(names[0])


async def migrate_storage(
    client: ApiClient,
    crd_name: str,
    *,
    page_size: int = 200,
    progress: Callable[[str], None] | None = None,
) -> MigrationResult:
    """Rewrite every object of CRD ``crd_name`` in its storage version, then trim
    ``status.storedVersions`` (see the module docstring)."""
    say = progress or (lambda _line: None)
    try:
        crd = await client.get(CRD_GVK, crd_name)
    except NotFound as exc:
        raise MigrationError(f"CRD {crd_name} not found: install the new CRD before migrating") from exc
    version = storage_version(crd)
    before = tuple(crd.get("status", {}).get("storedVersions") or ())
    gvk = GroupVersionKind(crd["spec"]["group"], version, crd["spec"]["names"]["kind"])
    rewritten = changed = 0
    token: str | None = None
    while True:
        page = await client.list(gvk, limit=page_size, continue_=token)
        for obj in page.items:
            try:
                await client.update(obj)
                rewritten += 1
            except (Conflict, NotFound):
                changed += 1  # written (or deleted) since the list: in the storage version already
        say(f"{crd_name}: {rewritten + changed} object(s) migrated to {version}")
        token = page.continue_
        if not token:
            break
    await _trim_stored_versions(client, crd_name, version)
    say(f"{crd_name}: status.storedVersions {list(before)} -> [{version!r}]")
    return MigrationResult(crd_name, version, before, rewritten, changed)


async def _trim_stored_versions(client: ApiClient, crd_name: str, version: str, attempts: int = 5) -> None:
    for _ in range(attempts):
        crd = await client.get(CRD_GVK, crd_name)
        if storage_version(crd) != version:
            raise MigrationError(
                f"CRD {crd_name}: the storage version changed to {storage_version(crd)} during the "
                f"migration to {version}; run it again"
            )
        if crd.get("status", {}).get("storedVersions") == [version]:
            return
        crd.setdefault("status", {})["storedVersions"] = [version]
        try:
            await client.status().update(crd)
            return
        except Conflict:
            continue  # the CRD controller updated its conditions: read again
    raise MigrationError(f"CRD {crd_name}: status kept changing; storedVersions not trimmed, run it again")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pyctrl.migrate CRD_NAME... [--kubeconfig PATH]``: exit 0 migrated, 1 failed."""
    parser = argparse.ArgumentParser(prog="python -m pyctrl.migrate", description=__doc__.split("\n")[0])
    parser.add_argument("crds", nargs="+", metavar="CRD_NAME", help="e.g. redisclusters.redis.pyctrl.dev")
    parser.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster or $KUBECONFIG)")
    args = parser.parse_args(argv)
    return asyncio.run(_main(args.crds, args.kubeconfig))


async def _main(crds: list[str], kubeconfig: str | None) -> int:
    from pyctrl.client.config import load_config

    config = await load_config(kubeconfig)
    async with ApiClient(config) as client:
        for name in crds:
            try:
                result = await migrate_storage(client, name, progress=print)
            except (MigrationError, ApiError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            before, after = list(result.stored_versions_before), list(result.stored_versions_after)
            print(
                f"{name}: {result.rewritten} rewritten, {result.changed_meanwhile} changed meanwhile; "
                f"storedVersions {before} -> {after}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
