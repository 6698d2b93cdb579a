"""The CRD conversion webhook (controller-runtime ``pkg/webhook/conversion``).

Served at ``/convert`` by ``WebhookBuilder`` when the kind has several versions in the manager's
scheme. The apiserver POSTs an ``apiextensions.k8s.io/v1`` ``ConversionReview`` naming a
``desiredAPIVersion`` and the objects to convert; each goes through the hub (see
:mod:`pyctrl.conversion`).

Guarantees:
- converted objects keep the incoming ``metadata`` and get the desired ``apiVersion``; the one
  exception is ``labels`` and ``annotations`` (the only metadata the apiserver lets a conversion
  change): when the converter carried the metadata over (the converted object has the incoming
  name, generateName, namespace and uid), its labels and annotations are kept, so a converter can
  park a field the other version cannot hold in an annotation (Kubernetes' own round-trip trick);
  a converter that leaves metadata empty gets the incoming labels and annotations;
- an object already in the desired version is returned unchanged;
- any failure (unknown version, an object the version's model rejects, a converter raising)
  answers ``result.status: Failure`` with a message naming the object and the versions, and no
  objects: the apiserver then fails the request that needed the conversion with that message.
"""

from __future__ import annotations

from typing import Any

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import KubeObject
from pyctrl.client.scheme import Scheme, to_dict
from pyctrl.conversion import ConversionError, Hub, versions_of

__all__ = ["ConversionHandler", "convert_review"]


class ConversionHandler:
    """Converts objects of every multi-version kind registered in ``scheme``."""

    def __init__(self, scheme: Scheme) -> None:
        self.scheme = scheme

    def convert(self, obj: dict[str, Any], desired_api_version: str) -> dict[str, Any]:
        if obj.get("apiVersion") == desired_api_version:
            return obj
        kind = str(obj.get("kind", ""))
        src_gvk = GroupVersionKind.from_api_version(str(obj.get("apiVersion", "")), kind)
        dst_gvk = GroupVersionKind.from_api_version(desired_api_version, kind)
        versions = versions_of(self.scheme, src_gvk)
        src_type, dst_type = versions.get(src_gvk.version), versions.get(dst_gvk.version)
        if src_type is None or dst_type is None:
            missing = src_gvk if src_type is None else dst_gvk
            raise ConversionError(f"{missing.api_version} {kind} is not registered in the scheme")
        src = src_type.model_validate(obj)
        hub = src if isinstance(src, Hub) else src.convert_to()  # type: ignore[attr-defined]
        dst: KubeObject = hub if dst_type is type(hub) else dst_type.convert_from(hub)  # type: ignore[attr-defined]
        out = to_dict(dst)
        out["apiVersion"] = desired_api_version
        out["kind"] = kind
        incoming = dict(obj.get("metadata") or {})
        converted = out.get("metadata") or {}
        identity = ("name", "generateName", "namespace", "uid")
        if all(converted.get(k) == incoming.get(k) for k in identity):
            for key in ("labels", "annotations"):
                if converted.get(key):
                    incoming[key] = converted[key]
                else:
                    incoming.pop(key, None)
        out["metadata"] = incoming
        return out


def convert_review(handler: ConversionHandler, review: Any) -> dict[str, Any]:
    """The ``ConversionReview`` answering ``review`` (a parsed request body)."""
    request = review.get("request") if isinstance(review, dict) else None
    uid = str(request.get("uid", "")) if isinstance(request, dict) else ""
    response: dict[str, Any] = {"uid": uid}
    try:
        if (
            not isinstance(review, dict)
            or review.get("kind") != "ConversionReview"
            or not isinstance(request, dict)
        ):
            raise ConversionError("expected an apiextensions.k8s.io/v1 ConversionReview with a request")
        assert isinstance(request, dict)
        desired = str(request.get("desiredAPIVersion") or "")
        converted = []
        for obj in request.get("objects") or []:
            try:
                converted.append(handler.convert(obj, desired))
            except Exception as exc:
                name = (obj.get("metadata") or {}).get("name", "?") if isinstance(obj, dict) else "?"
                source = obj.get("apiVersion") if isinstance(obj, dict) else "?"
                raise ConversionError(f"converting {name} from {source} to {desired}: {exc}") from exc
    except ConversionError as exc:
        response["result"] = {"status": "Failure", "message": str(exc)}
    else:
        response["convertedObjects"] = converted
        response["result"] = {"status": "Success"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}
