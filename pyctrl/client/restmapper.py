"""REST mapping: which URL serves a kind (plural resource name, namespaced or not).

Mirrors controller-runtime's lazy dynamic ``RESTMapper`` (``pkg/client/apiutil``): discovery is
fetched per group-version on first use, cached, and fetched again once when a kind is missing
from the cached list (a CRD installed after start-up). :class:`StaticRESTMapper` serves the fake
client without an apiserver.

Guarantees:

- a kind the apiserver does not serve raises :class:`~pyctrl.client.errors.UnknownKind` naming the
  group-version and the kinds it does serve — after at most one refresh, never a hang;
- concurrent look-ups of one group-version share one discovery request;
- :func:`resource_path` builds the canonical URL path (``/api/v1/…`` for the core group,
  ``/apis/<group>/<version>/…`` otherwise), rejecting a namespace for a cluster-scoped kind and
  requiring one for a namespaced kind unless listing across namespaces.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from pyctrl.client.errors import NotFound, UnknownKind
from pyctrl.client.gvk import GroupVersionKind, GroupVersionResource
from pyctrl.client.rest import HTTPRequest, HTTPTransport, parse_json

__all__ = ["DiscoveryRESTMapper", "RESTMapper", "RESTMapping", "StaticRESTMapper", "resource_path"]


@dataclass(frozen=True, slots=True)
class RESTMapping:
    gvk: GroupVersionKind
    resource: GroupVersionResource
    namespaced: bool


class RESTMapper(Protocol):
    async def mapping(self, gvk: GroupVersionKind) -> RESTMapping: ...


def _gv_path(group: str, version: str) -> str:
    return f"/api/{version}" if not group else f"/apis/{group}/{version}"


# Names and namespaces are DNS labels or subdomains: nothing in them needs quoting (quote() would
# leave them as they are, at a few thousand instructions each).
_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]*").fullmatch


def _quote(segment: str) -> str:
    return segment if _UNRESERVED(segment) else quote(segment, safe="")


def resource_path(
    mapping: RESTMapping,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
    all_namespaces: bool = False,
) -> str:
    """The URL path of a collection, an object or an object's subresource."""
    gvr = mapping.resource
    parts = [_gv_path(gvr.group, gvr.version)]
    if mapping.namespaced:
        if namespace:
            parts.append(f"namespaces/{_quote(namespace)}")
        elif name is not None or not all_namespaces:
            raise ValueError(f"{mapping.gvk.kind} is namespaced: a namespace is required")
    elif namespace:
        raise ValueError(f"{mapping.gvk.kind} is cluster-scoped: it takes no namespace")
    parts.append(gvr.resource)
    if name is not None:
        if not name:
            raise ValueError(f"{mapping.gvk.kind}: an object name is required")
        parts.append(_quote(name))
        if subresource:
            parts.append(subresource)
    return "/".join(parts)


class DiscoveryRESTMapper:
    """Maps kinds through the apiserver's discovery documents, cached per group-version."""

    def __init__(self, transport: HTTPTransport) -> None:
        self._transport = transport
        self._cache: dict[tuple[str, str], dict[str, RESTMapping]] = {}
        self._inflight: dict[tuple[str, str], asyncio.Future[dict[str, RESTMapping]]] = {}

    async def mapping(self, gvk: GroupVersionKind) -> RESTMapping:
        gv = (gvk.group, gvk.version)
        kinds = self._cache.get(gv)
        if kinds is None or gvk.kind not in kinds:
            kinds = await self._refresh(gv)
        found = kinds.get(gvk.kind)
        if found is None:
            served = ", ".join(sorted(kinds)) or "nothing"
            raise UnknownKind(f"no kind {gvk.kind!r} in {gvk.api_version} (the apiserver serves: {served})")
        return found

    def invalidate(self) -> None:
        """Forget every cached group-version."""
        self._cache.clear()

    async def _refresh(self, gv: tuple[str, str]) -> dict[str, RESTMapping]:
        pending = self._inflight.get(gv)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[dict[str, RESTMapping]] = asyncio.get_running_loop().create_future()
        self._inflight[gv] = fut
        try:
            kinds = await self._discover(*gv)
            self._cache[gv] = kinds
            fut.set_result(kinds)
            return kinds
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters (if any) re-raise it
            raise
        finally:
            del self._inflight[gv]

    async def _discover(self, group: str, version: str) -> dict[str, RESTMapping]:
        try:
            path = _gv_path(group, version)
            doc: Any = parse_json(await self._transport.send(HTTPRequest("GET", path)), f"GET {path}")
        except NotFound as exc:
            api_version = f"{group}/{version}" if group else version
            raise UnknownKind(f"the apiserver does not serve {api_version}") from exc
        kinds: dict[str, RESTMapping] = {}
        for res in doc.get("resources") or []:
            name = str(res.get("name", ""))
            if not name or "/" in name:  # subresources ("pods/status") are not kinds
                continue
            gvk = GroupVersionKind(group, version, str(res.get("kind", "")))
            kinds.setdefault(
                gvk.kind,
                RESTMapping(gvk, GroupVersionResource(group, version, name), bool(res.get("namespaced"))),
            )
        return kinds


#: Plurals and scopes of the kinds the fake client knows without discovery.
_STATIC: dict[str, tuple[str, bool]] = {
    "ConfigMap": ("configmaps", True),
    "Secret": ("secrets", True),
    "Service": ("services", True),
    "Pod": ("pods", True),
    "PersistentVolumeClaim": ("persistentvolumeclaims", True),
    "Event": ("events", True),
    "Namespace": ("namespaces", False),
    "Node": ("nodes", False),
    "StatefulSet": ("statefulsets", True),
    "Deployment": ("deployments", True),
    "PodDisruptionBudget": ("poddisruptionbudgets", True),
    "Lease": ("leases", True),
    "ServiceAccount": ("serviceaccounts", True),
    "CustomResourceDefinition": ("customresourcedefinitions", False),
    "ClusterRole": ("clusterroles", False),
    "ClusterRoleBinding": ("clusterrolebindings", False),
    "PersistentVolume": ("persistentvolumes", False),
}


class StaticRESTMapper:
    """A fixed table (built-ins plus what :meth:`add` registers); guesses ``<kind>s``, namespaced,
    for anything else — the fake client's mapper."""

    def __init__(self) -> None:
        self._extra: dict[GroupVersionKind, RESTMapping] = {}

    def add(self, gvk: GroupVersionKind, plural: str, *, namespaced: bool = True) -> None:
        self._extra[gvk] = RESTMapping(gvk, GroupVersionResource(gvk.group, gvk.version, plural), namespaced)

    async def mapping(self, gvk: GroupVersionKind) -> RESTMapping:
        return self.mapping_sync(gvk)

    def mapping_sync(self, gvk: GroupVersionKind) -> RESTMapping:
        if gvk in self._extra:
            return self._extra[gvk]
        plural, namespaced = _STATIC.get(gvk.kind, (gvk.kind.lower() + "s", True))
        return RESTMapping(gvk, GroupVersionResource(gvk.group, gvk.version, plural), namespaced)
