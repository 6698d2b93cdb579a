"""Typed objects → an ``apiextensions.k8s.io/v1`` CustomResourceDefinition.

Mirrors controller-tools ``crd`` generator (``controller-gen crd``): one CRD per group and kind,
one entry in ``spec.versions`` per model (a model is one version of a kind).

Guarantees of :func:`generate_crd`:

- the result is a complete, deterministic CRD: the same models always give the same dict;
  versions are ordered by Kubernetes version priority (``v1`` > ``v1beta1`` > ``v1alpha1``);
- when the kind has several versions and one is a ``pyctrl.conversion.Hub``, ``spec.conversion`` is the
  ``Webhook`` strategy at ``/convert`` of the Service ``webhook_service`` (by default
  ``system/webhook-service``, kubebuilder's layout; ``conversionReviewVersions: [v1]``);
  otherwise it is left out (strategy ``None``);
- the storage version is the one model declaring ``CRDMeta(storage=True)``, or the version named
  by ``storage_version`` (an upgrade flips it without touching the models); a version declared
  ``deprecated`` carries ``deprecated: true`` and its ``deprecationWarning``;
- ``openAPIV3Schema`` is structural (see :mod:`._schema`); ``apiVersion``/``kind`` are strings and
  ``metadata`` is ``type: object`` (the apiserver validates it itself);
- everything the apiserver would reject is rejected here first, as :class:`CRDGenerationError`
  naming the model and what to fix: a class that is not a ``KubeObject``, a missing ``gvk`` or
  ``crd`` declaration, an empty plural, names that are not DNS labels, a group without a dot, a
  status subresource without a ``status`` field, scale or printer-column paths that do not exist
  in the schema or have the wrong type, several versions disagreeing on names or storage, a
  ``storage_version`` or ``deprecated_versions`` entry that is not one of the versions, a
  deprecation warning on a version not marked deprecated or one the apiserver would refuse (over
  256 characters, not printable).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import KubeObject
from pyctrl.conversion import Hub
from pyctrl.crdgen._meta import CRDGenerationError, CRDMeta, PrinterColumn, ScaleSubresource
from pyctrl.crdgen._schema import openapi_schema

__all__ = ["generate_crd", "resolve_path"]

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_KIND = re.compile(r"^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$")
_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")
_MAX_WARNING = 256  # the apiserver's limit on deprecationWarning
_COLUMN_TYPES = {"integer": ("integer",), "number": ("integer", "number"), "boolean": ("boolean",)}
_TYPE_META = {
    "apiVersion": {
        "description": "APIVersion defines the versioned schema of this representation of an object. "
        "Servers should convert recognized schemas to the latest internal value, and may reject "
        "unrecognized values.",
        "type": "string",
    },
    "kind": {
        "description": "Kind is a string value representing the REST resource this object represents. "
        "Servers may infer this from the endpoint the client submits requests to. Cannot be updated. "
        "In CamelCase.",
        "type": "string",
    },
    "metadata": {"type": "object"},
}


#: kubebuilder's conversion patch: the webhook Service of a kustomize ``config/default`` layout;
#: deployments (or envtest's ``install_webhooks(conversion_crds=...)``) point it elsewhere.
_CONVERSION_WEBHOOK: dict[str, Any] = {
    "strategy": "Webhook",
    "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/convert"}},
    },
}


def generate_crd(
    *models: type[BaseModel],
    storage_version: str | None = None,
    deprecated_versions: Mapping[str, str | None] | None = None,
    webhook_service: tuple[str, str] = ("webhook-service", "system"),
) -> dict[str, Any]:
    """The CRD of one kind; each model (same group and kind) is one of its versions.

    ``storage_version`` overrides the models' ``CRDMeta.storage`` and ``deprecated_versions``
    (version → warning, ``None`` for the apiserver's default text) adds to their
    ``CRDMeta.deprecated``: the settings of one release of the CRD, the models unchanged.
    ``webhook_service`` is the (name, namespace) of the Service serving ``/convert`` when a
    version is a conversion Hub."""
    if not models:
        raise CRDGenerationError("generate_crd needs at least one model")
    declared = [_declaration(m) for m in models]
    gvk, meta = declared[0]
    for model, other in zip(models[1:], declared[1:], strict=True):
        _check_same_kind((models[0], *declared[0]), (model, *other))
    versions = [v.version for v, _ in declared]
    if len(set(versions)) != len(versions):
        raise CRDGenerationError(f"{gvk.kind}: version declared twice among {_names(models)}")
    if storage_version is None:
        storage = [m.__name__ for m, (_, d) in zip(models, declared, strict=True) if d.storage]
        if len(storage) != 1:
            raise CRDGenerationError(
                f"{gvk.kind}: exactly one version must have CRDMeta(storage=True), got {storage or 'none'}"
            )
    elif storage_version not in versions:
        raise CRDGenerationError(
            f"{gvk.kind}: storage_version {storage_version!r} is not one of its versions {sorted(versions)}"
        )
    entries = sorted(
        (_version(m, g, d) for m, (g, d) in zip(models, declared, strict=True)),
        key=lambda e: _version_priority(e["name"]),
    )
    if storage_version is not None:
        for entry in entries:
            entry["storage"] = entry["name"] == storage_version
    for version, warning in (deprecated_versions or {}).items():
        found: list[dict[str, Any]] = [e for e in entries if e["name"] == version]
        if not found:
            raise CRDGenerationError(
                f"{gvk.kind}: deprecated_versions names {version!r}, not one of {sorted(versions)}"
            )
        if warning is not None and (not warning or len(warning) > _MAX_WARNING or not warning.isprintable()):
            raise CRDGenerationError(
                f"{gvk.kind}: the deprecation warning of {version} must be 1-{_MAX_WARNING} printable "
                f"characters (got {len(warning)})"
            )
        found[0]["deprecated"] = True
        if warning is not None:
            found[0]["deprecationWarning"] = warning
    names: dict[str, Any] = {
        "kind": gvk.kind,
        "listKind": meta.list_kind or f"{gvk.kind}List",
        "plural": meta.plural,
        "singular": meta.singular or gvk.kind.lower(),
    }
    if meta.short_names:
        names["shortNames"] = list(meta.short_names)
    if meta.categories:
        names["categories"] = list(meta.categories)
    spec: dict[str, Any] = {"group": gvk.group, "names": names, "scope": meta.scope, "versions": entries}
    if len(models) > 1 and any(issubclass(m, Hub) for m in models):
        name, namespace = webhook_service
        if not (_DNS_LABEL.match(name) and _DNS_LABEL.match(namespace)):
            raise CRDGenerationError(
                f"{gvk.kind}: webhook_service {webhook_service!r} must be (name, namespace), both DNS labels"
            )
        spec["conversion"] = copy.deepcopy(_CONVERSION_WEBHOOK)
        spec["conversion"]["webhook"]["clientConfig"]["service"].update(name=name, namespace=namespace)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{meta.plural}.{gvk.group}"},
        "spec": spec,
    }


def _names(models: tuple[type[BaseModel], ...]) -> str:
    return ", ".join(m.__name__ for m in models)


def _declaration(model: type[BaseModel]) -> tuple[GroupVersionKind, CRDMeta]:
    name = getattr(model, "__name__", repr(model))
    if not isinstance(model, type) or not issubclass(model, KubeObject):
        raise CRDGenerationError(
            f"{name}: a CRD model must subclass pyctrl.client.objects.KubeObject "
            "(it provides apiVersion, kind and metadata)"
        )
    gvk = getattr(model, "gvk", None)
    if not isinstance(gvk, GroupVersionKind):
        raise CRDGenerationError(
            f"{name}: missing gvk; declare gvk = GroupVersionKind(group, version, kind) on the class"
        )
    meta = getattr(model, "crd", None)
    if not isinstance(meta, CRDMeta):
        raise CRDGenerationError(
            f"{name}: missing CRD metadata; declare crd: ClassVar[CRDMeta] = CRDMeta(plural=...) on the class"
        )
    problems = []
    if not _GROUP.match(gvk.group):
        problems.append(f"gvk.group {gvk.group!r} must be a lower-case DNS name with a dot (example.com)")
    if not _DNS_LABEL.match(gvk.version):
        problems.append(f"gvk.version {gvk.version!r} must be a DNS label such as v1 or v1alpha1")
    if not _KIND.match(gvk.kind):
        problems.append(f"gvk.kind {gvk.kind!r} must be alphanumeric CamelCase")
    if not meta.plural:
        problems.append("CRDMeta.plural is missing (the lower-case resource name, e.g. 'widgets')")
    labels = [("plural", meta.plural), ("singular", meta.singular)]
    labels += [("short name", s) for s in meta.short_names] + [("category", c) for c in meta.categories]
    problems += [
        f"CRDMeta {what} {value!r} must be a lower-case DNS label"
        for what, value in labels
        if value and not (_DNS_LABEL.match(value) and len(value) <= 63)
    ]
    if meta.list_kind is not None and not _KIND.match(meta.list_kind):
        problems.append(f"CRDMeta.list_kind {meta.list_kind!r} must be alphanumeric CamelCase")
    if meta.scope not in ("Namespaced", "Cluster"):
        problems.append(f"CRDMeta.scope {meta.scope!r} must be 'Namespaced' or 'Cluster'")
    warning = meta.deprecation_warning
    if warning is not None:
        if not meta.deprecated:
            problems.append("CRDMeta.deprecation_warning needs deprecated=True")
        if not warning or len(warning) > _MAX_WARNING or not warning.isprintable():
            problems.append(
                f"CRDMeta.deprecation_warning must be 1-{_MAX_WARNING} printable characters "
                f"(got {len(warning)})"
            )
    if problems:
        raise CRDGenerationError(f"{name}: " + "; ".join(problems))
    return gvk, meta


_Declared = tuple[type[BaseModel], GroupVersionKind, CRDMeta]


def _check_same_kind(reference: _Declared, candidate: _Declared) -> None:
    first, gvk, meta = reference
    model, other, other_meta = candidate
    if (other.group, other.kind) != (gvk.group, gvk.kind):
        raise CRDGenerationError(
            f"{model.__name__}: one CRD holds one group and kind; {first.__name__} is "
            f"{gvk.kind}.{gvk.group}, {model.__name__} is {other.kind}.{other.group}"
        )
    for attr in ("plural", "singular", "short_names", "categories", "scope", "list_kind"):
        if getattr(meta, attr) != getattr(other_meta, attr):
            raise CRDGenerationError(
                f"{model.__name__}: CRDMeta.{attr} differs from {first.__name__}'s "
                f"({getattr(other_meta, attr)!r} != {getattr(meta, attr)!r}); all versions share names"
            )


def _version(model: type[BaseModel], gvk: GroupVersionKind, meta: CRDMeta) -> dict[str, Any]:
    schema = openapi_schema(model)
    properties = schema.setdefault("properties", {})
    properties.update(copy.deepcopy(_TYPE_META))
    if "required" in schema:
        schema["required"] = [r for r in schema["required"] if r not in _TYPE_META]
        if not schema["required"]:
            del schema["required"]
    entry: dict[str, Any] = {
        "name": gvk.version,
        "served": meta.served,
        "storage": meta.storage,
        "schema": {"openAPIV3Schema": schema},
    }
    if meta.deprecated:
        entry["deprecated"] = True
        if meta.deprecation_warning is not None:
            entry["deprecationWarning"] = meta.deprecation_warning
    subresources: dict[str, Any] = {}
    if meta.status_subresource:
        if "status" not in properties:
            raise CRDGenerationError(f"{model.__name__}: status_subresource=True but it has no status field")
        subresources["status"] = {}
    if meta.scale is not None:
        subresources["scale"] = _scale(model, schema, meta.scale)
    if subresources:
        entry["subresources"] = subresources
    if meta.printer_columns:
        entry["additionalPrinterColumns"] = _columns(model, schema, meta.printer_columns)
    return entry


def _scale(model: type[BaseModel], schema: dict[str, Any], scale: ScaleSubresource) -> dict[str, Any]:
    checks: list[tuple[str, str, tuple[str, ...], str]] = [
        ("spec_replicas_path", scale.spec_replicas_path, (".spec.",), "integer"),
        ("status_replicas_path", scale.status_replicas_path, (".status.",), "integer"),
    ]
    if scale.label_selector_path is not None:
        checks.append(("label_selector_path", scale.label_selector_path, (".spec.", ".status."), "string"))
    for attr, path, prefixes, expected in checks:
        where = f"{model.__name__}: ScaleSubresource.{attr} {path!r}"
        if not path.startswith(prefixes) or "[" in path:
            raise CRDGenerationError(f"{where} must be a simple path under {' or '.join(prefixes)}")
        leaf = resolve_path(schema, path, where)
        if leaf.get("type") != expected:
            raise CRDGenerationError(
                f"{where} must point at a field of type {expected}, not {leaf.get('type')}"
            )
    out = {"specReplicasPath": scale.spec_replicas_path, "statusReplicasPath": scale.status_replicas_path}
    if scale.label_selector_path is not None:
        out["labelSelectorPath"] = scale.label_selector_path
    return out


def _columns(
    model: type[BaseModel], schema: dict[str, Any], columns: tuple[PrinterColumn, ...]
) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for column in columns:
        where = f"{model.__name__}: printer column {column.name!r}"
        if not column.name or column.name in seen:
            raise CRDGenerationError(f"{where}: names must be non-empty and unique")
        seen.add(column.name)
        if column.type not in ("integer", "number", "string", "boolean", "date"):
            raise CRDGenerationError(
                f"{where}: type {column.type!r} is not integer/number/string/boolean/date"
            )
        if column.priority < 0:
            raise CRDGenerationError(f"{where}: priority must be >= 0")
        if not column.json_path.startswith("."):
            raise CRDGenerationError(f"{where}: json_path {column.json_path!r} must start with '.'")
        if not column.json_path.startswith(".metadata."):
            leaf = resolve_path(schema, column.json_path, f"{where}: json_path {column.json_path!r}")
            allowed = _COLUMN_TYPES.get(column.type, ("string",) if column.type == "date" else ())
            if allowed and "type" in leaf and leaf["type"] not in allowed:
                raise CRDGenerationError(f"{where}: type {column.type} does not fit a {leaf['type']} field")
        entry: dict[str, Any] = {"name": column.name, "type": column.type, "jsonPath": column.json_path}
        if column.description:
            entry["description"] = column.description
        if column.format:
            entry["format"] = column.format
        if column.priority:
            entry["priority"] = column.priority
        out.append(entry)
    return out


def resolve_path(schema: dict[str, Any], path: str, where: str = "path") -> dict[str, Any]:
    """The schema node a JSONPath (``.status.conditions[0].type``) points at, or raise naming it."""
    node, i, walked = schema, 0, ""
    while i < len(path):
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return {}
        if path[i] == "[":
            depth, j = 0, i
            while j < len(path):
                depth += {"[": 1, "]": -1}.get(path[j], 0)
                if depth == 0:
                    break
                j += 1
            if node.get("type") != "array" or j == len(path):
                raise CRDGenerationError(f"{where}: {walked or '<root>'} is not a list")
            node, i, walked = node["items"], j + 1, walked + path[i : j + 1]
            continue
        if path[i] != ".":
            raise CRDGenerationError(f"{where}: malformed path at {path[i:]!r}")
        match = re.match(r"\.([^.\[]+)", path[i:])
        if match is None:
            raise CRDGenerationError(f"{where}: malformed path at {path[i:]!r}")
        name = match.group(1)
        fields = node.get("properties", {})
        if name not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise CRDGenerationError(f"{where}: {walked or '<root>'} has no field {name!r} (fields: {known})")
        node, i, walked = fields[name], i + match.end(), walked + "." + name
    return node


def _version_priority(version: str) -> tuple[int, int, int, str]:
    match = _VERSION.match(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)
