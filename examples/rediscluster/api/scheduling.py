"""Where the RedisCluster's pods may run: core/v1 scheduling types and the spreading default.

The types mirror ``k8s.io/api/core/v1`` (``Affinity``, ``Toleration``,
``TopologySpreadConstraint`` and what they contain) field for field, with the enums the apiserver
accepts, so ``spec.affinity``, ``spec.tolerations`` and ``spec.topologySpreadConstraints`` are
checked by the CRD schema (and :meth:`RedisClusterSpec.model_validate`) instead of failing later
when the StatefulSet is written. :func:`pod_scheduling` renders them into the pod template.

The default, when the spec sets neither ``affinity`` nor ``topologySpreadConstraints``: pods of
one cluster avoid sharing a node (pod anti-affinity on ``kubernetes.io/hostname``) and spread over
zones (``topology.kubernetes.io/zone``, maxSkew 1). Both are **preferred** (``preferred…`` /
``ScheduleAnyway``), not required: a one-node development cluster, or more replicas than nodes,
still runs every pod, and a lost node's pod can be recreated on a node that already holds one. The
price is that the scheduler may co-locate pods when it must; a user who wants the guarantee that
one node takes at most one pod sets a *required* anti-affinity in ``spec.affinity`` (pods that
cannot be placed then stay Pending and the ``PodsScheduled`` condition says why).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from pyctrl.client.objects.meta import KubeModel

__all__ = [
    "HOSTNAME_KEY",
    "ZONE_KEY",
    "Affinity",
    "LabelSelector",
    "LabelSelectorRequirement",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodAffinity",
    "PodAffinityTerm",
    "PodAntiAffinity",
    "PreferredSchedulingTerm",
    "Toleration",
    "TopologySpreadConstraint",
    "WeightedPodAffinityTerm",
    "pod_scheduling",
]

HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"

_CONFIG = ConfigDict(strict=True, use_attribute_docstrings=True)
_Weight = Field(ge=1, le=100)


class LabelSelectorRequirement(KubeModel):
    """A label selector requirement (metav1)."""

    model_config = _CONFIG
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(KubeModel):
    """A label query over pods (metav1.LabelSelector)."""

    model_config = _CONFIG
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class NodeSelectorRequirement(KubeModel):
    """A node label (or field) requirement."""

    model_config = _CONFIG
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] | None = None


class NodeSelectorTerm(KubeModel):
    """Requirements ANDed together."""

    model_config = _CONFIG
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(KubeModel):
    """Terms ORed together."""

    model_config = _CONFIG
    node_selector_terms: list[NodeSelectorTerm]


class PreferredSchedulingTerm(KubeModel):
    """A weighted node preference."""

    model_config = _CONFIG
    weight: int = _Weight
    preference: NodeSelectorTerm


class NodeAffinity(KubeModel):
    """Node affinity scheduling rules."""

    model_config = _CONFIG
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = None


class PodAffinityTerm(KubeModel):
    """Pods matching the selector, in the topology domain named by topologyKey."""

    model_config = _CONFIG
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    namespace_selector: LabelSelector | None = None
    topology_key: str = Field(min_length=1)
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(KubeModel):
    """A weighted pod (anti-)affinity preference."""

    model_config = _CONFIG
    weight: int = _Weight
    pod_affinity_term: PodAffinityTerm


class PodAffinity(KubeModel):
    """Pod affinity scheduling rules."""

    model_config = _CONFIG
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class PodAntiAffinity(KubeModel):
    """Pod anti-affinity scheduling rules."""

    model_config = _CONFIG
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(KubeModel):
    """Node affinity, pod affinity and pod anti-affinity (core/v1 Affinity)."""

    model_config = _CONFIG
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None


class Toleration(KubeModel):
    """Lets the pods run on nodes with a matching taint (core/v1 Toleration)."""

    model_config = _CONFIG
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class TopologySpreadConstraint(KubeModel):
    """How the pods spread over a topology domain (core/v1 TopologySpreadConstraint)."""

    model_config = _CONFIG
    max_skew: int = Field(ge=1)
    topology_key: str = Field(min_length=1)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: LabelSelector | None = None
    min_domains: int | None = Field(default=None, ge=1)
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: list[str] | None = None


def _dump(model: KubeModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def pod_scheduling(
    selector: dict[str, str],
    affinity: Affinity | None,
    tolerations: list[Toleration] | None,
    spread: list[TopologySpreadConstraint] | None,
    node_selector: dict[str, str] | None,
) -> dict[str, Any]:
    """The pod-spec fields for these settings; ``None`` affinity / spread means the default."""
    match = {"matchLabels": dict(selector)}
    out: dict[str, Any] = {}
    if affinity is None:
        term = {"labelSelector": match, "topologyKey": HOSTNAME_KEY}
        out["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
            }
        }
    elif rendered := _dump(affinity):  # an empty affinity is none (the apiserver drops it)
        out["affinity"] = rendered
    if spread is None:
        out["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE_KEY,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": match,
            }
        ]
    elif spread:
        out["topologySpreadConstraints"] = [_dump(c) for c in spread]
    if tolerations:
        out["tolerations"] = [_dump(t) for t in tolerations]
    if node_selector:
        out["nodeSelector"] = dict(node_selector)
    return out
