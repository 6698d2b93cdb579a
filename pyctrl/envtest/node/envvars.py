"""Container environment and ``$(VAR)`` expansion (kubelet ``kubecontainer.MakeEnvironmentVariables``
and ``third_party/forked/golang/expansion``).

Guarantees:
- ``expand`` follows Kubernetes exactly: ``$(NAME)`` becomes the value of NAME when NAME is defined,
  and stays ``$(NAME)`` literally when it is not; ``$$`` becomes ``$``; any other ``$`` is kept;
- ``env`` entries are resolved in order and may refer to earlier entries (and to ``envFrom``
  variables), like the kubelet; ``command`` and ``args`` are expanded with the complete environment;
- downward-API ``fieldRef`` supports metadata.name, metadata.namespace, metadata.uid,
  metadata.labels['k'], metadata.annotations['k'], spec.nodeName, spec.serviceAccountName,
  status.hostIP, status.hostIPs, status.podIP and status.podIPs; ``resourceFieldRef`` gives the
  container's limit (or request) in units of the divisor, rounded up, or the node's capacity
  when none is set, as the kubelet does;
- ``static_env`` is the kubelet's ``ExpandContainerCommandOnlyStatic`` environment: exec probes and
  hooks expand ``$(VAR)`` only with literal ``value`` entries (not valueFrom);
- a missing ConfigMap, Secret or key that is not ``optional`` raises ``ContainerConfigError`` (the kubelet's
  ``CreateContainerConfigError``); an optional one is skipped.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

__all__ = [
    "ContainerConfigError",
    "PodFacts",
    "build_env",
    "decode_data",
    "expand",
    "field_value",
    "parse_quantity",
    "resource_value",
    "static_env",
]

# (kind, namespace, name) -> the object's data (see ``decode_data``), or None when it does not exist.
SourceLookup = Callable[[str, str, str], Awaitable[dict[str, bytes] | None]]

_SUFFIXES: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


class ContainerConfigError(Exception):
    """A referenced ConfigMap, Secret, key or field does not exist (CreateContainerConfigError)."""


@dataclass(frozen=True)
class PodFacts:
    """What the downward API can show about a Pod on this node."""

    pod: dict[str, Any]
    pod_ip: str
    host_ip: str
    node_capacity: Mapping[str, str]


def expand(text: str, variables: Mapping[str, str]) -> str:
    """Expand ``$(VAR)`` references in ``text`` the way Kubernetes does for env, command and args."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 == n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close == -1:
                out.append(text[i:])
                break
            name = text[i + 2 : close]
            out.append(variables[name] if name in variables else text[i : close + 1])
            i = close + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_quantity(value: str) -> Decimal:
    """A Kubernetes resource quantity (``500m``, ``1Gi``, ``2e3``) as a number."""
    match = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?", value)
    if match is None:
        raise ContainerConfigError(f"invalid quantity {value!r}")
    return Decimal(match.group(1)) * Decimal(_SUFFIXES[match.group(2) or ""])


def resource_value(container: Mapping[str, Any], ref: Mapping[str, Any], facts: PodFacts) -> str:
    """Value of a ``resourceFieldRef`` (limits.cpu, requests.memory, ...) in units of its divisor."""
    resource = str(ref.get("resource", ""))
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or not name:
        raise ContainerConfigError(f"unsupported resourceFieldRef resource {resource!r}")
    resources = container.get("resources") or {}
    raw = (resources.get(kind) or {}).get(name)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(name)
    if raw is None:
        raw = facts.node_capacity.get(name)
    if raw is None:
        raise ContainerConfigError(f"resource {name!r} is unknown on this node")
    divisor = parse_quantity(str(ref.get("divisor") or "1")) or Decimal(1)
    return str(math.ceil(parse_quantity(str(raw)) / divisor))


def static_env(container: Mapping[str, Any]) -> dict[str, str]:
    """The container's ``env`` entries with a literal ``value`` (what exec probes expand with)."""
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "valueFrom" not in item:
            env[item["name"]] = expand(str(item.get("value", "")), env)
    return env


def field_value(path: str, facts: PodFacts) -> str:
    """Value of a downward-API ``fieldRef.fieldPath``."""
    meta = facts.pod.get("metadata", {})
    spec = facts.pod.get("spec", {})
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": facts.host_ip,
        "status.hostIPs": facts.host_ip,
        "status.podIP": facts.pod_ip,
        "status.podIPs": facts.pod_ip,
    }
    if path in simple:
        return str(simple[path])
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted((meta.get(path.split(".")[1]) or {}).items())
        return "\n".join(f'{k}="{v}"' for k, v in items)
    raise ContainerConfigError(f"unsupported fieldRef fieldPath {path!r}")


async def _key_ref(ref: Mapping[str, Any], kind: str, namespace: str, lookup: SourceLookup) -> str | None:
    name, key, optional = ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional"))
    data = await lookup(kind, namespace, name)
    if data is None:
        if optional:
            return None
        raise ContainerConfigError(f'{kind.lower()} "{name}" not found')
    if key not in data:
        if optional:
            return None
        raise ContainerConfigError(f"couldn't find key {key} in {kind} {namespace}/{name}")
    return data[key].decode(errors="replace")


async def build_env(
    container: Mapping[str, Any],
    facts: PodFacts,
    lookup: SourceLookup,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The container's environment: ``base``, then ``envFrom``, then ``env`` (later wins)."""
    namespace = facts.pod.get("metadata", {}).get("namespace", "")
    env: dict[str, str] = dict(base or {})
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        ref, kind = (
            (source["configMapRef"], "ConfigMap")
            if "configMapRef" in source
            else (source.get("secretRef"), "Secret")
        )
        if ref is None:
            continue
        data = await lookup(kind, namespace, ref.get("name", ""))
        if data is None:
            if ref.get("optional"):
                continue
            raise ContainerConfigError(f'{kind.lower()} "{ref.get("name", "")}" not found')
        env.update({prefix + k: v.decode(errors="replace") for k, v in data.items()})
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" not in item:
            env[name] = expand(str(item.get("value", "")), env)
            continue
        source = item["valueFrom"]
        value: str | None
        if "fieldRef" in source:
            value = field_value(source["fieldRef"].get("fieldPath", ""), facts)
        elif "resourceFieldRef" in source:
            value = resource_value(container, source["resourceFieldRef"], facts)
        elif "configMapKeyRef" in source:
            value = await _key_ref(source["configMapKeyRef"], "ConfigMap", namespace, lookup)
        elif "secretKeyRef" in source:
            value = await _key_ref(source["secretKeyRef"], "Secret", namespace, lookup)
        else:
            raise ContainerConfigError(f"env {name}: unsupported valueFrom {sorted(source)}")
        if value is not None:
            env[name] = value
    return env


def decode_data(obj: Mapping[str, Any], kind: str) -> dict[str, bytes]:
    """The bytes of a ConfigMap (``data`` + base64 ``binaryData``) or Secret (base64 ``data``)."""
    out: dict[str, bytes] = {}
    if kind == "Secret":
        out.update({k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()})
        out.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
    else:
        out.update({k: v.encode() for k, v in (obj.get("data") or {}).items()})
        out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return out
