"""The ``status`` writer and generic subresource client of :class:`~pyctrl.client.ApiClient`, and
the request bodies and parameters the writes share.

Mirrors controller-runtime ``client.SubResourceWriter``/``SubResourceClient`` (``Status()``,
``SubResource("scale")``) and ``metav1.DeleteOptions``. Guarantees: status writes go to
``<object>/status`` and answer the whole object; other subresources take and answer their own
type (``Scale`` for ``scale``); server-side apply bodies never carry ``managedFields``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from pyctrl.client.interfaces import Preconditions, PropagationPolicy
from pyctrl.client.objects import KubeObject
from pyctrl.client.patch import Patch, PatchType
from pyctrl.client.scheme import Object, encode, to_dict

if TYPE_CHECKING:
    from pyctrl.client.client import ApiClient

__all__ = ["StatusWriterImpl", "SubResourceClientImpl", "apply_body", "delete_options", "write_params"]

T = TypeVar("T", bound=KubeObject)
ObjT = TypeVar("ObjT", bound=KubeObject | dict[str, Any])


def delete_options(
    *,
    propagation_policy: PropagationPolicy | None = None,
    preconditions: Preconditions | None = None,
    grace_period_seconds: int | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """A ``metav1.DeleteOptions`` body."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if propagation_policy is not None:
        if propagation_policy not in ("Foreground", "Background", "Orphan"):
            raise ValueError(
                f"propagation_policy must be Foreground, Background or Orphan: {propagation_policy!r}"
            )
        body["propagationPolicy"] = propagation_policy
    if preconditions is not None:
        pre = {"uid": preconditions.uid, "resourceVersion": preconditions.resource_version}
        body["preconditions"] = {k: v for k, v in pre.items() if v}
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = grace_period_seconds
    if dry_run:
        body["dryRun"] = ["All"]
    return body


def write_params(dry_run: bool, field_manager: str | None, force: bool | None = None) -> dict[str, Any]:
    return {"dryRun": "All" if dry_run else None, "fieldManager": field_manager, "force": force}


def apply_body(obj: Object) -> bytes:
    data = dict(to_dict(obj))
    meta = dict(data.get("metadata") or {})
    meta.pop("managedFields", None)
    data["metadata"] = meta
    return encode(data)


class StatusWriterImpl:
    """``client.status()``: writes go to ``<object>/status``; the response is the whole object."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def update(self, obj: ObjT, *, dry_run: bool = False, field_manager: str | None = None) -> ObjT:
        return await self._client._put(obj, "status", dry_run, field_manager)

    async def patch(
        self,
        obj: ObjT,
        patch: Patch,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> ObjT:
        return await self._client._patch(
            obj,
            patch_type=patch.patch_type,
            body=patch.data(obj),
            subresource="status",
            dry_run=dry_run,
            field_manager=field_manager,
            force=force,
        )

    async def apply(
        self, obj: ObjT, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> ObjT:
        return await self._client._patch(
            obj,
            patch_type=PatchType.APPLY,
            body=apply_body(obj),
            subresource="status",
            dry_run=dry_run,
            field_manager=field_manager,
            force=force,
        )


class SubResourceClientImpl:
    """``client.subresource(name)``: bodies are the subresource's own type (e.g. ``Scale``)."""

    def __init__(self, client: ApiClient, name: str) -> None:
        self._client, self._name = client, name

    async def _send(self, method: str, obj: Object, body: bytes, content_type: str, dry_run: bool) -> bytes:
        path = await self._client._object_path(obj, self._name)
        return await self._client.transport.request(
            method, path, params=write_params(dry_run, None), body=body, content_type=content_type
        )

    async def get(self, obj: Object, into: type[T]) -> T:
        path = await self._client._object_path(obj, self._name)
        return into.model_validate_json(await self._client.transport.request("GET", path))

    async def create(self, obj: Object, body: Object, *, dry_run: bool = False) -> dict[str, Any]:
        data = await self._send("POST", obj, encode(body), "application/json", dry_run)
        result: dict[str, Any] = orjson.loads(data) if data else {}
        return result

    async def update(self, obj: Object, body: T, *, dry_run: bool = False) -> T:
        data = await self._send("PUT", obj, encode(body), "application/json", dry_run)
        return type(body).model_validate_json(data)

    async def patch(self, obj: Object, patch: Patch, into: type[T], *, dry_run: bool = False) -> T:
        data = await self._send("PATCH", obj, patch.data(obj), patch.patch_type.value, dry_run)
        return into.model_validate_json(data)
