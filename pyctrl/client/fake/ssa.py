"""Server-side apply in the fake client, with field-ownership conflicts.

Mirrors the apiserver's apply (``structured-merge-diff``) in simplified form: ownership is tracked
per leaf path (maps descended, lists atomic - see :mod:`.tracker`). Guarantees: applying a value
different from the current one at a leaf another manager owns raises ``Conflict`` with one cause
per field (``.data.key``) unless ``force``, which transfers ownership; fields a manager stops
applying are removed unless another manager owns them; applying to a missing object creates it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from pyctrl.client.errors import Conflict
from pyctrl.client.fake.tracker import Path, leaf_paths, merge_applied, remove_path, value_at
from pyctrl.client.scheme import Object, gvk_of, to_dict

if TYPE_CHECKING:
    from pyctrl.client.fake.core import FakeCore

__all__ = ["server_side_apply"]

_ABSENT: Any = value_at({}, ("x",))


def _status(reason: str, code: int, message: str, **details: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "status": "Failure",
        "reason": reason,
        "code": code,
        "message": message,
        "details": details,
    }


def _path_str(path: Path) -> str:
    return "." + ".".join(path)


def server_side_apply(
    core: FakeCore, obj: Object, *, manager: str, force: bool, status: bool, dry_run: bool
) -> dict[str, Any]:
    """Server-side apply with field ownership (see :mod:`.tracker`)."""
    gvk, applied = gvk_of(obj), copy.deepcopy(to_dict(obj))
    applied.get("metadata", {}).pop("managedFields", None)
    key = core.key_of(gvk, applied.get("metadata") or {})
    if status:  # the status subresource takes only the status from an applied configuration
        meta = applied.get("metadata") or {}
        applied = {
            "apiVersion": applied.get("apiVersion"),
            "kind": applied.get("kind"),
            "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
            **({"status": applied["status"]} if "status" in applied else {}),
        }
    elif core.has_status(gvk):  # and the main resource ignores it
        applied.pop("status", None)
    paths = set(leaf_paths(applied))
    cur = core.tracker.get(gvk, key)
    if cur is None:
        if status:
            raise core.not_found(gvk, key[1])
        applied.get("metadata", {}).pop("resourceVersion", None)
        created = core.create(applied, dry_run=dry_run, manager=None)
        if not dry_run:
            core.tracker.managers[(gvk, key)] = {manager: paths}
        return created
    owners = core.tracker.managers.setdefault((gvk, key), {})
    conflicts = sorted(
        (m, p)
        for p in paths
        if value_at(cur, p) not in (value_at(applied, p), _ABSENT)
        for m, owned in owners.items()
        if m != manager and p in owned
    )
    if conflicts and not force:
        causes = [
            {"reason": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": _path_str(p)}
            for m, p in conflicts
        ]
        lines = "\n".join(f'- conflict with "{m}": {_path_str(p)}' for m, p in conflicts)
        raise Conflict(
            _status("Conflict", 409, f"Apply failed with {len(conflicts)} conflicts:\n{lines}", causes=causes)
        )
    result = merge_applied(cur, applied)
    for stale in owners.get(manager, set()) - paths:
        if not any(stale in owned for m, owned in owners.items() if m != manager):
            remove_path(result, stale)
    if not dry_run:
        for m, p in conflicts:
            owners[m].discard(p)
        owners[manager] = paths
    rv = applied.get("metadata", {}).get("resourceVersion")
    if rv and rv != cur["metadata"]["resourceVersion"]:
        raise core.conflict(gvk, key[1])
    result = core.merge_write(gvk, cur, result, status)
    return core.finish_write(gvk, key, cur, result, dry_run)
