"""The alert rules with the real promtool: they parse, and each fires on synthetic series showing
its condition, after its ``for``, and stays silent on healthy ones (tests/install/alerts_test.yaml)."""

from __future__ import annotations

from pathlib import Path

from tests.install.conftest import CHART, run

HERE = Path(__file__).resolve().parent
ALERTS = CHART / "files" / "alerts.yaml"


def test_the_alert_rules_are_valid_prometheus_rules(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(ALERTS))
    assert "SUCCESS: 20 rules found" in result.stdout + result.stderr


def test_each_alert_fires_on_its_condition_and_not_on_healthy_series(promtool: str) -> None:
    result = run(promtool, "test", "rules", str(HERE / "alerts_test.yaml"), check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_promtool_test_rules_fails_when_an_alert_misbehaves(promtool: str, tmp_path: Path) -> None:
    """The rule tests can fail (one promtool run for both): expecting the no-master alert on a
    healthy cluster, and rules without ``unless ... rediscluster_hibernated == 1``, under which the
    hibernated cluster's alerts fire before it wakes."""
    clause = " unless on (namespace, name) max by (namespace, name) (rediscluster_hibernated) == 1"
    rules = ALERTS.read_text()
    assert rules.count(clause) == 8
    (tmp_path / "alerts.yaml").write_text(rules.replace(clause, ""))
    text = (HERE / "alerts_test.yaml").read_text()
    text = text.replace("../../charts/rediscluster-operator/files/alerts.yaml", "alerts.yaml")
    (tmp_path / "alerts_test.yaml").write_text(text.replace("values: '1 1 0 0 0 0'", "values: '1 1 1 1 1 1'"))
    result = run(promtool, "test", "rules", str(tmp_path / "alerts_test.yaml"), check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "alertname: RedisClusterNoMaster, time: 4m" in out, out  # the healthy cluster's
    assert "a hibernated cluster stays quiet, a woken one fires" in out
    for alert in ("RedisClusterNoMaster", "RedisDown", "RedisMasterMissing", "RedisClusterBackupTooOld"):
        assert f"alertname: {alert}, time: 9m" in out, out
