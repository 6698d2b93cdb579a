"""Patches: what ``client.patch`` sends, and how the fake client applies them.

Mirrors controller-runtime ``client.Patch`` (``RawPatch``, ``MergeFrom`` with optimistic lock)
and apimachinery's ``types.PatchType``; the appliers mirror ``evanphx/json-patch`` (RFC 6902 JSON
patch, RFC 7386 merge patch) and, approximately, ``strategicpatch``.

Guarantees:

- :class:`MergeFrom` sends the RFC 7386 difference between the original and the object passed to
  ``patch`` — unchanged fields are not sent, removed fields are sent as ``null`` — plus
  ``metadata.resourceVersion`` when ``optimistic_lock=True`` (a stale object then fails with
  ``Conflict``); for two typed objects of one class the difference is found by walking their
  fields, dumping only the fields that differ (the same patch as diffing the whole dumps, tested
  against it);
- :func:`apply_json_patch` applies every RFC 6902 op (add, remove, replace, move, copy, test) or
  raises ``ValueError`` and leaves the target untouched;
- :func:`apply_strategic_merge_patch` is the fake client's approximation of the apiserver's
  strategic merge: maps merge recursively, ``null`` deletes, lists of objects merge by the
  Kubernetes merge key of their field (``containers`` by ``name``, ``ports`` by port number,
  ``volumeMounts`` by ``mountPath``, ``conditions`` by ``type``…), ``$patch: delete`` removes a list
  item, ``finalizers`` merge as a set, other lists are replaced.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pyctrl.client.objects import KubeModel, KubeObject
from pyctrl.client.scheme import Object, encode, to_dict

__all__ = [
    "Apply",
    "MergeFrom",
    "Patch",
    "PatchType",
    "RawPatch",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "create_merge_patch",
]


class PatchType(StrEnum):
    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC_MERGE = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


class Patch:
    """Base of patches: a content type and the body computed against the object being patched."""

    patch_type: PatchType

    def data(self, obj: Object) -> bytes:
        raise NotImplementedError


class _ApplyPatch(Patch):
    """The applied configuration is the object itself, without ``managedFields`` (which the
    apiserver refuses in an apply)."""

    patch_type = PatchType.APPLY

    def data(self, obj: Object) -> bytes:
        data = dict(to_dict(obj))
        data["metadata"] = {k: v for k, v in (data.get("metadata") or {}).items() if k != "managedFields"}
        return encode(data)

    def __repr__(self) -> str:
        return "Apply"


#: controller-runtime ``client.Apply``: ``client.patch(obj, Apply, field_manager=...)`` is ``apply``.
Apply: Patch = _ApplyPatch()


@dataclass(frozen=True)
class RawPatch(Patch):
    """A literal patch: ``RawPatch(PatchType.MERGE, {"spec": {"replicas": 3}})``."""

    patch_type: PatchType
    body: Any

    def data(self, obj: Object) -> bytes:
        return self.body if isinstance(self.body, bytes) else encode(self.body)


@dataclass(frozen=True)
class MergeFrom(Patch):
    """controller-runtime ``MergeFrom(original)``: patch = merge diff(original → patched object)."""

    original: Object
    optimistic_lock: bool = False
    patch_type: PatchType = PatchType.MERGE

    def data(self, obj: Object) -> bytes:
        original = self.original
        diff = None
        if isinstance(original, KubeModel) and type(original) is type(obj):
            diff = _diff_models(original, obj)
        if diff is None:
            diff = create_merge_patch(to_dict(original), to_dict(obj))
        if self.optimistic_lock:
            if isinstance(original, KubeObject):
                rv = original.metadata.resource_version
            else:
                rv = (original.get("metadata") or {}).get("resourceVersion")
            if not rv:
                raise ValueError("MergeFrom(optimistic_lock=True) needs an original with a resourceVersion")
            diff.setdefault("metadata", {})["resourceVersion"] = rv
        return encode(diff)


# class -> its fields as (attribute, wire name), or None when the fields cannot be diffed one by one
_WALKS: dict[type[KubeModel], tuple[tuple[str, str], ...] | None] = {}


def _walk(cls: type[KubeModel]) -> tuple[tuple[str, str], ...] | None:
    """How :func:`_diff_models` walks ``cls``: None when its dump is more than its fields, each
    under its alias (a model or field serializer, a computed or excluded field, no by-alias dump)."""
    try:
        return _WALKS[cls]
    except KeyError:
        pass
    decorators = cls.__pydantic_decorators__
    fields = cls.model_fields
    walkable = (
        cls.model_config.get("serialize_by_alias") is True
        and not decorators.model_serializers
        and not decorators.field_serializers
        and not decorators.computed_fields
        and not any(info.exclude for info in fields.values())
    )
    walk = tuple((name, info.serialization_alias or info.alias or name) for name, info in fields.items())
    _WALKS[cls] = walk if walkable else None
    return _WALKS[cls]


def _diff_models(old: KubeModel, new: KubeModel) -> dict[str, Any] | None:
    """The merge patch from ``old`` to ``new`` (one class) — what :func:`create_merge_patch` gives
    for their ``exclude_none`` JSON dumps — dumping only fields that differ; None when the class
    cannot be walked (see :func:`_walk`) or their extra fields differ (the caller diffs the dumps)."""
    walk = _walk(type(new))
    if walk is None or old.__pydantic_extra__ != new.__pydantic_extra__:
        return None
    patch: dict[str, Any] = {}
    before, after = old.__dict__, new.__dict__
    for attr, wire in walk:
        a, b = before.get(attr), after.get(attr)
        if a is b:
            continue
        if b is None:  # not dumped (exclude_none): removed
            patch[wire] = None
            continue
        if a is not None and type(a) is type(b) and isinstance(a, KubeModel):
            # equal models: pydantic's __eq__ minus its generic-origin and private-attribute checks
            if a.__dict__ == b.__dict__ and a.__pydantic_extra__ == b.__pydantic_extra__:
                continue
            sub = _diff_models(a, b)
            if sub is not None:
                if sub:
                    patch[wire] = sub
                continue
        elif a == b:
            continue
        include = {attr}
        after_json = new.model_dump(mode="json", include=include, exclude_none=True)
        if a is None:  # not dumped: added
            patch.update(after_json)
        else:
            before_json = old.model_dump(mode="json", include=include, exclude_none=True)
            patch.update(create_merge_patch(before_json, after_json))
    return patch


def create_merge_patch(original: dict[str, Any], modified: dict[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch turning ``original`` into ``modified``."""
    patch: dict[str, Any] = {}
    for key in original.keys() - modified.keys():
        patch[key] = None
    for key, new in modified.items():
        old = original.get(key, _MISSING)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            patch[key] = create_merge_patch(old, new)
        else:
            patch[key] = copy.deepcopy(new)
    return patch


