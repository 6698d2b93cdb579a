"""Backup freshness (``examples.rediscluster.backup.metrics``): the newest Succeeded backup and
the age a schedule allows, and the gauges the alert ``RedisClusterBackupTooOld`` reads."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from examples.rediscluster.api.backup import RedisBackup
from examples.rediscluster.backup.metrics import backup_freshness, forget, observe_backups
from pyctrl.metrics import registry

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)
CREATED = "2026-12-01T00:00:00Z"


def backup(phase: str, completed: str | None) -> RedisBackup:
    status: dict[str, Any] = {"phase": phase}
    if completed:
        status["completionTime"] = completed
    return RedisBackup.model_validate(
        {
            "metadata": {"name": f"b-{phase}-{completed}", "namespace": "ns"},
            "spec": {"clusterName": "rc", "destination": {"pvc": {"claimName": "c"}}},
            "status": status,
        }
    )


def ts(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_the_newest_succeeded_backup_counts_and_failed_ones_do_not() -> None:
    backups = [
        backup("Succeeded", "2026-12-02T03:00:10Z"),
        backup("Succeeded", "2026-12-03T03:00:09Z"),
        backup("Failed", "2026-12-03T11:00:00Z"),
        backup("Running", None),
    ]
    fresh = backup_freshness("0 3 * * *", backups, CREATED, NOW)
    assert fresh.last_success == ts("2026-12-03T03:00:09Z")
    assert fresh.max_age == 2 * 86400  # daily: one missed run tolerated


def test_without_a_backup_the_clusters_creation_counts() -> None:
    assert backup_freshness("*/15 * * * *", [], CREATED, NOW).last_success == ts(CREATED)
    assert backup_freshness("*/15 * * * *", [], CREATED, NOW).max_age == 1800


def test_an_irregular_schedule_allows_twice_its_longest_gap() -> None:
    # weekdays at 03:00: the weekend gap (Friday to Monday, 3 days) is the longest
    assert backup_freshness("0 3 * * 1-5", [], CREATED, NOW).max_age == 2 * 3 * 86400


def test_an_invalid_schedule_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"spec.backup.schedule 'every day' is not a cron expression"):
        backup_freshness("every day", [], CREATED, NOW)


def test_the_gauges_are_set_and_forgotten() -> None:
    labels = {"namespace": "ns", "name": "fresh-test"}
    observe_backups(
        "ns",
        "fresh-test",
        "0 * * * *",
        [backup("Succeeded", "2026-12-03T11:00:05Z")],
        created=CREATED,
        now=NOW,
    )
    assert registry.get_sample_value("rediscluster_backup_last_success_timestamp_seconds", labels) == ts(
        "2026-12-03T11:00:05Z"
    )
    assert registry.get_sample_value("rediscluster_backup_max_age_seconds", labels) == 7200
    observe_backups("ns", "fresh-test", "nonsense", [], created=CREATED, now=NOW)  # unchanged, no error
    assert registry.get_sample_value("rediscluster_backup_max_age_seconds", labels) == 7200
    forget("ns", "fresh-test")
    assert registry.get_sample_value("rediscluster_backup_max_age_seconds", labels) is None
