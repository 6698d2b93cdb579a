"""generate_crd: names, scope, subresources, printer columns, versions, and clear errors for bad input."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar

import pytest
from pydantic import Field

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import Condition, KubeModel, KubeObject
from pyctrl.crdgen import (
    CRDGenerationError,
    CRDMeta,
    PrinterColumn,
    ScaleSubresource,
    generate_crd,
    render_crds,
    resolve_path,
)

GROUP = "test.crdgen.pyctrl.dev"


class GizmoSpec(KubeModel):
    replicas: int = Field(default=1, ge=0)
    mode: str = "fast"


class GizmoStatus(KubeModel):
    ready_replicas: int = 0
    selector: str | None = None
    conditions: list[Condition] = []


class Gizmo(KubeObject):
    """A gizmo."""

    gvk = GroupVersionKind(GROUP, "v1", "Gizmo")
    crd: ClassVar[CRDMeta] = CRDMeta(
        plural="gizmos",
        short_names=("gz",),
        categories=("all",),
        status_subresource=True,
        scale=ScaleSubresource(".spec.replicas", ".status.readyReplicas", ".status.selector"),
        printer_columns=(
            PrinterColumn("Replicas", "integer", ".spec.replicas"),
            PrinterColumn("Ready", "string", '.status.conditions[?(@.type=="Ready")].status', priority=1),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )
    spec: GizmoSpec = Field(default_factory=GizmoSpec)
    status: GizmoStatus | None = None


class Bare(KubeObject):
    gvk = GroupVersionKind(GROUP, "v1", "Bare")
    crd: ClassVar[CRDMeta] = CRDMeta(plural="bares", scope="Cluster")
    spec: dict[str, Any] | None = None


def test_names_scope_and_version_come_from_gvk_and_crd_meta() -> None:
    crd = generate_crd(Gizmo)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"] == {"name": f"gizmos.{GROUP}"}
    assert crd["spec"]["group"] == GROUP
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"] == {
        "kind": "Gizmo",
        "listKind": "GizmoList",
        "plural": "gizmos",
        "singular": "gizmo",
        "shortNames": ["gz"],
        "categories": ["all"],
    }
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)


def test_optional_names_are_omitted_and_cluster_scope_is_kept() -> None:
    crd = generate_crd(Bare)
    assert crd["spec"]["scope"] == "Cluster"
    assert set(crd["spec"]["names"]) == {"kind", "listKind", "plural", "singular"}
    (version,) = crd["spec"]["versions"]
    assert "subresources" not in version
    assert "additionalPrinterColumns" not in version


def test_type_meta_is_typed_and_metadata_is_not_expanded() -> None:
    schema = generate_crd(Gizmo)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["description"] == "A gizmo."
    assert schema["properties"]["apiVersion"]["type"] == "string"
    assert schema["properties"]["kind"]["type"] == "string"
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert "required" not in schema
    assert schema["properties"]["spec"]["default"] == {"replicas": 1, "mode": "fast"}


def test_subresources_and_printer_columns_are_rendered() -> None:
    version = generate_crd(Gizmo)["spec"]["versions"][0]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.readyReplicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    assert version["additionalPrinterColumns"] == [
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
            "priority": 1,
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def test_generation_is_deterministic() -> None:
    assert generate_crd(Gizmo) == generate_crd(Gizmo)
    assert render_crds([Gizmo, Bare]) == render_crds([Gizmo, Bare])
    assert list(render_crds([Gizmo, Bare])) == [f"{GROUP}_gizmos.yaml", f"{GROUP}_bares.yaml"]


def test_resolve_path_follows_properties_and_list_items() -> None:
    schema = generate_crd(Gizmo)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert resolve_path(schema, ".spec.replicas")["type"] == "integer"
    assert resolve_path(schema, ".status.conditions[0].type")["type"] == "string"
    with pytest.raises(CRDGenerationError, match=r"\.status has no field 'readyReplica' \(fields: "):
        resolve_path(schema, ".status.readyReplica")


class GizmoV1beta1(Gizmo):
    gvk = GroupVersionKind(GROUP, "v1beta1", "Gizmo")
    crd: ClassVar[CRDMeta] = dataclasses.replace(Gizmo.crd, storage=False)


class GizmoV1alpha1(Gizmo):
    gvk = GroupVersionKind(GROUP, "v1alpha1", "Gizmo")
    crd: ClassVar[CRDMeta] = dataclasses.replace(Gizmo.crd, storage=False, served=False)


def test_models_of_one_kind_become_versions_ordered_by_priority() -> None:
    crd = generate_crd(GizmoV1alpha1, Gizmo, GizmoV1beta1)
    versions = [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]]
    assert versions == [("v1", True, True), ("v1beta1", True, False), ("v1alpha1", False, False)]
    assert list(render_crds([GizmoV1alpha1, Gizmo, Bare])) == [f"{GROUP}_gizmos.yaml", f"{GROUP}_bares.yaml"]


WIDGET_GVK = GroupVersionKind(GROUP, "v1", "Widget")
WIDGET_CRD = CRDMeta(plural="widgets")
BAD_SCOPE: Any = "Global"


def model(
    name: str = "Widget",
    *,
    gvk: GroupVersionKind | None = WIDGET_GVK,
    crd: CRDMeta | None = WIDGET_CRD,
    base: type[KubeModel] = KubeObject,
    with_status: bool = True,
) -> Any:
    """A model class built on the fly (possibly broken on purpose: that is what is tested)."""
    namespace: dict[str, Any] = {"__annotations__": {"spec": GizmoSpec}, "spec": GizmoSpec()}
    if with_status:
        namespace["__annotations__"]["status"] = GizmoStatus | None
        namespace["status"] = None
    if gvk is not None:
        namespace["__annotations__"]["gvk"] = ClassVar[GroupVersionKind]
        namespace["gvk"] = gvk
    if crd is not None:
        namespace["__annotations__"]["crd"] = ClassVar[CRDMeta]
        namespace["crd"] = crd
    return type(name, (base,), namespace)


def scale(**kwargs: str) -> CRDMeta:
    return CRDMeta(plural="widgets", scale=ScaleSubresource(**kwargs))


def column(name: str, type_: Any, path: str, priority: int = 0) -> CRDMeta:
    return CRDMeta(plural="widgets", printer_columns=(PrinterColumn(name, type_, path, priority=priority),))


BAD_MODELS: list[tuple[str, Any, str]] = [
    (
        "not-an-object",
        model(base=KubeModel),
        "Widget: a CRD model must subclass pyctrl.client.objects.KubeObject",
    ),
    ("no-gvk", model(gvk=None), "Widget: missing gvk; declare gvk = GroupVersionKind("),
    ("no-crd", model(crd=None), "Widget: missing CRD metadata; declare crd: ClassVar[CRDMeta]"),
    ("no-plural", model(crd=CRDMeta()), "Widget: CRDMeta.plural is missing"),
    (
        "core-group",
        model(gvk=GroupVersionKind("", "v1", "Widget")),
        "gvk.group '' must be a lower-case DNS name",
    ),
    ("dotless-group", model(gvk=GroupVersionKind("widgets", "v1", "W")), "gvk.group 'widgets'"),
    (
        "bad-version",
        model(gvk=GroupVersionKind(GROUP, "V1", "Widget")),
        "gvk.version 'V1' must be a DNS label",
    ),
    ("bad-kind", model(gvk=GroupVersionKind(GROUP, "v1", "my widget")), "gvk.kind 'my widget'"),
    ("upper-plural", model(crd=CRDMeta(plural="Widgets")), "CRDMeta plural 'Widgets' must be a lower-case"),
    ("bad-short", model(crd=CRDMeta(plural="widgets", short_names=("w_d",))), "short name 'w_d'"),
    ("bad-scope", model(crd=CRDMeta(plural="widgets", scope=BAD_SCOPE)), "CRDMeta.scope 'Global'"),
    (
        "status-subresource-without-status",
        model(crd=CRDMeta(plural="widgets", status_subresource=True), with_status=False),
        "Widget: status_subresource=True but it has no status field",
    ),
    (
        "scale-missing-field",
        model(crd=scale(spec_replicas_path=".spec.size")),
        "ScaleSubresource.spec_replicas_path '.spec.size': "
        ".spec has no field 'size' (fields: mode, replicas)",
    ),
    (
        "scale-wrong-type",
        model(crd=scale(spec_replicas_path=".spec.mode")),
        "spec_replicas_path '.spec.mode' must point at a field of type integer, not string",
    ),
    (
        "scale-outside-status",
        model(crd=scale(status_replicas_path=".spec.replicas")),
        "status_replicas_path '.spec.replicas' must be a simple path under .status.",
    ),
    (
        "scale-selector-missing",
        model(crd=scale(status_replicas_path=".status.readyReplicas", label_selector_path=".status.labels")),
        "label_selector_path '.status.labels': .status has no field 'labels'",
    ),
    (
        "column-missing-field",
        model(crd=column("Ready", "integer", ".status.ready")),
        "Widget: printer column 'Ready': json_path '.status.ready': .status has no field 'ready'",
    ),
    (
        "column-wrong-type",
        model(crd=column("Mode", "integer", ".spec.mode")),
        "printer column 'Mode': type integer does not fit a string field",
    ),
    ("column-bad-type", model(crd=column("Mode", "text", ".spec.mode")), "type 'text' is not"),
    ("column-relative-path", model(crd=column("Mode", "string", "spec.mode")), "must start with '.'"),
    ("column-negative-priority", model(crd=column("M", "string", ".spec.mode", -1)), "priority must be >= 0"),
]


@pytest.mark.parametrize(("model_", "message"), [m[1:] for m in BAD_MODELS], ids=[m[0] for m in BAD_MODELS])
def test_bad_declarations_raise_errors_naming_model_and_problem(
    model_: type[KubeObject], message: str
) -> None:
    with pytest.raises(CRDGenerationError) as err:
        generate_crd(model_)
    assert message in str(err.value)
    assert str(err.value).startswith("Widget")


def test_duplicate_printer_column_names_are_rejected() -> None:
    meta = CRDMeta(plural="widgets", printer_columns=(PrinterColumn("A", "string", ".spec.mode"),) * 2)
    with pytest.raises(CRDGenerationError, match="printer column 'A': names must be non-empty and unique"):
        generate_crd(model(crd=meta))


def test_versions_must_agree_on_names_and_have_one_storage_version() -> None:
    with pytest.raises(
        CRDGenerationError, match=re.escape("exactly one version must have CRDMeta(storage=True), got none")
    ):
        generate_crd(GizmoV1beta1, GizmoV1alpha1)
    with pytest.raises(CRDGenerationError, match=r"exactly one version .* got \['Gizmo', 'Gizmo'\]"):
        generate_crd(Gizmo, model("Gizmo", gvk=GroupVersionKind(GROUP, "v2", "Gizmo"), crd=Gizmo.crd))
    other_plural = model("GizmoV2", gvk=GroupVersionKind(GROUP, "v2", "Gizmo"), crd=CRDMeta(plural="gadgets"))
    with pytest.raises(CRDGenerationError, match=re.escape("GizmoV2: CRDMeta.plural differs from Gizmo's")):
        generate_crd(Gizmo, other_plural)
    with pytest.raises(CRDGenerationError, match="one CRD holds one group and kind"):
        generate_crd(Gizmo, Bare)
    with pytest.raises(CRDGenerationError, match="version declared twice"):
        generate_crd(Gizmo, Gizmo)


def test_no_models_is_an_error() -> None:
    with pytest.raises(CRDGenerationError, match="at least one model"):
        generate_crd()


def test_storage_version_override_flips_storage_without_touching_the_models() -> None:
    crd = generate_crd(GizmoV1alpha1, Gizmo, GizmoV1beta1, storage_version="v1beta1")
    assert [(v["name"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1", False),
        ("v1beta1", True),
        ("v1alpha1", False),
    ]
    assert Gizmo.crd.storage  # the declaration is unchanged
    with pytest.raises(CRDGenerationError, match=r"storage_version 'v2' is not one of its versions \['v1'"):
        generate_crd(Gizmo, GizmoV1beta1, storage_version="v2")


def deprecated(warning: str | None) -> Any:
    meta = dataclasses.replace(Gizmo.crd, storage=False, deprecated=True, deprecation_warning=warning)
    return model("GizmoOld", gvk=GroupVersionKind(GROUP, "v1alpha2", "Gizmo"), crd=meta)


def test_deprecated_versions_carry_the_flag_and_their_warning() -> None:
    crd = generate_crd(Gizmo, deprecated("v1alpha2 is going away; use v1"))
    old = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    assert (old["deprecated"], old["deprecationWarning"]) == (True, "v1alpha2 is going away; use v1")
    current = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    assert "deprecated" not in current
    assert "deprecationWarning" not in current
    default_text = next(
        v for v in generate_crd(Gizmo, deprecated(None))["spec"]["versions"] if v.get("deprecated")
    )
    assert "deprecationWarning" not in default_text  # the apiserver's own text then names the version


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (CRDMeta(plural="widgets", deprecation_warning="old"), "deprecation_warning needs deprecated=True"),
        (
            CRDMeta(plural="widgets", deprecated=True, deprecation_warning="x" * 257),
            "must be 1-256 printable characters (got 257)",
        ),
        (
            CRDMeta(plural="widgets", deprecated=True, deprecation_warning="a\nb"),
            "must be 1-256 printable characters (got 3)",
        ),
    ],
    ids=["not-deprecated", "too-long", "not-printable"],
)
def test_bad_deprecation_warnings_are_refused(meta: CRDMeta, message: str) -> None:
    with pytest.raises(CRDGenerationError, match=re.escape(message)):
        generate_crd(model(crd=meta))


def test_deprecated_versions_are_marked_per_release_without_touching_the_models() -> None:
    crd = generate_crd(Gizmo, GizmoV1beta1, deprecated_versions={"v1beta1": "use v1"})
    marked = {v["name"]: (v.get("deprecated"), v.get("deprecationWarning")) for v in crd["spec"]["versions"]}
    assert marked == {"v1": (None, None), "v1beta1": (True, "use v1")}
    with pytest.raises(CRDGenerationError, match=r"deprecated_versions names 'v2', not one of"):
        generate_crd(Gizmo, deprecated_versions={"v2": None})
    with pytest.raises(CRDGenerationError, match=r"the deprecation warning of v1 must be 1-256 printable"):
        generate_crd(Gizmo, deprecated_versions={"v1": "\x00"})
