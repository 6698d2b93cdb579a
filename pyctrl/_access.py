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


def name(obj: Any) -> str:
    if isinstance(obj, KubeObject):
        return obj.metadata.name or ""
    return str(_dict_meta(obj).get("name") or "")


def namespace(obj: Any) -> str:
    if isinstance(obj, KubeObject):
        return obj.metadata.namespace or ""
    return str(_dict_meta(obj).get("namespace") or "")


def uid(obj: Any) -> str:
    if isinstance(obj, KubeObject):
        return obj.metadata.uid or ""
    return str(_dict_meta(obj).get("uid") or "")


def resource_version(obj: Any) -> str:
    if isinstance(obj, KubeObject):
        return obj.metadata.resource_version or ""
    return str(_dict_meta(obj).get("resourceVersion") or "")


def generation(obj: Any) -> int:
    if isinstance(obj, KubeObject):
        return obj.metadata.generation or 0
    return int(_dict_meta(obj).get("generation") or 0)


def labels(obj: Any) -> dict[str, str]:
    if isinstance(obj, KubeObject):
        return obj.metadata.labels or {}
    return dict(_dict_meta(obj).get("labels") or {})


def annotations(obj: Any) -> dict[str, str]:
    if isinstance(obj, KubeObject):
        return obj.metadata.annotations or {}
    return dict(_dict_meta(obj).get("annotations") or {})


def owner_references(obj: Any) -> list[dict[str, Any]]:
    """Owner references as wire-form dicts (``apiVersion``, ``kind``, ``name``, ``uid``, ``controller``)."""
    if isinstance(obj, KubeObject):
        return [r.model_dump(by_alias=True, exclude_none=True) for r in obj.metadata.owner_references or []]
    return list(_dict_meta(obj).get("ownerReferences") or [])
