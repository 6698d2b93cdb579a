"""The backup reconciler's reading of a Job pod's termination messages (backup/results.py)."""

from __future__ import annotations

import json

from examples.rediscluster.backup.results import result_of
from pyctrl.client import Pod


def _terminated(name: str, result: dict[str, object], finished: str) -> dict[str, object]:
    message = json.dumps(result)
    return {
        "name": name,
        "state": {"terminated": {"exitCode": 0, "message": message, "finishedAt": finished}},
    }


def test_the_main_container_wins_over_an_init_container_that_finished_in_the_same_second() -> None:
    """A cluster-mode backup's last shard container and its manifest container often end within
    one second (finishedAt's resolution): the result is the manifest's, the container that ran last."""
    second = "2026-12-02T02:10:07Z"
    pod = Pod.model_validate(
        {
            "metadata": {"name": "b-backup-x", "namespace": "ns"},
            "status": {
                "initContainerStatuses": [
                    _terminated("shard-0", {"location": "s3://b/shard-0.rdb"}, "2026-12-02T02:10:05Z"),
                    _terminated("shard-1", {"location": "s3://b/shard-1.rdb"}, second),
                ],
                "containerStatuses": [
                    _terminated("manifest", {"location": "s3://b/manifest.json", "sha256": "ab"}, second)
                ],
            },
        }
    )
    assert result_of([pod]) == {"location": "s3://b/manifest.json", "sha256": "ab"}


def test_a_later_finish_wins_whatever_the_order() -> None:
    pod = Pod.model_validate(
        {
            "metadata": {"name": "b-backup-y", "namespace": "ns"},
            "status": {
                "initContainerStatuses": [_terminated("shard-0", {"error": "boom"}, "2026-12-02T02:10:09Z")],
                "containerStatuses": [
                    _terminated("manifest", {"location": "s3://b/m"}, "2026-12-02T02:10:01Z")
                ],
            },
        }
    )
    assert result_of([pod]) == {"error": "boom"}
