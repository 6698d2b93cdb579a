"""RBAC generation from permissions declared on reconcilers (``controller-gen rbac`` for pyctrl).

Reconcilers carry ``@rbac(groups=[...], resources=[...], verbs=[...])`` decorators (kubebuilder's
``+kubebuilder:rbac`` markers); :func:`generate_cluster_role` merges what a set of reconcilers and
rule tuples (:data:`LEADER_ELECTION_RULES`, :data:`EVENT_RULES`, :data:`METRICS_AUTH_RULES`,
:data:`METRICS_READER_RULES`) declare into one deterministic
``ClusterRole``; ``python -m pyctrl.rbacgen MODULE:NAME... --name NAME -o FILE`` writes it.

Pieces: :mod:`._rules` (``PolicyRule``, the decorator, shared rule sets), :mod:`._role` (merging),
:mod:`._cli`. Each module's docstring lists its guarantees.
"""

from pyctrl.rbacgen._cli import main, render_cluster_role
from pyctrl.rbacgen._role import generate_cluster_role, merge_rules
from pyctrl.rbacgen._rules import (
    EVENT_RULES,
    LEADER_ELECTION_RULES,
    METRICS_AUTH_RULES,
    METRICS_READER_RULES,
    PolicyRule,
    RBACError,
    rbac,
    rbac_rules,
)

__all__ = [
    "EVENT_RULES",
    "LEADER_ELECTION_RULES",
    "METRICS_AUTH_RULES",
    "METRICS_READER_RULES",
    "PolicyRule",
    "RBACError",
    "generate_cluster_role",
    "main",
    "merge_rules",
    "rbac",
    "rbac_rules",
    "render_cluster_role",
]
