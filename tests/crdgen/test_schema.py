"""openapi_schema: each pydantic construct becomes its structural OpenAPI v3 form."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import ConfigDict, Field

from pyctrl.client.objects.meta import KubeModel
from pyctrl.crdgen import QUANTITY_PATTERN, CRDGenerationError, Quantity, openapi_schema

INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def prop(model: type[KubeModel], name: str) -> dict[str, Any]:
    properties: dict[str, dict[str, Any]] = openapi_schema(model)["properties"]
    return properties[name]


class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Inner(KubeModel):
    """Inner things."""

    count: int = 1


class Everything(KubeModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    bounded: int = Field(default=3, ge=1, le=10)
    exclusive: float = Field(default=0.5, gt=0, lt=1)
    text: str = Field(min_length=2, max_length=8, pattern="^[a-z]+$")
    described: int = Field(0, description="from Field")
    documented: int = 0
    """from the attribute docstring"""
    literal: Literal["a", "b"] = "a"
    single: Literal["only"] = "only"
    color: Color = Color.BLUE
    level: Level = Level.LOW
    optional: int | None = None
    optional_nested: Inner | None = None
    nested: Inner = Field(default_factory=Inner)
    nested_set: Inner = Inner(count=5)
    items: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list, max_length=4)
    nested_items: list[Inner] = []
    labels: dict[str, str] = {}
    counts: dict[str, int] | None = None
    anything_map: dict[str, Any] = Field(default_factory=dict)
    anything: Any = None
    int_or_string: int | str = 80
    quantity: Quantity = "1Gi"
    tags: set[str] = set()
    snake_case_name: bool = True


def test_bounds_become_minimum_and_maximum() -> None:
    assert prop(Everything, "bounded") == {"type": "integer", "minimum": 1, "maximum": 10, "default": 3}


def test_strict_bounds_become_exclusive_flags_in_openapi_v3_0_style() -> None:
    schema = prop(Everything, "exclusive")
    assert schema["minimum"] == 0
    assert schema["exclusiveMinimum"] is True
    assert schema["maximum"] == 1
    assert schema["exclusiveMaximum"] is True


def test_string_constraints_are_kept() -> None:
    assert prop(Everything, "text") == {
        "type": "string",
        "minLength": 2,
        "maxLength": 8,
        "pattern": "^[a-z]+$",
    }
    assert "text" in openapi_schema(Everything)["required"]


def test_descriptions_come_from_field_attribute_docstrings_and_class_docstrings() -> None:
    assert prop(Everything, "described")["description"] == "from Field"
    assert prop(Everything, "documented")["description"] == "from the attribute docstring"
    assert prop(Everything, "nested")["description"] == "Inner things."


def test_literals_and_enums_become_enum_lists_with_a_type() -> None:
    assert prop(Everything, "literal") == {"type": "string", "enum": ["a", "b"], "default": "a"}
    assert prop(Everything, "single") == {"type": "string", "enum": ["only"], "default": "only"}
    color = prop(Everything, "color")
    assert (color["type"], color["enum"], color["default"]) == ("string", ["red", "blue"], "blue")
    level = prop(Everything, "level")
    assert (level["type"], level["enum"], level["default"]) == ("integer", [1, 2], 1)


def test_optional_becomes_nullable_without_a_null_default() -> None:
    assert prop(Everything, "optional") == {"type": "integer", "nullable": True}
    nested = prop(Everything, "optionalNested")
    assert nested["nullable"] is True
    assert nested["type"] == "object"
    assert "default" not in nested


def test_nested_models_are_inlined_with_their_own_defaults() -> None:
    nested = prop(Everything, "nested")
    assert nested["type"] == "object"
    assert nested["properties"]["count"] == {"type": "integer", "default": 1}
    assert "$ref" not in str(openapi_schema(Everything))


def test_model_defaults_are_emitted_in_full_whether_instance_or_factory() -> None:
    assert prop(Everything, "nested")["default"] == {"count": 1}
    assert prop(Everything, "nestedSet")["default"] == {"count": 5}
    assert prop(Everything, "anythingMap")["default"] == {}
    assert "default" not in prop(Everything, "optionalNested")


def test_lists_carry_item_schemas_and_bounds() -> None:
    items = prop(Everything, "items")
    assert items["type"] == "array"
    assert items["items"] == {"type": "string", "minLength": 1}
    assert (items["maxItems"], items["default"]) == (4, [])
    assert prop(Everything, "nestedItems")["items"]["type"] == "object"


def test_typed_maps_become_additional_properties() -> None:
    assert prop(Everything, "labels") == {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "default": {},
    }
    counts = prop(Everything, "counts")
    assert counts["additionalProperties"] == {"type": "integer"}
    assert counts["nullable"] is True


def test_free_form_maps_and_any_preserve_unknown_fields() -> None:
    anything_map = prop(Everything, "anythingMap")
    assert anything_map["type"] == "object"
    assert anything_map["x-kubernetes-preserve-unknown-fields"] is True
    assert "additionalProperties" not in anything_map
    assert prop(Everything, "anything") == {"x-kubernetes-preserve-unknown-fields": True}


def test_int_or_str_and_quantity_become_int_or_string() -> None:
    ios = prop(Everything, "intOrString")
    assert ios == {"anyOf": INT_OR_STRING, "x-kubernetes-int-or-string": True, "default": 80}
    quantity = prop(Everything, "quantity")
    assert quantity["x-kubernetes-int-or-string"] is True
    assert (quantity["anyOf"], quantity["pattern"], quantity["default"]) == (
        INT_OR_STRING,
        QUANTITY_PATTERN,
        "1Gi",
    )


def test_sets_become_lists_of_type_set() -> None:
    tags = prop(Everything, "tags")
    assert tags["x-kubernetes-list-type"] == "set"
    assert "uniqueItems" not in tags


def test_property_names_are_the_camel_case_wire_names() -> None:
    properties = openapi_schema(Everything)["properties"]
    assert "snakeCaseName" in properties
    assert "snake_case_name" not in properties


def test_extra_allow_is_not_rendered_and_titles_are_dropped() -> None:
    text = str(openapi_schema(Everything))
    assert "additionalProperties': True" not in text
    assert "'title'" not in text


def test_kubernetes_extensions_pass_through_json_schema_extra() -> None:
    class Range(KubeModel):
        model_config = ConfigDict(
            json_schema_extra={"x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "m"}]}
        )
        min: int = 0
        max: int = 0

    assert openapi_schema(Range)["x-kubernetes-validations"] == [
        {"rule": "self.min <= self.max", "message": "m"}
    ]


def test_every_node_of_the_schema_is_typed() -> None:
    def walk(node: dict[str, Any], path: str) -> None:
        exempt = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        assert "type" in node or exempt, path
        for name, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                walk(node[key], f"{path}[{key}]")

    walk(openapi_schema(Everything), "")


class Node(KubeModel):
    children: list[Node] = []


class Pair(KubeModel):
    pair: tuple[int, str] = (1, "a")


class Mixed(KubeModel):
    either: int | Inner = 1


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (Node, "Node: field .children[]: recursive type (Node -> Node)"),
        (Pair, "Pair: field .pair: fixed-length tuples"),
        (Mixed, "Mixed: field .either: a union of integer, object cannot be expressed"),
    ],
)
def test_inexpressible_types_raise_errors_naming_the_field(model: type[KubeModel], message: str) -> None:
    with pytest.raises(CRDGenerationError) as err:
        openapi_schema(model)
    assert message in str(err.value)
