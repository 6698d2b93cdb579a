"""pydantic model → structural OpenAPI v3 schema (a CRD version's ``openAPIV3Schema``).

Mirrors controller-tools' schema generation (``crd/schema.go``): where controller-gen reads Go
types and ``+kubebuilder:validation`` markers, this reads pydantic's own JSON Schema for the model
(so every constraint pydantic knows is honoured the same way by the apiserver) and rewrites it into
the structural dialect Kubernetes requires.

Guarantees of :func:`openapi_schema`:

- the result is *structural*: every node has a ``type``, except int-or-string and
  ``x-kubernetes-preserve-unknown-fields`` nodes; no ``$ref``; no ``anyOf``/``oneOf`` except the
  int-or-string form; ``properties`` and ``additionalProperties`` never together;
- property names are the wire (alias) names; ``required`` lists fields without a default;
- ``Field`` bounds become ``minimum``/``maximum`` (``gt``/``lt`` as ``exclusiveMinimum: true``),
  ``minLength``/``maxLength``/``pattern``, ``minItems``/``maxItems``; ``Literal`` and ``Enum`` become
  ``enum``; descriptions come from ``Field(description=...)``, attribute docstrings (with
  ``use_attribute_docstrings``) and class docstrings;
- defaults: a plain default is emitted as is; a ``default_factory`` is called and its result
  emitted; a model default is emitted in full (all its fields, ``None`` ones left out) rather than
  as ``{}`` plus nested defaults, because the apiserver checks a default against CEL rules
  (``x-kubernetes-validations``) *before* filling nested defaults; a ``None`` default is not emitted;
- ``X | None`` becomes ``X`` with ``nullable: true``; ``int | str`` (and :data:`Quantity`) become
  ``x-kubernetes-int-or-string``; ``dict[str, Any]`` and ``Any`` become
  ``x-kubernetes-preserve-unknown-fields: true``; ``dict[str, X]`` becomes ``additionalProperties``;
  ``set[X]`` becomes a list with ``x-kubernetes-list-type: set``;
- ``json_schema_extra`` keys starting with ``x-kubernetes-`` (list types, CEL validations) pass through;
- anything that cannot be expressed (recursive models, other unions, fixed-length tuples, a JSON
  Schema keyword CRDs lack) raises :class:`CRDGenerationError` naming the field path.

``KubeModel``'s ``extra="allow"`` is deliberately *not* rendered as preserve-unknown-fields: the
apiserver prunes unknown fields, as it does for controller-gen CRDs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, NoDefault
from pydantic_core import core_schema

from pyctrl.crdgen._meta import CRDGenerationError

__all__ = ["openapi_schema"]

_PASS_THROUGH = frozenset(
    {
        "type",
        "format",
        "description",
        "maximum",
        "minimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "multipleOf",
        "enum",
        "maxProperties",
        "minProperties",
        "required",
        "nullable",
        "example",
    }
)
_DROPPED = frozenset({"title", "examples", "$defs", "$schema"})
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"


class _Generator(GenerateJsonSchema):
    """pydantic's generator, emitting ``default_factory`` results as defaults."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        return schema.get("default", NoDefault)

    def encode_default(self, dft: Any) -> Any:
        if isinstance(dft, BaseModel):
            return dft.model_dump(mode="json", by_alias=True, exclude_none=True)
        return super().encode_default(dft)


def openapi_schema(model: type[BaseModel], *, owner: str | None = None) -> dict[str, Any]:
    """The structural schema of ``model`` (errors name ``owner``, default the model's name)."""
    raw = model.model_json_schema(by_alias=True, schema_generator=_Generator, mode="validation")
    converter = _Converter(raw.get("$defs", {}), owner or model.__name__)
    return converter.convert(raw, "", ())


