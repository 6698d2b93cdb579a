"""Typed apps/v1 StatefulSet and Deployment, policy/v1 PodDisruptionBudget, coordination.k8s.io/v1 Lease
and the autoscaling/v1 Scale subresource.

Mirrors ``k8s.io/api/{apps,policy,coordination,autoscaling}`` for the fields operators use; other
fields are kept as extras (lossless, see :mod:`pyctrl.client.objects.meta`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.core import PersistentVolumeClaim, PodTemplateSpec
from pyctrl.client.objects.meta import KubeModel, KubeObject, LabelSelector

__all__ = [
    "Deployment",
    "DeploymentSpec",
    "DeploymentStatus",
    "Lease",
    "LeaseSpec",
    "PodDisruptionBudget",
    "PodDisruptionBudgetSpec",
    "PodDisruptionBudgetStatus",
    "Scale",
    "ScaleSpec",
    "ScaleStatus",
    "StatefulSet",
    "StatefulSetSpec",
    "StatefulSetStatus",
]


class StatefulSetSpec(KubeModel):
    selector: LabelSelector | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    replicas: int | None = None
    service_name: str | None = None
    volume_claim_templates: list[PersistentVolumeClaim] | None = None
    pod_management_policy: str | None = None
    update_strategy: dict[str, Any] | None = None
    min_ready_seconds: int | None = None
    persistent_volume_claim_retention_policy: dict[str, Any] | None = None


class StatefulSetStatus(KubeModel):
    replicas: int = 0
    ready_replicas: int | None = None
    current_replicas: int | None = None
    updated_replicas: int | None = None
    available_replicas: int | None = None
    current_revision: str | None = None
    update_revision: str | None = None
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] | None = None


class StatefulSet(KubeObject):
    gvk = GroupVersionKind("apps", "v1", "StatefulSet")
    spec: StatefulSetSpec | None = None
    status: StatefulSetStatus | None = None


class DeploymentSpec(KubeModel):
    selector: LabelSelector | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    replicas: int | None = None
    strategy: dict[str, Any] | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None
    progress_deadline_seconds: int | None = None
    paused: bool | None = None


class DeploymentStatus(KubeModel):
    replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    unavailable_replicas: int | None = None
    updated_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] | None = None


class Deployment(KubeObject):
    gvk = GroupVersionKind("apps", "v1", "Deployment")
    spec: DeploymentSpec | None = None
    status: DeploymentStatus | None = None


class PodDisruptionBudgetSpec(KubeModel):
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    unhealthy_pod_eviction_policy: str | None = None


class PodDisruptionBudgetStatus(KubeModel):
    current_healthy: int = 0
    desired_healthy: int = 0
    disruptions_allowed: int = 0
    expected_pods: int = 0
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] | None = None


class PodDisruptionBudget(KubeObject):
    gvk = GroupVersionKind("policy", "v1", "PodDisruptionBudget")
    spec: PodDisruptionBudgetSpec | None = None
    status: PodDisruptionBudgetStatus | None = None


class LeaseSpec(KubeModel):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None
    preferred_holder: str | None = None
    strategy: str | None = None


class Lease(KubeObject):
    """coordination.k8s.io/v1 Lease; times are RFC 3339 *micro*-time strings."""

    gvk = GroupVersionKind("coordination.k8s.io", "v1", "Lease")
    spec: LeaseSpec | None = None


class ScaleSpec(KubeModel):
    replicas: int | None = None


class ScaleStatus(KubeModel):
    replicas: int = 0
    selector: str | None = None


class Scale(KubeObject):
    """The ``scale`` subresource body (read and written through ``client.subresource("scale")``)."""

    gvk = GroupVersionKind("autoscaling", "v1", "Scale")
    spec: ScaleSpec | None = None
    status: ScaleStatus | None = None
