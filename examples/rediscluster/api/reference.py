"""The spec reference of the guide (``docs/operator/spec.md``), generated from the pydantic types.

``python -m examples.rediscluster.api.reference`` writes the page: every field of
``RedisCluster.spec`` (and of ``RedisBackup.spec``) with its wire name, type, default, bounds,
its description — the field's docstring, the same text the CRD carries — and a YAML example.
``tests/docs/test_spec_reference.py`` checks the page is current and that its fields and
descriptions are the CRD's, so the reference cannot drift from what the apiserver enforces.

The pod-placement fields (``affinity``, ``tolerations``, ``topologySpreadConstraints``) are
core/v1's types and are documented as one entry each, not field by field.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from examples.rediscluster.api.backup import RedisBackupSpec
from examples.rediscluster.api.rediscluster import RedisClusterSpec
from examples.rediscluster.api.scheduling import (
    Affinity,
    LabelSelector,
    Toleration,
    TopologySpreadConstraint,
)

__all__ = ["EXAMPLES", "OUTPUT", "Field", "fields", "render"]

OUTPUT = Path(__file__).resolve().parents[3] / "docs" / "operator" / "spec.md"
#: core/v1 types: one entry each, not recursed into
_OPAQUE: tuple[type, ...] = (Affinity, LabelSelector, Toleration, TopologySpreadConstraint)

#: an example for each field whose default says nothing (required fields, optional ones)
EXAMPLES: dict[str, object] = {
    "spec.memoryLimit": "256Mi",
    "spec.storageClassName": "fast",
    "spec.auth": {"passwordSecret": {"name": "redis-auth", "key": "password"}},
    "spec.auth.passwordSecret": {"name": "redis-auth"},
    "spec.auth.passwordSecret.name": "redis-auth",
    "spec.users": [{"name": "app", "passwordSecret": {"name": "app-pw"}, "rules": "~app:* +get +set"}],
    "spec.users[].name": "app",
    "spec.users[].passwordSecret": {"name": "app-pw", "key": "password"},
    "spec.users[].passwordSecret.name": "app-pw",
    "spec.users[].rules": "~* +@read",
    "spec.disableDefaultUser": True,
    "spec.tls": {"secretName": "redis-tls"},
    "spec.tls.secretName": "redis-tls",
    "spec.redisConfig": {"maxmemory-policy": "allkeys-lru"},
    "spec.networkPolicy.clients": [
        {
            "namespaceSelector": {"matchLabels": {"team": "shop"}},
            "podSelector": {"matchLabels": {"app": "web"}},
        }
    ],
    "spec.networkPolicy.clients[].podSelector": {"matchLabels": {"app": "web"}},
    "spec.networkPolicy.clients[].namespaceSelector": {"matchLabels": {"team": "shop"}},
    "spec.resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
    "spec.resources.limits": {"cpu": "1", "memory": "1Gi"},
    "spec.resources.requests": {"cpu": "250m", "memory": "256Mi"},
    "spec.affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "demo"}},
                }
            ]
        }
    },
    "spec.tolerations": [{"key": "dedicated", "operator": "Equal", "value": "redis", "effect": "NoSchedule"}],
    "spec.topologySpreadConstraints": [],
    "spec.nodeSelector": {"disk": "ssd"},
    "spec.nodeLoss.forceDeletePods": True,
    "spec.backup": {
        "schedule": "0 3 * * *",
        "keep": 7,
        "destination": {"pvc": {"claimName": "redis-backups"}},
    },
    "spec.backup.schedule": "0 3 * * *",
    "spec.backup.destination": {"pvc": {"claimName": "redis-backups"}},
    "spec.backup.onDelete": True,
    "spec.restoreFrom": {"backupName": "shop-manual"},
    "spec.restoreFrom.backupName": "shop-manual",
    "spec.backup.archive": {"archiveTimeoutSeconds": 60, "retentionDays": 14},
    "spec.backup.archive.archiveTimeoutSeconds": 30,
    "spec.backup.archive.retentionDays": 14,
    "spec.restoreFrom.pointInTime": "2026-12-03T15:20:00Z",
    "spec.restoreFrom.archive": {
        "clusterName": "shop",
        "s3": {
            "endpoint": "https://s3.example.com",
            "bucket": "backups",
            "credentialsSecret": {"name": "s3-creds"},
        },
    },
    "spec.restoreFrom.archive.clusterName": "shop",
    "spec.clusterName": "shop",
    "spec.destination": {"s3": {"endpoint": "https://s3.example.com", "bucket": "backups"}},
}
#: examples of the destination's fields, the same under RedisBackup.spec and RedisCluster.spec.backup
_DESTINATION: dict[str, object] = {
    "pvc": {"claimName": "redis-backups", "path": "shop/latest.rdb"},
    "pvc.claimName": "redis-backups",
    "pvc.path": "shop/latest.rdb",
    "s3": {
        "endpoint": "https://s3.example.com",
        "bucket": "backups",
        "credentialsSecret": {"name": "s3-creds"},
    },
    "s3.endpoint": "https://s3.example.com",
    "s3.bucket": "backups",
    "s3.prefix": "redis/",
    "s3.region": "eu-west-1",
    "s3.credentialsSecret": {"name": "s3-creds"},
    "s3.credentialsSecret.name": "s3-creds",
    "s3.caSecret": {"name": "s3-ca"},
    "s3.caSecret.name": "s3-ca",
}
for _base in ("spec.destination", "spec.backup.destination"):
    EXAMPLES.update({f"{_base}.{key}": value for key, value in _DESTINATION.items()})
EXAMPLES.update({f"spec.restoreFrom.archive.{k}": v for k, v in _DESTINATION.items() if k.startswith("s3")})


@dataclass(frozen=True)
class Field:
    """One documented field: its path on the wire (``spec.users[].name``) and what the page says."""

    path: str
    type: str
    default: object
    description: str
    bounds: str

    @property
    def example(self) -> object:
        if self.path in EXAMPLES:
            return EXAMPLES[self.path]
        if self.default in (None, {}, []):
            raise KeyError(f"{self.path}: no example; add one to EXAMPLES")
        return self.default


def _text(info: FieldInfo) -> str:
    return " ".join((info.description or "").split())


def _model_of(annotation: object) -> tuple[type[BaseModel] | None, bool]:
    """(the model inside ``annotation``, whether it is a list of them)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _model_of(inner[0]) if len(inner) == 1 else (None, False)
    if origin is list:
        model, _ = _model_of(typing.get_args(annotation)[0])
        return model, True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def _type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation) if a is not type(None))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation)).replace("'", '"')
    if origin is list:
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        return "map of string"
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _bounds(info: FieldInfo) -> str:
    words = []
    for meta in info.metadata:
        for attr, label in (
            ("ge", ">="),
            ("le", "<="),
            ("min_length", "length >="),
            ("max_length", "length <="),
        ):
            value = getattr(meta, attr, None)
            if value is not None:
                words.append(f"{label} {value}")
        if (pattern := getattr(meta, "pattern", None)) is not None:
            words.append(f"matches `{pattern}`")
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    for rule in typing.cast("list[dict[str, str]]", extra.get("x-kubernetes-validations", [])):
        words.append(rule.get("message") or "CEL-checked (the refusal names the offending entry)")
    return "; ".join(dict.fromkeys(words))


