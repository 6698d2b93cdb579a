"""Declared rules → one ClusterRole, merged and sorted (``controller-gen rbac:roleName=…``).

Guarantees of :func:`generate_cluster_role` / :func:`merge_rules`:

- deterministic: the same set of declared rules, in any order and with any duplication, gives the
  same ClusterRole;
- exact: the role grants the union of the declared (group, resource, resource names, verb)
  permissions and nothing more; ``*`` in a rule's verbs absorbs the other verbs; a verb granted on
  every object of a resource is not repeated for named objects of it;
- compact: each output rule has one API group and lists every resource sharing the same verbs
  and resource names;
- a source that declares no rules is an error (a forgotten ``@rbac`` or a wrong reference), so a
  reconciler can not silently be left without permissions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pyctrl.rbacgen._rules import PolicyRule, RBACError, rbac_rules

__all__ = ["generate_cluster_role", "merge_rules"]


def _verbs(verbs: set[str]) -> tuple[str, ...]:
    return ("*",) if "*" in verbs else tuple(sorted(verbs))


def merge_rules(rules: Iterable[PolicyRule]) -> list[PolicyRule]:
    """The smallest sorted list of rules granting exactly what ``rules`` grant together."""
    grants: dict[tuple[str, str, tuple[str, ...]], set[str]] = defaultdict(set)
    url_grants: dict[str, set[str]] = defaultdict(set)
    for rule in rules:
        for url in rule.non_resource_urls:
            url_grants[url].update(rule.verbs)
        names = tuple(sorted(set(rule.resource_names)))
        for group in rule.api_groups:
            for resource in rule.resources:
                grants[group, resource, names].update(rule.verbs)
    by_verbs: dict[tuple[str, tuple[str, ...], tuple[str, ...]], set[str]] = defaultdict(set)
    for (group, resource, names), granted in grants.items():
        verbs = granted
        if names:
            everywhere = grants.get((group, resource, ()), set())
            verbs = set() if "*" in everywhere else granted - everywhere
            if not verbs:
                continue
        by_verbs[group, names, _verbs(verbs)].add(resource)
    merged = [
        PolicyRule(api_groups=(group,), resources=tuple(sorted(resources)), verbs=verbs, resource_names=names)
        for (group, names, verbs), resources in by_verbs.items()
    ]
    merged.sort(key=lambda r: (r.api_groups, r.resources, r.resource_names, r.verbs))
    urls_by_verbs: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for url, verbs in url_grants.items():
        urls_by_verbs[_verbs(verbs)].add(url)
    merged += sorted(
        (
            PolicyRule(non_resource_urls=tuple(sorted(urls)), verbs=verbs)
            for verbs, urls in urls_by_verbs.items()
        ),
        key=lambda r: (r.non_resource_urls, r.verbs),
    )
    return merged


def generate_cluster_role(
    name: str, *sources: object, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A ``ClusterRole`` named ``name`` granting what every source declares (see ``rbac_rules``)."""
    if not name:
        raise RBACError("a ClusterRole needs a name")
    rules: list[PolicyRule] = []
    for source in sources:
        declared = rbac_rules(source)
        if not declared:
            what = getattr(source, "__qualname__", None) or type(source).__qualname__
            raise RBACError(f"{what} declares no RBAC rules; decorate it with @rbac(...)")
        rules += declared
    if not rules:
        raise RBACError(f"ClusterRole {name}: no sources given")
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata,
        "rules": [r.to_dict() for r in merge_rules(rules)],
    }
