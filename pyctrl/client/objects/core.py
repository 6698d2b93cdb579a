"""Typed core/v1 kinds: ConfigMap, Secret, Service, Pod, PersistentVolumeClaim, Event, Namespace.

Mirrors ``k8s.io/api/core/v1`` for the fields operators read and write; everything else is kept
as an extra field (see :mod:`pyctrl.client.objects.meta` for the lossless round-trip guarantee).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.meta import (
    Condition,
    KubeModel,
    KubeObject,
    LabelSelector,
    ObjectMeta,
    ObjectReference,
)

__all__ = [
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
]

_V1 = ""


class ConfigMap(KubeObject):
    gvk = GroupVersionKind(_V1, "v1", "ConfigMap")
    data: dict[str, str] | None = None
    binary_data: dict[str, str] | None = None
    immutable: bool | None = None


class Secret(KubeObject):
    """``data`` values are base64 strings as on the wire; ``string_data`` is write-only plain text."""

    gvk = GroupVersionKind(_V1, "v1", "Secret")
    type: str | None = None
    data: dict[str, str] | None = None
    string_data: dict[str, str] | None = None
    immutable: bool | None = None


class Namespace(KubeObject):
    gvk = GroupVersionKind(_V1, "v1", "Namespace")
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None


class ServicePort(KubeModel):
    port: int
    name: str | None = None
    protocol: str | None = None
    target_port: int | str | None = None
    node_port: int | None = None
    app_protocol: str | None = None


class ServiceSpec(KubeModel):
    type: str | None = None
    selector: dict[str, str] | None = None
    ports: list[ServicePort] | None = None
    cluster_ip: str | None = Field(default=None, alias="clusterIP")
    cluster_ips: list[str] | None = Field(default=None, alias="clusterIPs")
    publish_not_ready_addresses: bool | None = None
    session_affinity: str | None = None


class Service(KubeObject):
    gvk = GroupVersionKind(_V1, "v1", "Service")
    spec: ServiceSpec | None = None
    status: dict[str, Any] | None = None


class EnvVar(KubeModel):
    name: str
    value: str | None = None
    value_from: dict[str, Any] | None = None


class ContainerPort(KubeModel):
    container_port: int
    name: str | None = None
    protocol: str | None = None
    host_port: int | None = None


class VolumeMount(KubeModel):
    name: str
    mount_path: str
    sub_path: str | None = None
    read_only: bool | None = None


class ResourceRequirements(KubeModel):
    limits: dict[str, str] | None = None
    requests: dict[str, str] | None = None


class Container(KubeModel):
    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None
    ports: list[ContainerPort] | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[VolumeMount] | None = None
    image_pull_policy: str | None = None
    readiness_probe: dict[str, Any] | None = None
    liveness_probe: dict[str, Any] | None = None
    startup_probe: dict[str, Any] | None = None


class Volume(KubeModel):
    """A pod volume: ``name`` plus one source (``configMap``, ``secret``, ``emptyDir``…) as extra."""

    name: str


class PodSpec(KubeModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] | None = None
    volumes: list[Volume] | None = None
    node_name: str | None = None
    service_account_name: str | None = None
    restart_policy: str | None = None
    hostname: str | None = None
    subdomain: str | None = None
    termination_grace_period_seconds: int | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    priority_class_name: str | None = None


class PodCondition(Condition):
    """``core/v1 PodCondition``: PodScheduled, Initialized, ContainersReady, Ready…"""

    last_probe_time: str | None = None


class ContainerStatus(KubeModel):
    name: str
    ready: bool = False
    restart_count: int = 0
    image: str | None = None
    image_id: str | None = Field(default=None, alias="imageID")
    container_id: str | None = Field(default=None, alias="containerID")
    started: bool | None = None
    state: dict[str, Any] | None = None
    last_state: dict[str, Any] | None = None


class PodStatus(KubeModel):
    phase: str | None = None
    conditions: list[PodCondition] | None = None
    message: str | None = None
    reason: str | None = None
    pod_ip: str | None = Field(default=None, alias="podIP")
    pod_ips: list[dict[str, str]] | None = Field(default=None, alias="podIPs")
    host_ip: str | None = Field(default=None, alias="hostIP")
    start_time: str | None = None
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None


class Pod(KubeObject):
    gvk = GroupVersionKind(_V1, "v1", "Pod")
    spec: PodSpec | None = None
    status: PodStatus | None = None


class PodTemplateSpec(KubeModel):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class PersistentVolumeClaimSpec(KubeModel):
    access_modes: list[str] | None = None
    resources: ResourceRequirements | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None
    volume_name: str | None = None
    selector: LabelSelector | None = None


class PersistentVolumeClaimStatus(KubeModel):
    phase: str | None = None
    access_modes: list[str] | None = None
    capacity: dict[str, str] | None = None


class PersistentVolumeClaim(KubeObject):
    gvk = GroupVersionKind(_V1, "v1", "PersistentVolumeClaim")
    spec: PersistentVolumeClaimSpec | None = None
    status: PersistentVolumeClaimStatus | None = None


class Event(KubeObject):
    """core/v1 Event (what controller-runtime's event recorder writes)."""

    gvk = GroupVersionKind(_V1, "v1", "Event")
    involved_object: ObjectReference = Field(default_factory=ObjectReference)
    reason: str | None = None
    message: str | None = None
    type: str | None = None
    count: int | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    event_time: str | None = None
    source: dict[str, Any] | None = None
    action: str | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None
