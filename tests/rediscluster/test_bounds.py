"""Bounds on what one tenant's RedisCluster may ask for (issue 24), without a control plane:

- backup schedules: the model refuses per-second schedules as the CRD's CEL rule does
  (``SCHEDULE_PATTERN``), :func:`shortest_gap` finds the closest two runs of a schedule, and
  :func:`schedule_problem` (schedule controller and webhook) refuses one under the minimum;
- names: :func:`name_problem` refuses a name some child could not carry, as the CRD's rule does;
- the webhook refuses both naming the field (the apiserver's tests are in tests/crdgen and
  tests/operator/test_backup.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from examples.rediscluster.api import MAX_NAME_LENGTH, RedisCluster, name_problem
from examples.rediscluster.api.backup import BackupSchedule
from examples.rediscluster.backup.schedule import DEFAULT_MIN_INTERVAL, schedule_problem, shortest_gap
from examples.rediscluster.webhook import RedisClusterValidator
from pyctrl.client.errors import Invalid

PVC = {"pvc": {"claimName": "backups"}}


@pytest.mark.parametrize(
    ("schedule", "admitted"),
    [
        ("* * * * * *", False),  # every second
        ("* * * * * */5", False),
        ("* * * * * 0-59", False),
        ("* * * * * 0,30", False),
        ("* * * * * * 2030", False),  # 7 fields
        ("@every 1s", False),
        ("0 3 * * *", True),
        (" 0  3 * * * ", True),
        ("@daily", True),
        ("* * * * * */15", True),  # every 15 s: the CRD admits it, the operator's minimum decides
        ("*/10 * * * * 30", True),
    ],
)
def test_the_model_refuses_per_second_schedules_as_the_crd_does(schedule: str, admitted: bool) -> None:
    spec = {"schedule": schedule, "destination": PVC}
    if admitted:
        assert BackupSchedule.model_validate(spec).schedule == schedule
        return
    with pytest.raises(ValidationError, match="a per-second schedule is refused"):
        BackupSchedule.model_validate(spec)


@pytest.mark.parametrize(
    ("schedule", "gap"),
    [
        ("* * * * * */15", 15),
        ("*/5 * * * *", 300),
        ("0 3 * * *", 86400),
        ("0,1 3 * * *", 60),  # irregular: the closest pair counts, not the average
        ("59,0 * * * *", 60),  # across an hour
        ("@hourly", 3600),
    ],
)
def test_the_shortest_gap_is_the_closest_two_runs(schedule: str, gap: float) -> None:
    assert shortest_gap(schedule) == gap


def test_a_schedule_under_the_minimum_or_not_cron_is_refused_naming_both_numbers() -> None:
    assert DEFAULT_MIN_INTERVAL == 300
    assert schedule_problem("*/5 * * * *", DEFAULT_MIN_INTERVAL) is None
    assert schedule_problem("* * * * *", DEFAULT_MIN_INTERVAL) == (
        "spec.backup.schedule '* * * * *' runs every 60 s at the closest: the operator's minimum "
        "backup interval is 300 s (--min-backup-interval)"
    )
    assert schedule_problem("* * * * *", 60) is None
    assert schedule_problem("every day", 60) == "spec.backup.schedule 'every day' is not a cron expression"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a" * MAX_NAME_LENGTH, None),
        ("cache-1", None),
        ("a" * (MAX_NAME_LENGTH + 1), "at most 52 characters"),
        ("my.cache", "DNS-1035 label"),  # a valid object name, not a valid Service name
        ("1cache", "DNS-1035 label"),
        ("cache-", "DNS-1035 label"),
    ],
)
def test_a_name_no_child_could_carry_is_refused(name: str, why: str | None) -> None:
    problem = name_problem(name)
    if why is None:
        assert problem is None
        # the longest child names fit: Services <name>-headless / -replicas, the revision label
        assert len(f"{name}-headless") <= 63
        assert len(f"{name}-0123456789") <= 63
    else:
        assert problem is not None
        assert why in problem


def cluster(name: str = "rc", **spec: Any) -> RedisCluster:
    return RedisCluster.model_validate({"metadata": {"name": name, "namespace": "ns"}, "spec": spec})


async def test_the_webhook_refuses_a_long_name_and_a_schedule_under_its_minimum() -> None:
    v = RedisClusterValidator(min_backup_interval=60)
    with pytest.raises(Invalid) as refused:
        await v.validate_create(cluster("x" * 53, replicas=2))
    assert [c.field for c in refused.value.causes] == ["metadata.name"]
    assert "at most 52 characters" in refused.value.message
    fast = {"schedule": "* * * * * */30", "destination": PVC}
    with pytest.raises(Invalid) as refused:
        await v.validate_update(cluster(replicas=2), cluster(replicas=2, backup=fast))
    assert [c.field for c in refused.value.causes] == ["spec.backup.schedule"]
    assert "runs every 30 s at the closest" in refused.value.message
    assert await v.validate_create(cluster(replicas=2, backup={**fast, "schedule": "* * * * *"})) is None
