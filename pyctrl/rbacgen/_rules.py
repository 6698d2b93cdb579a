"""Permissions declared where they are needed: ``@rbac(...)`` on a reconciler.

Mirrors kubebuilder's ``// +kubebuilder:rbac:groups=…,resources=…,verbs=…`` markers, read by
``controller-gen rbac``: the reconciler that reads Pods says so next to its code::

    @rbac(groups=["redis.pyctrl.dev"], resources=["redisclusters"], verbs=["get", "list", "watch"])
    @rbac(groups=["redis.pyctrl.dev"], resources=["redisclusters/status"], verbs=["update", "patch"])
    class RedisClusterReconciler: ...

Guarantees:

- a bad rule (no verbs, a string where a list belongs, resources together with URLs, upper-case
  verbs) raises :class:`RBACError` at decoration time, naming the problem;
- decorators stack; a class's rules are its own plus those of its base classes (a subclass of a
  reconciler needs what the reconciler needs); decorating a subclass never changes its bases;
- :func:`rbac_rules` accepts a decorated class, instance or function, a :class:`PolicyRule`, or any
  (nested) list of these, so shared rule sets such as :data:`LEADER_ELECTION_RULES` and
  :data:`EVENT_RULES` combine with reconcilers in one call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "EVENT_RULES",
    "LEADER_ELECTION_RULES",
    "METRICS_AUTH_RULES",
    "METRICS_READER_RULES",
    "PolicyRule",
    "RBACError",
    "rbac",
    "rbac_rules",
]

RBAC_ATTRIBUTE = "__pyctrl_rbac__"
_VERB = re.compile(r"^([a-z]+|\*)$")
_T = TypeVar("_T")


class RBACError(ValueError):
    """A permission declaration that cannot become a valid RBAC rule."""


@dataclass(frozen=True)
class PolicyRule:
    """One ``rbac.authorization.k8s.io/v1`` PolicyRule (groups ``""`` is the core group)."""

    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("api_groups", "resources", "verbs", "resource_names", "non_resource_urls"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise RBACError(f"{name} must be a list of strings, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not self.verbs:
            raise RBACError(f"a rule needs verbs: {self}")
        bad = [v for v in self.verbs if not _VERB.match(v)]
        if bad:
            raise RBACError(f"verbs must be lower-case words or '*', got {bad}")
        if self.non_resource_urls:
            if self.api_groups or self.resources or self.resource_names:
                raise RBACError("a rule covers either resources or non-resource URLs, not both")
            return
        if not self.resources or not self.api_groups:
            raise RBACError(
                f'a resource rule needs groups (use [""] for the core group) and resources: {self}'
            )
        if any(not r for r in self.resources):
            raise RBACError("resource names must not be empty")

    def to_dict(self) -> dict[str, Any]:
        """The rule as it appears in a Role's ``rules``."""
        if self.non_resource_urls:
            return {"nonResourceURLs": list(self.non_resource_urls), "verbs": list(self.verbs)}
        out: dict[str, Any] = {"apiGroups": list(self.api_groups), "resources": list(self.resources)}
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        out["verbs"] = list(self.verbs)
        return out


def rbac(
    *,
    groups: Sequence[str] = (),
    resources: Sequence[str] = (),
    verbs: Sequence[str],
    resource_names: Sequence[str] = (),
    urls: Sequence[str] = (),
) -> Callable[[_T], _T]:
    """Record one rule on the decorated class or function (``+kubebuilder:rbac``)."""
    rule = PolicyRule(
        api_groups=_seq("groups", groups),
        resources=_seq("resources", resources),
        verbs=_seq("verbs", verbs),
        resource_names=_seq("resource_names", resource_names),
        non_resource_urls=_seq("urls", urls),
    )

    def decorate(target: _T) -> _T:
        own = vars(target).get(RBAC_ATTRIBUTE, ()) if hasattr(target, "__dict__") else ()
        setattr(target, RBAC_ATTRIBUTE, (rule, *own))  # decorators run bottom-up: keep source order
        return target

    return decorate


def _seq(name: str, value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise RBACError(f"{name} must be a list of strings, not the string {value!r}")
    return tuple(value)


def rbac_rules(source: object) -> tuple[PolicyRule, ...]:
    """Every rule ``source`` declares (see the module docstring for what ``source`` may be)."""
    if isinstance(source, PolicyRule):
        return (source,)
    if isinstance(source, type):
        return tuple(r for cls in reversed(source.__mro__) for r in vars(cls).get(RBAC_ATTRIBUTE, ()))
    if isinstance(source, Iterable) and not isinstance(source, str | bytes):
        return tuple(r for item in source for r in rbac_rules(item))
    own: tuple[PolicyRule, ...] = vars(source).get(RBAC_ATTRIBUTE, ()) if hasattr(source, "__dict__") else ()
    return rbac_rules(type(source)) + own


LEADER_ELECTION_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(api_groups=("coordination.k8s.io",), resources=("leases",), verbs=("get", "create", "update")),
)
"""What ``pyctrl.leaderelection`` needs: get, create and update its Lease."""

EVENT_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(api_groups=("",), resources=("events",), verbs=("create", "patch")),
    PolicyRule(api_groups=("events.k8s.io",), resources=("events",), verbs=("create", "patch")),
)
"""What an event recorder needs, in both the core and the ``events.k8s.io`` groups."""

METRICS_AUTH_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(api_groups=("authentication.k8s.io",), resources=("tokenreviews",), verbs=("create",)),
    PolicyRule(api_groups=("authorization.k8s.io",), resources=("subjectaccessreviews",), verbs=("create",)),
)
"""What the secure metrics server needs (``pyctrl.manager.filters``, kubebuilder's
``metrics_auth_role``): a TokenReview and a SubjectAccessReview per new scraper."""

METRICS_READER_RULES: tuple[PolicyRule, ...] = (PolicyRule(non_resource_urls=("/metrics",), verbs=("get",)),)
"""What a scraper of the secure metrics server is bound to (kubebuilder's ``metrics_reader_role``)."""
