"""@rbac, rbac_rules, merge_rules and generate_cluster_role: recording, validation, exact merging."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyctrl.rbacgen import (
    EVENT_RULES,
    LEADER_ELECTION_RULES,
    PolicyRule,
    RBACError,
    generate_cluster_role,
    merge_rules,
    rbac,
    rbac_rules,
)


@rbac(groups=[""], resources=["pods"], verbs=["get", "list", "watch"])
@rbac(groups=["apps"], resources=["statefulsets"], verbs=["*"])
class Base:
    pass


@rbac(groups=[""], resources=["configmaps"], verbs=["get"], resource_names=["settings"])
class Derived(Base):
    pass


def test_stacked_decorators_record_rules_in_source_order() -> None:
    assert rbac_rules(Base) == (
        PolicyRule(api_groups=("",), resources=("pods",), verbs=("get", "list", "watch")),
        PolicyRule(api_groups=("apps",), resources=("statefulsets",), verbs=("*",)),
    )


def test_a_subclass_adds_to_its_bases_rules_without_changing_them() -> None:
    assert rbac_rules(Derived) == (
        *rbac_rules(Base),
        PolicyRule(api_groups=("",), resources=("configmaps",), verbs=("get",), resource_names=("settings",)),
    )
    assert len(rbac_rules(Base)) == 2


def test_instances_functions_rules_and_nested_lists_are_sources() -> None:
    @rbac(groups=[""], resources=["secrets"], verbs=["get"])
    async def reconcile(request: object) -> None:
        return None

    secret_rule = PolicyRule(api_groups=("",), resources=("secrets",), verbs=("get",))
    assert rbac_rules(reconcile) == (secret_rule,)
    assert rbac_rules(Derived()) == rbac_rules(Derived)
    assert rbac_rules([Base, [secret_rule, LEADER_ELECTION_RULES]]) == (
        *rbac_rules(Base),
        secret_rule,
        *LEADER_ELECTION_RULES,
    )
    assert rbac_rules(object()) == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"groups": [""], "resources": ["pods"], "verbs": "get"},
            "verbs must be a list of strings, not the string",
        ),
        ({"groups": "", "resources": ["pods"], "verbs": ["get"]}, "groups must be a list of strings"),
        ({"groups": [""], "resources": ["pods"], "verbs": []}, "a rule needs verbs"),
        ({"groups": [""], "resources": ["pods"], "verbs": ["GET"]}, "verbs must be lower-case words or '*'"),
        (
            {"resources": ["pods"], "verbs": ["get"]},
            'needs groups (use [""] for the core group) and resources',
        ),
        ({"groups": [""], "verbs": ["get"]}, "needs groups"),
        ({"groups": [""], "resources": [""], "verbs": ["get"]}, "resource names must not be empty"),
        ({"groups": [""], "resources": ["pods"], "urls": ["/metrics"], "verbs": ["get"]}, "not both"),
    ],
)
def test_bad_declarations_fail_at_decoration_time(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(RBACError) as err:
        rbac(**kwargs)
    assert message in str(err.value)


def rule(group: str, resources: str, verbs: str, names: str = "") -> PolicyRule:
    return PolicyRule(
        api_groups=(group,),
        resources=tuple(resources.split()),
        verbs=tuple(verbs.split()),
        resource_names=tuple(names.split()),
    )


def test_merge_unions_verbs_and_groups_resources_with_equal_verbs() -> None:
    merged = merge_rules(
        [
            rule("", "pods", "get list"),
            rule("", "pods", "watch list"),
            rule("", "services", "get list watch"),
            rule("", "events", "create"),
            rule("apps", "statefulsets", "get"),
        ]
    )
    assert merged == [
        rule("", "events", "create"),
        rule("", "pods services", "get list watch"),
        rule("apps", "statefulsets", "get"),
    ]


def test_star_absorbs_verbs_and_named_grants_covered_by_unnamed_ones_disappear() -> None:
    merged = merge_rules(
        [
            rule("", "pods", "get *"),
            rule("", "pods", "delete", "a"),
            rule("", "configmaps", "get"),
            rule("", "configmaps", "get update", "cfg"),
        ]
    )
    assert merged == [
        rule("", "configmaps", "get"),
        rule("", "configmaps", "update", "cfg"),
        rule("", "pods", "*"),
    ]


def test_non_resource_urls_are_merged_after_resource_rules() -> None:
    merged = merge_rules(
        [
            PolicyRule(non_resource_urls=("/metrics",), verbs=("get",)),
            rule("", "pods", "get"),
            PolicyRule(non_resource_urls=("/healthz",), verbs=("get",)),
        ]
    )
    assert merged == [
        rule("", "pods", "get"),
        PolicyRule(non_resource_urls=("/healthz", "/metrics"), verbs=("get",)),
    ]


GROUPS = ["", "apps"]
RESOURCES = ["pods", "leases", "pods/status"]
VERBS = ["get", "list", "update", "*"]
NAMES = ["", "a", "b"]

rules_strategy = st.lists(
    st.builds(
        PolicyRule,
        api_groups=st.lists(st.sampled_from(GROUPS), min_size=1, max_size=2).map(tuple),
        resources=st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=2).map(tuple),
        verbs=st.lists(st.sampled_from(VERBS), min_size=1, max_size=3).map(tuple),
        resource_names=st.lists(st.sampled_from(NAMES[1:]), max_size=2).map(tuple),
    ),
    max_size=8,
)


def allows(rules: list[PolicyRule], group: str, resource: str, name: str, verb: str) -> bool:
    """The RBAC authorizer's decision for one request (no wildcards in groups/resources here)."""
    return any(
        group in r.api_groups
        and resource in r.resources
        and (not r.resource_names or name in r.resource_names)
        and (verb in r.verbs or "*" in r.verbs)
        for r in rules
    )


