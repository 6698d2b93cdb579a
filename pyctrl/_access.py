"""Uniform metadata access for typed objects (``KubeObject``) and unstructured dicts.

Internal: predicates, handlers and controllerutil read metadata the same way from both shapes,
without dumping a typed object's metadata to a dict on the hot path.
"""

from typing import Any

from pyctrl.client.objects import KubeObject

__all__ = [
    "annotations",
    "generation",
    "labels",
    "name",
    "namespace",
    "owner_references",
    "resource_version",
    "uid",
]


def _dict_meta(obj: Any) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def _field(obj: Any, attr: str, key: str) -> Any:
    """``metadata.<attr>`` of a typed object, ``metadata[key]`` (the wire name) of a dict; None when
    unset."""
    if isinstance(obj, KubeObject):
        return getattr(obj.metadata, attr)
    return _dict_meta(obj).get(key)


def name(obj: Any) -> str:
    return str(_field(obj, "name", "name") or "")


def namespace(obj: Any) -> str:
    return str(_field(obj, "namespace", "namespace") or "")


def uid(obj: Any) -> str:
    return str(_field(obj, "uid", "uid") or "")


def resource_version(obj: Any) -> str:
    return str(_field(obj, "resource_version", "resourceVersion") or "")


def generation(obj: Any) -> int:
    return int(_field(obj, "generation", "generation") or 0)


def labels(obj: Any) -> dict[str, str]:
    return dict(_field(obj, "labels", "labels") or {})


def annotations(obj: Any) -> dict[str, str]:
    return dict(_field(obj, "annotations", "annotations") or {})


def owner_references(obj: Any) -> list[dict[str, Any]]:
    """Owner references as wire-form dicts (``apiVersion``, ``kind``, ``name``, ``uid``, ``controller``)."""
    if isinstance(obj, KubeObject):
        return [r.model_dump(by_alias=True, exclude_none=True) for r in obj.metadata.owner_references or []]
    return list(_dict_meta(obj).get("ownerReferences") or [])
