"""Typed batch/v1 Job.

Mirrors ``k8s.io/api/batch/v1`` for the fields operators read and write (backoffLimit,
activeDeadlineSeconds, podFailurePolicy, the pod template; status counters and conditions); other
fields are kept as extras (lossless, see :mod:`pyctrl.client.objects.meta`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects.core import PodTemplateSpec
from pyctrl.client.objects.meta import Condition, KubeModel, KubeObject, LabelSelector

__all__ = ["Job", "JobCondition", "JobSpec", "JobStatus"]


class JobSpec(KubeModel):
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    backoff_limit: int | None = None
    active_deadline_seconds: int | None = None
    completions: int | None = None
    parallelism: int | None = None
    selector: LabelSelector | None = None
    pod_failure_policy: dict[str, Any] | None = None
    ttl_seconds_after_finished: int | None = None


class JobCondition(Condition):
    """``batch/v1 JobCondition``: Complete, Failed, FailureTarget, SuccessCriteriaMet, Suspended."""

    last_probe_time: str | None = None


class JobStatus(KubeModel):
    active: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    start_time: str | None = None
    completion_time: str | None = None
    conditions: list[JobCondition] | None = None

    def condition(self, type_: str) -> JobCondition | None:
        """The condition of that type when its status is True."""
        return next((c for c in self.conditions or [] if c.type == type_ and c.status == "True"), None)


class Job(KubeObject):
    gvk = GroupVersionKind("batch", "v1", "Job")
    spec: JobSpec | None = None
    status: JobStatus | None = None