@given(rules_strategy, st.randoms(use_true_random=False))
def test_merging_grants_exactly_the_same_and_ignores_order_and_duplicates(
    rules: list[PolicyRule], rnd: random.Random
) -> None:
    merged = merge_rules(rules)
    for request in itertools.product(GROUPS, RESOURCES, NAMES, VERBS[:-1]):
        assert allows(merged, *request) == allows(rules, *request), request
    shuffled = rules * 2
    rnd.shuffle(shuffled)
    assert merge_rules(shuffled) == merged


@rbac(groups=["redis.pyctrl.dev"], resources=["redisclusters"], verbs=["get", "list", "watch"])
class Reconciler:
    pass


class Undecorated:
    pass


def test_cluster_role_combines_reconcilers_with_shared_rule_sets() -> None:
    role = generate_cluster_role("op", Reconciler, LEADER_ELECTION_RULES, EVENT_RULES, labels={"app": "op"})
    assert role["apiVersion"] == "rbac.authorization.k8s.io/v1"
    assert role["kind"] == "ClusterRole"
    assert role["metadata"] == {"name": "op", "labels": {"app": "op"}}
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "update"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        {
            "apiGroups": ["redis.pyctrl.dev"],
            "resources": ["redisclusters"],
            "verbs": ["get", "list", "watch"],
        },
    ]


def test_resource_names_are_rendered_when_declared() -> None:
    role = generate_cluster_role("op", rule("", "configmaps", "get", "cfg"))
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"], "verbs": ["get"]}
    ]


def test_a_source_without_rules_or_a_nameless_role_is_an_error() -> None:
    with pytest.raises(RBACError, match="Undecorated declares no RBAC rules; decorate it with @rbac"):
        generate_cluster_role("op", Reconciler, Undecorated)
    with pytest.raises(RBACError, match="needs a name"):
        generate_cluster_role("", Reconciler)
    with pytest.raises(RBACError, match="no sources"):
        generate_cluster_role("op")