class _Converter:
    def __init__(self, defs: dict[str, JsonSchemaValue], owner: str) -> None:
        self._defs = defs
        self._owner = owner

    def _error(self, path: str, message: str) -> CRDGenerationError:
        return CRDGenerationError(f"{self._owner}: field {path or '<root>'}: {message}")

    def convert(self, node: JsonSchemaValue, path: str, stack: tuple[str, ...]) -> dict[str, Any]:
        node, stack = self._inline(node, path, stack)
        if "anyOf" in node or "oneOf" in node:
            return self._union(node, path, stack)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED or key == "additionalProperties":
                continue
            if key in _PASS_THROUGH or key.startswith("x-kubernetes-"):
                out[key] = value
            elif key == "default":
                if value is not None:
                    out["default"] = value
            elif key == "const":
                out["enum"] = [value]
            elif key in ("exclusiveMinimum", "exclusiveMaximum"):
                self._exclusive(out, key, value)
            elif key == "properties":
                out["properties"] = {
                    name: self.convert(sub, f"{path}.{name}", stack) for name, sub in value.items()
                }
            elif key == "items":
                out["items"] = self.convert(value, f"{path}[]", stack)
            elif key == "uniqueItems":
                if value:
                    out["x-kubernetes-list-type"] = "set"
            elif key == "prefixItems":
                raise self._error(path, "fixed-length tuples cannot be expressed in a CRD; use list[X]")
            else:
                raise self._error(path, f"JSON Schema keyword {key!r} is not supported in CRD schemas")
        self._object_shape(node, out, path, stack)
        return self._typed(out, path)

    def _inline(
        self, node: JsonSchemaValue, path: str, stack: tuple[str, ...]
    ) -> tuple[JsonSchemaValue, tuple[str, ...]]:
        while True:
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                if name in stack:
                    chain = " -> ".join((*stack[stack.index(name) :], name))
                    raise self._error(path, f"recursive type ({chain}) cannot be expressed in a CRD")
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                node, stack = {**self._defs[name], **siblings}, (*stack, name)
            elif "allOf" in node and len(node["allOf"]) == 1:
                siblings = {k: v for k, v in node.items() if k != "allOf"}
                node = {**node["allOf"][0], **siblings}
            elif "allOf" in node:
                raise self._error(path, "allOf with several schemas is not supported")
            else:
                return node, stack

    def _union(self, node: JsonSchemaValue, path: str, stack: tuple[str, ...]) -> dict[str, Any]:
        key = "anyOf" if "anyOf" in node else "oneOf"
        rest = {k: v for k, v in node.items() if k not in (key, "discriminator")}
        options = [o for o in node[key] if o != {"type": "null"}]
        nullable = len(options) < len(node[key])
        if len(options) == 1:
            merged = {**options[0], **rest}
            if nullable:
                merged["nullable"] = True
            return self.convert(merged, path, stack)
        branches = [self._inline(o, path, stack)[0] for o in options]
        if sorted(str(b.get("type")) for b in branches) == ["integer", "string"]:
            lifted = {k: v for b in branches for k, v in b.items() if k not in ("type", "title")}
            merged = {**lifted, **rest, _INT_OR_STRING: True}
            if nullable:
                merged["nullable"] = True
            out = self.convert(merged, path, stack)
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            return out
        kinds = ", ".join(str(b.get("type", b.get("title", "?"))) for b in branches)
        raise self._error(
            path,
            f"a union of {kinds} cannot be expressed in a structural schema "
            "(use one type, `int | str`, or `dict[str, Any]`)",
        )

    def _exclusive(self, out: dict[str, Any], key: str, value: Any) -> None:
        if isinstance(value, bool):  # already OpenAPI v3.0 style
            out[key] = value
            return
        bound = "minimum" if key == "exclusiveMinimum" else "maximum"
        current = out.get(bound)
        stricter = max if bound == "minimum" else min
        if current is None or stricter(current, value) == value:
            out[bound] = value
            out[key] = True

    def _object_shape(
        self, node: JsonSchemaValue, out: dict[str, Any], path: str, stack: tuple[str, ...]
    ) -> None:
        extra = node.get("additionalProperties")
        if node.get("properties"):
            out.setdefault("type", "object")
            return  # a model: its declared fields only (extra="allow" is not rendered)
        if extra is True or extra == {} or (node.get("type") == "object" and extra is None):
            out.pop("properties", None)
            out[_PRESERVE] = True
        elif isinstance(extra, dict):
            out.pop("properties", None)
            out["additionalProperties"] = self.convert(extra, f"{path}[*]", stack)
        if "type" not in out and "enum" not in out and not out.get(_INT_OR_STRING):
            out[_PRESERVE] = True  # Any

    def _typed(self, out: dict[str, Any], path: str) -> dict[str, Any]:
        if "type" not in out and not out.get(_INT_OR_STRING) and not out.get(_PRESERVE):
            raise self._error(path, f"has no single type (schema {out!r})")
        if "enum" in out and "type" not in out:
            raise self._error(path, "enum values of mixed types are not supported")
        if out.get("type") == "array" and "items" not in out:
            raise self._error(path, "a list needs an item type")
        return out
