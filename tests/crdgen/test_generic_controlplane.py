"""A small CRD defined here, generated and installed on a real apiserver: every construct behaves.

Proves on the apiserver what ``test_schema`` proves on the dict: the schema is accepted as
structural, defaults apply (nested ones included), bounds/enums/patterns/list sets/CEL rules are
enforced with messages naming the field, nullable fields take ``null``, free-form fields keep
anything, and unknown fields of typed objects are pruned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import pytest
from pydantic import ConfigDict, Field

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import KubeModel, KubeObject
from pyctrl.crdgen import CRDMeta, PrinterColumn, Quantity, write_crds
from pyctrl.envtest import Environment
from pyctrl.envtest._http import ApiError

pytestmark = pytest.mark.controlplane

GROUP = "generic.crdgen.pyctrl.dev"


class Limits(KubeModel):
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [{"rule": "self.low <= self.high"}]}
    )

    low: int = 0
    high: int = 10


class GadgetSpec(KubeModel):
    size: int = Field(default=2, ge=1, le=5)
    ratio: float = Field(default=0.5, gt=0, le=1)
    mode: Literal["fast", "safe"] = "safe"
    name_tag: Annotated[str, Field(pattern="^[a-z]+$")] = "gadget"
    limits: Limits = Field(default_factory=Limits)
    labels: dict[str, str] = Field(default_factory=dict)
    tags: set[str] = Field(default_factory=set)
    note: str | None = None
    payload: dict[str, Any] | None = None
    anything: Any = None
    port: int | str = 80
    memory: Quantity | None = None


class Gadget(KubeObject):
    """A cluster-scoped test gadget."""

    gvk = GroupVersionKind(GROUP, "v1", "Gadget")
    crd: ClassVar[CRDMeta] = CRDMeta(
        plural="gadgets",
        scope="Cluster",
        printer_columns=(PrinterColumn("Mode", "string", ".spec.mode"),),
    )
    spec: GadgetSpec = Field(default_factory=GadgetSpec)


@pytest.fixture(scope="module")
def gadgets(envtest: Environment, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("gadget-crd")
    write_crds([Gadget], out)
    assert envtest.install_crds([out]) == [f"gadgets.{GROUP}"]
    return f"/apis/{GROUP}/v1/gadgets"


@pytest.fixture
def gadget_name(envtest: Environment, gadgets: str, request: pytest.FixtureRequest) -> Any:
    name = request.node.name.lower().replace("_", "-")[:50].strip("-[]")
    yield name
    try:
        envtest.http.request("DELETE", f"{gadgets}/{name}")
    except ApiError as exc:
        if exc.code != 404:
            raise


def post(envtest: Environment, gadgets: str, name: str, spec: Any) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}
    created: dict[str, Any] = envtest.http.request("POST", gadgets, body)
    return created


def test_generated_crd_is_structural_and_established(envtest: Environment, gadgets: str) -> None:
    crd = envtest.http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{GROUP}")
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert "NonStructuralSchema" not in conditions
    assert crd["spec"]["scope"] == "Cluster"


def test_apiserver_fills_flat_and_nested_defaults_like_the_model(
    envtest: Environment, gadgets: str, gadget_name: str
) -> None:
    created = post(envtest, gadgets, gadget_name, {})
    assert created["spec"] == GadgetSpec().model_dump(mode="json", exclude_none=True)
    assert created["spec"]["limits"] == {"low": 0, "high": 10}
    # null on a non-nullable field with a default is pruned, then defaulted (apiserver rule)
    nulled = post(envtest, gadgets, gadget_name + "-null", {"size": None, "limits": {"low": None}})
    envtest.http.request("DELETE", f"{gadgets}/{gadget_name}-null")
    assert (nulled["spec"]["size"], nulled["spec"]["limits"]) == (2, {"low": 0, "high": 10})


def test_free_form_fields_keep_anything_and_typed_objects_prune_unknown_fields(
    envtest: Environment, gadgets: str, gadget_name: str
) -> None:
    spec = {
        "payload": {"deep": {"list": [1, "two", {"three": None}]}},
        "anything": ["x", 1, {"y": True}],
        "limits": {"low": 1, "high": 2, "unknown": "dropped"},
        "unknownTopLevel": 1,
        "note": None,
        "port": "http",
        "memory": 1024,
    }
    created = post(envtest, gadgets, gadget_name, spec)["spec"]
    assert created["payload"] == spec["payload"]
    assert created["anything"] == spec["anything"]
    assert created["limits"] == {"low": 1, "high": 2}
    assert "unknownTopLevel" not in created
    assert created["note"] is None
    assert (created["port"], created["memory"]) == ("http", 1024)
    model = Gadget.model_validate(post(envtest, gadgets, gadget_name + "-b", {"memory": 1024}))
    envtest.http.request("DELETE", f"{gadgets}/{gadget_name}-b")
    assert model.spec.memory == "1024"


BAD = [
    ({"size": 6}, "spec.size"),
    ({"ratio": 0}, "spec.ratio"),
    ({"ratio": 1.5}, "spec.ratio"),
    ({"mode": "reckless"}, "spec.mode"),
    ({"nameTag": "Upper"}, "spec.nameTag"),
    ({"tags": ["a", "a"]}, "spec.tags"),
    ({"labels": {"a": 1}}, "spec.labels.a"),
    ({"limits": {"low": 5, "high": 1}}, "self.low <= self.high"),
    ({"port": 1.5}, "spec.port"),
    ({"memory": "much"}, "spec.memory"),
]


@pytest.mark.parametrize(("spec", "field"), BAD, ids=[f for _, f in BAD])
def test_constraint_violations_are_rejected_with_422_naming_the_field(
    envtest: Environment, gadgets: str, spec: dict[str, Any], field: str
) -> None:
    with pytest.raises(ApiError) as err:
        post(envtest, gadgets, "bad", spec)
    assert err.value.code == 422
    assert field in str(err.value)


def test_printer_column_of_a_cluster_scoped_kind(
    envtest: Environment, gadgets: str, gadget_name: str, kubeconfig: Path
) -> None:
    from tests.crdgen._kube import kubectl

    post(envtest, gadgets, gadget_name, {"mode": "fast"})
    out = kubectl(envtest, kubeconfig, "get", f"gadgets.{GROUP}", gadget_name)
    header, row = out.splitlines()
    assert header.split() == ["NAME", "MODE"]
    assert row.split() == [gadget_name, "fast"]
