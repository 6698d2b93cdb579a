"""The operator's generated ClusterRole covers the backup kinds: it is rendered from both
reconcilers (``examples.rediscluster.packaging``, ``make generate``) and grants Jobs and
RedisBackups."""

from __future__ import annotations

import yaml

from examples.rediscluster.packaging import CHART, RECONCILERS
from pyctrl.rbacgen import EVENT_RULES, render_cluster_role

ROLE = CHART / "files" / "role.yaml"


def test_the_cluster_role_is_generated_from_both_reconcilers() -> None:
    assert "examples.rediscluster.backup.reconciler:RedisBackupReconciler" in RECONCILERS
    fresh = render_cluster_role("rediscluster-operator", RECONCILERS, EVENT_RULES)
    assert ROLE.read_text() == fresh, "stale: run make generate"
    rules = next(d for d in yaml.safe_load_all(ROLE.read_text()) if d and d["kind"] == "ClusterRole")["rules"]
    granted = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    wanted = {
        ("batch", "jobs"),
        ("redis.pyctrl.dev", "redisbackups"),
        ("redis.pyctrl.dev", "redisbackups/status"),
    }
    assert wanted <= granted