def fields(model: type[BaseModel], prefix: str = "spec") -> Iterator[Field]:
    """Every field of ``model`` and of the models in it, depth first, in declaration order."""
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}"
        default = None if info.default is PydanticUndefined else info.default
        if info.default_factory is not None:
            default = info.default_factory()  # type: ignore[call-arg]
        if isinstance(default, BaseModel):
            default = default.model_dump(by_alias=True, exclude_none=True)
        yield Field(path, _type_name(info.annotation), default, _text(info), _bounds(info))
        inner, many = _model_of(info.annotation)
        if inner is not None and not issubclass(inner, _OPAQUE):
            yield from fields(inner, f"{path}[]" if many else path)


def _nested(path: str, value: object) -> dict[str, Any]:
    """``value`` at ``path`` as YAML would write it: ``spec.users[].name`` -> {spec: {users: [{name}]}}."""
    out: object = value
    for part in reversed(path.split(".")):
        out = {part[:-2]: [out]} if part.endswith("[]") else {part: out}
    return typing.cast("dict[str, Any]", out)


def _section(kind: str, model: type[BaseModel]) -> list[str]:
    lines = []
    for f in fields(model):
        facts = [f"type: {f.type}"]
        if f.default not in (None, {}, []):
            facts.append(f"default: `{json.dumps(f.default)}`")
        if f.bounds:
            facts.append(f.bounds)
        example = yaml.safe_dump(_nested(f.path, f.example), sort_keys=False, default_flow_style=False)
        lines += [f"### {kind} `{f.path}`", "", f"{f.description}", "", f"*{' · '.join(facts)}*", ""]
        lines += ["```yaml", example.rstrip(), "```", ""]
    return lines


def render() -> str:
    """The page (``OUTPUT``)."""
    head = [
        "# Spec reference",
        "",
        "<!-- generated by `python -m examples.rediscluster.api.reference` from the pydantic types of",
        "examples/rediscluster/api/; do not edit (a test fails when it is stale) -->",
        "",
        "Every field of a RedisCluster's and a RedisBackup's `spec`: its description (the same text as",
        "the CRD's, so `kubectl explain rdc.spec.FIELD` says it too), type, default and bounds (what",
        "the apiserver enforces), and an example. Pod-placement fields take core/v1's types.",
        "",
        "## RedisCluster (`redis.pyctrl.dev/v1alpha1`, short name `rdc`)",
        "",
    ]
    backup = ["## RedisBackup (`redis.pyctrl.dev/v1alpha1`, short name `rdb`)", ""]
    lines = (
        head + _section("RedisCluster", RedisClusterSpec) + backup + _section("RedisBackup", RedisBackupSpec)
    )
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.rediscluster.api.reference", description=__doc__
    )
    parser.add_argument(
        "--check", action="store_true", help="fail if the page is stale instead of writing it"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.is_file() or OUTPUT.read_text() != text:
            print(f"{OUTPUT} is stale: run python -m examples.rediscluster.api.reference", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
