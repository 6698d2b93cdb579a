"""CRD generation from pydantic models (controller-tools ``controller-gen crd`` for pyctrl).

A typed object (a :class:`~pyctrl.client.objects.KubeObject` subclass with ``gvk``) declares the
rest of its CRD in one class variable, and :func:`generate_crd` turns it into an
``apiextensions.k8s.io/v1`` CustomResourceDefinition with a structural schema::

    class Widget(KubeObject):
        gvk = GroupVersionKind("example.com", "v1", "Widget")
        crd: ClassVar[CRDMeta] = CRDMeta(
            plural="widgets", short_names=("wd",), status_subresource=True,
            scale=ScaleSubresource(".spec.replicas", ".status.replicas", ".status.selector"),
            printer_columns=(PrinterColumn("Replicas", "integer", ".spec.replicas"),),
        )
        spec: WidgetSpec = Field(default_factory=WidgetSpec)
        status: WidgetStatus | None = None

Pieces: :mod:`._meta` (the declarations and :class:`CRDGenerationError`), :mod:`._schema`
(pydantic → structural OpenAPI v3), :mod:`._crd` (the CRD and its checks), :mod:`._types`
(:data:`Quantity`), :mod:`._output` (deterministic YAML, write, staleness check), :mod:`._project`
(``[tool.pyctrl.crdgen]`` in pyproject.toml) and :mod:`._cli` (``python -m pyctrl.crdgen``).
Each module's docstring lists its guarantees.
"""

from pyctrl.crdgen._cli import check_crds, main, render_crds, write_crds
from pyctrl.crdgen._crd import generate_crd, resolve_path
from pyctrl.crdgen._meta import CRDGenerationError, CRDMeta, PrinterColumn, ScaleSubresource
from pyctrl.crdgen._output import check_files, dump_yaml, header, write_files
from pyctrl.crdgen._project import ProjectConfig, import_object, load_config
from pyctrl.crdgen._schema import openapi_schema
from pyctrl.crdgen._types import QUANTITY_PATTERN, Quantity

__all__ = [
    "QUANTITY_PATTERN",
    "CRDGenerationError",
    "CRDMeta",
    "PrinterColumn",
    "ProjectConfig",
    "Quantity",
    "ScaleSubresource",
    "check_crds",
    "check_files",
    "dump_yaml",
    "generate_crd",
    "header",
    "import_object",
    "load_config",
    "main",
    "openapi_schema",
    "render_crds",
    "resolve_path",
    "write_crds",
    "write_files",
]
