"""Hypothesis strategies drawn from a CRD model's own schema (what crdgen renders from pydantic).

``objects_of(Model)`` draws wire-form dicts (camelCase) of ``Model``'s ``spec`` and ``status`` from
the structural schema ``openapi_schema(Model)`` gives: types, bounds, lengths, patterns, enums,
int-or-string, list-map keys kept unique; each draw is then validated by the model itself, so
only objects both the apiserver's schema and the pydantic rules accept come out (CEL rules that
have no Python counterpart are not needed for conversion, which is what these feed).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from pyctrl.crdgen import openapi_schema

__all__ = ["objects_of", "schema_values"]

_TEXT = st.text(alphabet="abcxyz-019", min_size=1, max_size=6)
_MAX_ITEMS = 2


def schema_values(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values valid against one structural-schema node."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("x-kubernetes-int-or-string"):
        if "pattern" in schema:
            return st.one_of(st.integers(0, 10**6), st.from_regex(schema["pattern"], fullmatch=True))
        return st.one_of(st.integers(0, 100), _TEXT)
    kind = schema.get("type")
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum", -(10**6)), schema.get("maximum", 10**6))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
    if kind == "string":
        if "pattern" in schema:
            pattern = st.from_regex(schema["pattern"], fullmatch=True)
            low, high = schema.get("minLength", 0), schema.get("maxLength", 64)
            return pattern.filter(lambda s: low <= len(s) <= high)
        return st.text(
            alphabet="abcxyz-019 ", min_size=max(schema.get("minLength", 0), 0), max_size=8
        ).filter(lambda s: len(s) <= schema.get("maxLength", 64))
    if kind == "array":
        items = schema_values(schema.get("items", {}), depth + 1)
        keys = schema.get("x-kubernetes-list-map-keys")
        unique_by = (lambda item: tuple(item.get(k) for k in keys)) if keys else None
        return st.lists(items, max_size=0 if depth > 6 else _MAX_ITEMS, unique_by=unique_by)
    if kind == "object" or "properties" in schema:
        if "additionalProperties" in schema and "properties" not in schema:
            values = schema_values(schema["additionalProperties"], depth + 1)
            return st.dictionaries(_TEXT, values, max_size=_MAX_ITEMS)
        return _object(schema, depth)
    return st.just({})


def _object(schema: dict[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = {
        name: schema_values(node, depth + 1)
        for name, node in properties.items()
        if name in required or depth < 6  # deep optional structure adds nothing but time
    }
    optional = [n for n in fields if n not in required]

    @st.composite
    def draw(draw_: st.DrawFn) -> dict[str, Any]:
        present = draw_(st.sets(st.sampled_from(optional))) if optional else set()
        return {n: draw_(s) for n, s in fields.items() if n in required or n in present}

    return draw()


def objects_of(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Wire-form ``{"spec": ..., "status": ...}`` dicts the model accepts."""
    schema = openapi_schema(model)
    properties = schema["properties"]
    parts = {name: schema_values(properties[name]) for name in ("spec", "status") if name in properties}

    def valid(body: dict[str, Any]) -> bool:
        try:
            model.model_validate(body)
        except ValidationError:
            return False
        return True

    return st.fixed_dictionaries(parts).filter(valid)
