"""The operator's generated files cover the backup kinds: the RedisBackup CRD and the ClusterRole
(``make generate``) are what the code declares."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pyctrl.rbacgen import main

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "examples" / "rediscluster" / "deploy" / "role.yaml"
RECONCILERS = [
    "examples.rediscluster.controller:RedisClusterReconciler",
    "examples.rediscluster.backup.reconciler:RedisBackupReconciler",
]


def test_the_cluster_role_is_generated_from_both_reconcilers(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*RECONCILERS, "--leader-election", "--events", "--name", "rediscluster-operator"]
    assert main([*args, "-o", str(ROLE), "--check"]) == 0, capsys.readouterr().out
    rules = next(d for d in yaml.safe_load_all(ROLE.read_text()) if d and d["kind"] == "ClusterRole")["rules"]
    granted = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert {
        ("batch", "jobs"),
        ("redis.pyctrl.dev", "redisbackups"),
        ("redis.pyctrl.dev", "redisbackups/status"),
    } <= granted
