"""Typed Kubernetes objects: metadata, the :class:`KubeObject` base, and the built-in kinds pyctrl's
operators use. Lossless (unknown fields survive a round-trip); see :mod:`.meta` for the design.

The built-in kinds' modules (:mod:`.core`, :mod:`.workloads`, :mod:`.batch`) are imported when one
of their names is first read (:mod:`pyctrl._lazy`): a controller of its own kinds never loads them.
"""

import typing as _typing

from pyctrl import _lazy
from pyctrl.client.objects.meta import (
    Condition,
    KubeModel,
    KubeObject,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    PartialObjectMetadata,
    is_metadata_only,
)


def _builtin_kinds() -> tuple[type[KubeObject], ...]:
    from pyctrl.client.objects.batch import Job
    from pyctrl.client.objects.core import (
        ConfigMap,
        Event,
        Namespace,
        PersistentVolumeClaim,
        Pod,
        Secret,
        Service,
    )
    from pyctrl.client.objects.workloads import Deployment, Lease, PodDisruptionBudget, StatefulSet

    kinds = (ConfigMap, Secret, Service, Pod, PersistentVolumeClaim, Event, Namespace, StatefulSet)
    return (*kinds, Deployment, PodDisruptionBudget, Lease, Job)


if _typing.TYPE_CHECKING:
    from pyctrl.client.objects.batch import Job, JobCondition, JobSpec, JobStatus
    from pyctrl.client.objects.core import (
        ConfigMap,
        Container,
        ContainerPort,
        ContainerStatus,
        EnvVar,
        Event,
        Namespace,
        PersistentVolumeClaim,
        PersistentVolumeClaimSpec,
        PersistentVolumeClaimStatus,
        Pod,
        PodCondition,
        PodSpec,
        PodStatus,
        PodTemplateSpec,
        ResourceRequirements,
        Secret,
        Service,
        ServicePort,
        ServiceSpec,
        Volume,
        VolumeMount,
    )
    from pyctrl.client.objects.workloads import (
        Deployment,
        DeploymentSpec,
        DeploymentStatus,
        Lease,
        LeaseSpec,
        PodDisruptionBudget,
        PodDisruptionBudgetSpec,
        PodDisruptionBudgetStatus,
        Scale,
        ScaleSpec,
        ScaleStatus,
        StatefulSet,
        StatefulSetSpec,
        StatefulSetStatus,
    )

    #: The built-in kinds registered in the default scheme.
    BUILTIN_KINDS: tuple[type[KubeObject], ...]
else:
    __getattr__, __dir__ = _lazy.attributes(
        __name__,
        {
            "pyctrl.client.objects.batch": ("Job", "JobCondition", "JobSpec", "JobStatus"),
            "pyctrl.client.objects.core": (
                "ConfigMap",
                "Container",
                "ContainerPort",
                "ContainerStatus",
                "EnvVar",
                "Event",
                "Namespace",
                "PersistentVolumeClaim",
                "PersistentVolumeClaimSpec",
                "PersistentVolumeClaimStatus",
                "Pod",
                "PodCondition",
                "PodSpec",
                "PodStatus",
                "PodTemplateSpec",
                "ResourceRequirements",
                "Secret",
                "Service",
                "ServicePort",
                "ServiceSpec",
                "Volume",
                "VolumeMount",
            ),
            "pyctrl.client.objects.workloads": (
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
            ),
        },
        computed={"BUILTIN_KINDS": _builtin_kinds},
        submodules=("batch", "core", "workloads"),
    )

__all__ = [
    "BUILTIN_KINDS",
    "Condition",
    "ConfigMap",
    "Container",
    "ContainerPort",
    "ContainerStatus",
    "Deployment",
    "DeploymentSpec",
    "DeploymentStatus",
    "EnvVar",
    "Event",
    "Job",
    "JobCondition",
    "JobSpec",
    "JobStatus",
    "KubeModel",
    "KubeObject",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Lease",
    "LeaseSpec",
    "Namespace",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "PartialObjectMetadata",
    "PersistentVolumeClaim",
    "PersistentVolumeClaimSpec",
    "PersistentVolumeClaimStatus",
    "Pod",
    "PodCondition",
    "PodDisruptionBudget",
    "PodDisruptionBudgetSpec",
    "PodDisruptionBudgetStatus",
    "PodSpec",
    "PodStatus",
    "PodTemplateSpec",
    "ResourceRequirements",
    "Scale",
    "ScaleSpec",
    "ScaleStatus",
    "Secret",
    "Service",
    "ServicePort",
    "ServiceSpec",
    "StatefulSet",
    "StatefulSetSpec",
    "StatefulSetStatus",
    "Volume",
    "VolumeMount",
    "is_metadata_only",
]
