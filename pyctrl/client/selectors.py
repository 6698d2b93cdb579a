"""Label and field selectors: parse, render as query parameters, and match in memory.

Mirrors apimachinery ``pkg/labels`` (``labels.Parse``, ``SelectorFromSet``,
``metav1.LabelSelectorAsSelector``) and ``pkg/fields`` (``fields.ParseSelector``).

Guarantees:

- the full label-selector grammar is accepted: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``,
  ``k notin (a,b)``, ``k``, ``!k``, ``k>1``, ``k<1``, comma-joined (all must hold);
- ``str(selector)`` renders a string the apiserver parses to the same selector, so the same
  selector gives the same answer from the apiserver, the cache and the fake client;
- malformed input raises ``ValueError`` naming the offending requirement;
- the empty selector matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldSelector", "Requirement", "Selector"]

_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SET_OPS = re.compile(r"^\s*(?P<key>\S+?)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_CMP_OPS = re.compile(r"^\s*(?P<key>[^=!<>\s]+)\s*(?P<op>==|=|!=|>|<)\s*(?P<value>[^=!<>\s]*)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause: ``key op values``; ``op`` is one of in, notin, =, !=, exists, !, gt, lt."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        match self.op:
            case "exists":
                return has
            case "!":
                return not has
            case "=" | "in":
                return has and labels[self.key] in self.values
            case "!=" | "notin":
                return not has or labels[self.key] not in self.values
            case "gt" | "lt":
                if not has:
                    return False
                try:
                    actual, bound = int(labels[self.key]), int(self.values[0])
                except ValueError:
                    return False
                return actual > bound if self.op == "gt" else actual < bound
        raise AssertionError(self.op)  # pragma: no cover - ops are validated on construction

    def __str__(self) -> str:
        match self.op:
            case "exists":
                return self.key
            case "!":
                return f"!{self.key}"
            case "=" | "!=":
                return f"{self.key}{self.op}{self.values[0]}"
            case "gt":
                return f"{self.key}>{self.values[0]}"
            case "lt":
                return f"{self.key}<{self.values[0]}"
        return f"{self.key} {self.op} ({','.join(sorted(self.values))})"


def _check_key(key: str, clause: str) -> str:
    if not _KEY.match(key) or len(key.rpartition("/")[2]) > 63:
        raise ValueError(f"invalid label key {key!r} in selector clause {clause!r}")
    return key


def _check_value(value: str, clause: str) -> str:
    if not _VALUE.match(value) or len(value) > 63:
        raise ValueError(f"invalid label value {value!r} in selector clause {clause!r}")
    return value


def _split_clauses(text: str) -> list[str]:
    clauses, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ')' in selector {text!r}")
        elif ch == "," and depth == 0:
            clauses.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced '(' in selector {text!r}")
    clauses.append(text[start:])
    return clauses


def _parse_clause(clause: str) -> Requirement:
    stripped = clause.strip()
    if not stripped:
        raise ValueError("empty clause in label selector")
    if m := _SET_OPS.match(stripped):
        values = tuple(_check_value(v.strip(), clause) for v in m["values"].split(",") if v.strip())
        if not values:
            raise ValueError(f"set operator needs at least one value in {clause!r}")
        return Requirement(_check_key(m["key"], clause), m["op"], values)
    if stripped.startswith("!"):
        return Requirement(_check_key(stripped[1:].strip(), clause), "!")
    if m := _CMP_OPS.match(stripped):
        op = {"==": "=", ">": "gt", "<": "lt"}.get(m["op"], m["op"])
        value = m["value"]
        if op in ("gt", "lt") and not re.fullmatch(r"-?\d+", value):
            raise ValueError(f"'{m['op']}' needs an integer in {clause!r}")
        return Requirement(_check_key(m["key"], clause), op, (_check_value(value, clause),))
    return Requirement(_check_key(stripped, clause), "exists")


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector: all requirements must hold. ``Selector()`` matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Parse the apiserver's ``labelSelector`` syntax."""
        if not text.strip():
            return cls()
        return cls(tuple(_parse_clause(c) for c in _split_clauses(text)))

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Selector:
        """Equality on every pair (controller-runtime ``MatchingLabels``)."""
        return cls(
            tuple(
                Requirement(_check_key(k, f"{k}={v}"), "=", (_check_value(v, f"{k}={v}"),))
                for k, v in sorted(labels.items())
            )
        )

    @classmethod
    def from_label_selector(cls, selector: Any) -> Selector:
        """Convert a ``metav1.LabelSelector`` (model or dict with matchLabels/matchExpressions)."""
        if hasattr(selector, "model_dump"):
            selector = selector.model_dump(exclude_none=True)
        if not isinstance(selector, Mapping):
            raise ValueError(f"not a LabelSelector: {selector!r}")
        reqs = list(cls.from_labels(selector.get("matchLabels") or {}).requirements)
        ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
        for expr in selector.get("matchExpressions") or []:
            op = ops.get(expr.get("operator", ""))
            if op is None:
                raise ValueError(f"unknown matchExpressions operator {expr.get('operator')!r}")
            values = tuple(expr.get("values") or ())
            if op in ("in", "notin") and not values:
                raise ValueError(f"operator {expr['operator']} needs values for key {expr.get('key')!r}")
            reqs.append(Requirement(_check_key(str(expr.get("key", "")), str(expr)), op, values))
        return cls(tuple(reqs))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A field selector: ``(field, op, value)`` clauses with op ``=`` or ``!=``, all must hold."""

    clauses: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        if not text.strip():
            return cls()
        out = []
        for clause in text.split(","):
            m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*([^,]*?)\s*", clause)
            if not m:
                raise ValueError(f"invalid field selector clause {clause!r}")
            out.append((m[1], "!=" if m[2] == "!=" else "=", m[3]))
        return cls(tuple(out))

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> FieldSelector:
        """Equality on every pair (controller-runtime ``MatchingFields``)."""
        return cls(tuple((k, "=", str(v)) for k, v in sorted(fields.items())))

    def matches(self, values: Mapping[str, str]) -> bool:
        """``values`` maps a field path to the object's value for it."""
        return all((values.get(f, "") == v) == (op == "=") for f, op, v in self.clauses)

    def __bool__(self) -> bool:
        return bool(self.clauses)

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{v}" for f, op, v in self.clauses)
