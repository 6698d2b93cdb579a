"""Server-side apply in the fake client, with field-ownership conflicts.

Mirrors the apiserver's apply (``structured-merge-diff``) in simplified form: ownership is tracked
per leaf path (maps descended, lists atomic - see :mod:`.tracker`). Pure functions of the stored
object and its owners; :class:`~pyctrl.client.fake.core.FakeCore` reads and commits them.
Guarantees: applying a value different from the current one at a leaf another manager owns
raises ``Conflict`` with one cause per field (``.data.key``) unless ``force``, which transfers
ownership; fields a manager stops applying are removed unless another manager owns them;
applying to a missing object creates it.
"""

from __future__ import annotations

import copy
from typing import Any

from pyctrl.client.errors import Conflict, failure_status
from pyctrl.client.fake.tracker import Path, leaf_paths, merge_applied, remove_path, value_at
from pyctrl.client.scheme import Object, to_dict

__all__ = ["Owners", "applied_configuration", "merge_apply"]

_ABSENT: Any = value_at({}, ("x",))

#: Field ownership of one object: manager name -> the leaf paths it owns.
Owners = dict[str, set[Path]]


def _path_str(path: Path) -> str:
    return "." + ".".join(path)


def applied_configuration(obj: Object, *, status: bool, separate_status: bool) -> dict[str, Any]:
    """What an apply of ``obj`` applies: no ``managedFields``; to the status subresource
    (``status``) only the status, to the main resource of a kind with a ``separate_status`` no
    status."""
    applied = copy.deepcopy(to_dict(obj))
    applied.get("metadata", {}).pop("managedFields", None)
    if status:
        meta = applied.get("metadata") or {}
        return {
            "apiVersion": applied.get("apiVersion"),
            "kind": applied.get("kind"),
            "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
            **({"status": applied["status"]} if "status" in applied else {}),
        }
    if separate_status:
        applied.pop("status", None)
    return applied


def merge_apply(
    cur: dict[str, Any], applied: dict[str, Any], owners: Owners, *, manager: str, force: bool
) -> tuple[dict[str, Any], Owners]:
    """Apply ``applied`` by ``manager`` to ``cur`` owned by ``owners``: (the result, the new
    owners). Raises ``Conflict`` (one cause per field) when another manager owns a leaf whose
    value would change, unless ``force``. Neither ``cur`` nor ``owners`` is modified."""
    paths = set(leaf_paths(applied))
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
        message = f"Apply failed with {len(conflicts)} conflicts:\n{lines}"
        raise Conflict(failure_status("Conflict", 409, message, causes=causes))
    result = merge_applied(cur, applied)
    for stale in owners.get(manager, set()) - paths:
        if not any(stale in owned for m, owned in owners.items() if m != manager):
            remove_path(result, stale)
    new_owners = {m: set(owned) for m, owned in owners.items()}
    for m, p in conflicts:
        new_owners[m].discard(p)
    new_owners[manager] = paths
    return result, new_owners
