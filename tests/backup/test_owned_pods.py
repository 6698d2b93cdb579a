"""Backup results are read only from pods the Job controls (issue 24, never adopt): a pod that
merely carries the Job's name label — anyone who may create pods in the namespace could forge
one, with a made-up location and checksum in its termination message — is ignored."""

from __future__ import annotations

from typing import Any

from examples.rediscluster.backup.reconciler import owned_by
from pyctrl.client import Job, Pod


def pod(name: str, owner_uid: str | None, *, controller: bool = True) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {"batch.kubernetes.io/job-name": "b"}}
    if owner_uid is not None:
        ref = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "b",
            "uid": owner_uid,
            "controller": controller,
        }
        meta["ownerReferences"] = [ref]
    return Pod.model_validate({"metadata": meta})


def test_only_pods_the_job_controls_count() -> None:
    job = Job.model_validate({"metadata": {"name": "b", "namespace": "ns", "uid": "job-uid"}})
    pods = [
        pod("real", "job-uid"),
        pod("forged", None),
        pod("other-job", "another-uid"),
        pod("not-controller", "job-uid", controller=False),
    ]
    assert [p.metadata.name for p in owned_by(job, pods)] == ["real"]
