"""pyctrl.crdgen's public names: the documented list, each importable, nothing private leaking."""

from __future__ import annotations

import pyctrl.crdgen

EXPECTED = {
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
}


def test_all_lists_exactly_the_public_names_and_each_is_importable() -> None:
    assert set(pyctrl.crdgen.__all__) == EXPECTED
    for name in pyctrl.crdgen.__all__:
        assert getattr(pyctrl.crdgen, name) is not None


def test_crd_generation_error_is_a_value_error() -> None:
    assert issubclass(pyctrl.crdgen.CRDGenerationError, ValueError)
