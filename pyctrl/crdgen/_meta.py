"""What a CRD needs that a pydantic model cannot say: names, scope, subresources, printer columns.

Mirrors controller-tools' type-level markers (``+kubebuilder:resource``, ``+kubebuilder:subresource``,
``+kubebuilder:printcolumn``, ``+kubebuilder:storageversion``). A model declares them once, as a
class variable read by :func:`pyctrl.crdgen.generate_crd`::

    class RedisCluster(KubeObject):
        gvk = GroupVersionKind("redis.pyctrl.dev", "v1alpha1", "RedisCluster")
        crd = CRDMeta(plural="redisclusters", short_names=("rdc",), status_subresource=True)

These are plain frozen dataclasses: constructing one never fails; every check (names are DNS
labels, paths exist in the schema, column types fit) happens at generation time and raises
:class:`CRDGenerationError` naming the model, so all mistakes surface in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CRDGenerationError", "CRDMeta", "PrinterColumn", "ScaleSubresource"]

Scope = Literal["Namespaced", "Cluster"]
ColumnType = Literal["integer", "number", "string", "boolean", "date"]


class CRDGenerationError(ValueError):
    """A model cannot become a valid CRD; the message names the model and what to fix."""


@dataclass(frozen=True)
class ScaleSubresource:
    """``/scale`` (``+kubebuilder:subresource:scale``): what ``kubectl scale`` and the HPA read/write.

    ``spec_replicas_path`` must point at an integer under ``.spec``, ``status_replicas_path`` at an
    integer under ``.status``, ``label_selector_path`` (optional; needed by the HPA) at a string
    under ``.spec`` or ``.status`` holding a serialised label selector.
    """

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry (``+kubebuilder:printcolumn``).

    ``priority`` 0 columns show in ``kubectl get``; higher ones only with ``-o wide``. ``json_path``
    is checked against the generated schema (``.metadata.*`` is always accepted).
    """

    name: str
    type: ColumnType
    json_path: str
    description: str | None = None
    format: str | None = None
    priority: int = 0


@dataclass(frozen=True)
class CRDMeta:
    """Resource-level CRD settings for one served version of a kind.

    ``plural`` is required (``""`` is reported at generation). ``singular`` defaults to the
    lower-cased kind, ``list_kind`` to ``<Kind>List``. When a kind has several versions (several
    models with the same group and kind), exactly one has ``storage=True`` (or
    ``generate_crd(..., storage_version=...)`` picks it) and all of them agree on the names, scope
    and categories. ``deprecated`` marks a served version deprecated (``+kubebuilder:deprecatedversion``):
    the apiserver returns ``deprecation_warning`` (or its default text naming the version) as a
    ``Warning`` header on every request to it, which kubectl prints.
    """

    plural: str = ""
    singular: str | None = None
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    scope: Scope = "Namespaced"
    list_kind: str | None = None
    status_subresource: bool = False
    scale: ScaleSubresource | None = None
    printer_columns: tuple[PrinterColumn, ...] = ()
    served: bool = True
    storage: bool = True
    deprecated: bool = False
    deprecation_warning: str | None = None
