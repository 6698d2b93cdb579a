"""Field types with a Kubernetes wire form pydantic does not know: ``Quantity``.

Mirrors apimachinery ``resource.Quantity`` as controller-tools renders it: on the wire an integer
or a string matching :data:`QUANTITY_PATTERN` (``x-kubernetes-int-or-string``); in Python always
the string (``1073741824`` arrives as ``"1073741824"``), so code reading the model has one type to
handle. Booleans and floats are rejected, as the apiserver rejects them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema

__all__ = ["QUANTITY_PATTERN", "Quantity"]

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _int_to_str(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(_int_to_str),
    Field(pattern=QUANTITY_PATTERN),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A resource quantity (``"512Mi"``, ``"1.5"``, ``2``), kept as its string form."""