_MISSING: Any = object()


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: returns the patched copy of ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ValueError(f"path {path!r} does not exist") from exc
    if not parts:
        raise ValueError("operation on the document root is not supported")
    return node, parts[-1]


def _index(node: list[Any], key: str, path: str, *, insert: bool = False) -> int:
    if insert and key == "-":
        return len(node)
    try:
        i = int(key)
    except ValueError as exc:
        raise ValueError(f"bad array index in {path!r}") from exc
    if i < 0 or i > len(node) - (0 if insert else 1):
        raise ValueError(f"array index out of range in {path!r}")
    return i


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ValueError(f"path {path!r} does not exist") from exc
    return node


def _add(doc: Any, path: str, value: Any) -> None:
    parent, key = _parent(doc, _pointer(path), path)
    if isinstance(parent, list):
        parent.insert(_index(parent, key, path, insert=True), value)
    elif isinstance(parent, dict):
        parent[key] = value
    else:
        raise ValueError(f"cannot add below a scalar at {path!r}")


def _remove(doc: Any, path: str) -> Any:
    parent, key = _parent(doc, _pointer(path), path)
    if isinstance(parent, list):
        return parent.pop(_index(parent, key, path))
    if isinstance(parent, dict) and key in parent:
        return parent.pop(key)
    raise ValueError(f"path {path!r} does not exist")


def apply_json_patch(target: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902: returns the patched copy; on any failing op raises ``ValueError``."""
    doc = copy.deepcopy(target)
    for op in ops:
        kind, path = op.get("op"), op.get("path")
        if not isinstance(path, str):
            raise ValueError(f"JSON patch op without a path: {op!r}")
        match kind:
            case "add":
                _add(doc, path, copy.deepcopy(op["value"]))
            case "remove":
                _remove(doc, path)
            case "replace":
                _remove(doc, path)
                _add(doc, path, copy.deepcopy(op["value"]))
            case "move":
                _add(doc, path, _remove(doc, str(op["from"])))
            case "copy":
                _add(doc, path, copy.deepcopy(_get(doc, str(op["from"]))))
            case "test":
                if _get(doc, path) != op.get("value"):
                    raise ValueError(f"test failed at {path!r}")
            case _:
                raise ValueError(f"unknown JSON patch op {kind!r}")
    return doc


_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
_SET_LISTS = {"finalizers"}


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        return "containerPort" if any("containerPort" in i for i in items if isinstance(i, dict)) else "port"
    return _MERGE_KEYS.get(field)


def _merge_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if field in _SET_LISTS:
        return current + [v for v in patch if v not in current]
    key = _merge_key(field, [*current, *patch])
    if key is None or not all(isinstance(i, dict) for i in patch):
        return copy.deepcopy(patch)
    result = [copy.deepcopy(i) for i in current]
    for item in patch:
        directive = item.get("$patch")
        pos = next(
            (n for n, c in enumerate(result) if isinstance(c, dict) and c.get(key) == item.get(key)), None
        )
        if directive == "delete":
            if pos is not None:
                result.pop(pos)
        elif pos is None:
            result.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            result[pos] = _strategic(result[pos], item)
    return result


def _strategic(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result = dict(target)
    for key, value in patch.items():
        if key == "$patch":
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _strategic(result[key], value)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(key, result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def apply_strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Approximate strategic merge (see the module docstring); returns a patched copy."""
    return _strategic(copy.deepcopy(target), patch)
