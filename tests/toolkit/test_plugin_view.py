"""``kubectl rediscluster``'s rendering and refusals without a control plane
(``examples.rediscluster.plugin``): colour is only decoration, ``explain`` names the reasons, and
bad input is refused naming what to change. The commands against a real control plane and
operator are in tests/operator/test_kubectl_plugin.py."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.plugin import cli
from examples.rediscluster.plugin.view import Snapshot, age, explain, render_explain, render_status
from pyctrl.client import Pod

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)


def cluster(status: dict[str, Any] | None = None, **spec: Any) -> RedisCluster:
    body: dict[str, Any] = {"metadata": {"name": "rc", "namespace": "ns", "generation": 2}, "spec": spec}
    if status is not None:
        body["status"] = status
    return RedisCluster.model_validate(body)


def ready(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-12-03T11:58:00Z"}  # fmt: skip


def pod(name: str, *, waiting: str | None = None, is_ready: bool = True) -> Pod:
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-12-03T11:00:00Z"},
            "spec": {"nodeName": "node-a", "containers": [{"name": "redis"}]},
            "status": {
                "phase": "Pending" if waiting else "Running",
                "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True" if is_ready else "False"}],
                "containerStatuses": [
                    {"name": "redis", "ready": is_ready, "restartCount": 2, "state": state}
                ],
            },
        }
    )


def test_ages_are_coarse_like_kubectls() -> None:
    times = ("2026-12-03T11:59:55Z", "2026-12-03T11:57:00Z", "2026-12-01T11:00:00Z")
    assert [age(t, NOW) for t in times] == ["5s", "3m", "2d"]
    assert age(None, NOW) == "-"


def test_colour_only_decorates_the_same_text() -> None:
    conditions = [ready("True", "AllReplicasReady", "2/2 pods ready and replicating")]
    c = cluster(
        {"phase": "Running", "currentMaster": "rc-0", "observedGeneration": 2, "conditions": conditions}
    )
    snapshot = Snapshot(c, [pod("rc-0"), pod("rc-1")], now=NOW)
    plain, coloured = render_status(snapshot), render_status(snapshot, colour=True)
    assert "\033[" not in plain
    assert "\033[32mRunning\033[0m" in coloured
    assert re.sub(r"\033\[[0-9;]*m", "", coloured) == plain
    assert "rc-0  master  yes    Running  2         node-a  10.0.0.1  1h" in plain


def test_pods_are_listed_in_statefulset_order() -> None:
    c = cluster({"phase": "Running", "currentMaster": "rc-0", "observedGeneration": 2}, replicas=10)
    text = render_status(Snapshot(c, [pod(f"rc-{i}") for i in (10, 2, 0, 1)], now=NOW))
    assert [line.split()[0] for line in text.splitlines() if line.startswith("rc-")] == [
        "rc-0", "rc-1", "rc-2", "rc-10"
    ]  # fmt: skip


def test_cluster_mode_shows_shards_not_a_cluster_wide_master() -> None:
    shards = [
        {"index": 0, "master": "rc-0", "slots": ["0-8191"], "slotCount": 8192, "ready": True},
        {"index": 1, "master": "rc-1", "slots": ["8192-16383"], "slotCount": 8192, "ready": False},
        {"index": 2},
    ]
    c = cluster(
        {"phase": "Degraded", "observedGeneration": 2, "readyReplicas": 2, "shards": shards,
         "clusterState": "ok", "slotsAssigned": 16384, "slotsOk": 16384},
        mode="cluster", shards=3, replicasPerShard=0,
    )  # fmt: skip
    labelled = pod("rc-1")
    labelled.metadata.labels = {"redis.pyctrl.dev/shard": "1", "redis.pyctrl.dev/role": "master"}
    text = render_status(Snapshot(c, [labelled], now=NOW))
    header = text.splitlines()[:2]
    assert header[0] == "RedisCluster ns/rc  cluster, 3 shards x 1 pod  Degraded"
    assert header[1].startswith("  shards ready 1/3  ready 2/3  generation 2 (observed 2)")
    assert "epoch" not in text
    assert "master none" not in text
    assert "POD   SHARD  ROLE    READY" in text
    assert "rc-1  1      master  yes" in text
    assert "1      rc-1    -         8192-16383  8192   no" in text


def test_a_cluster_the_operator_never_saw_says_so() -> None:
    snapshot = Snapshot(cluster(), now=NOW)
    assert "no status yet: the operator has not reconciled this cluster" in render_status(snapshot)
    (reason,) = explain(snapshot)
    assert "has no status: the operator has never reconciled it" in reason
    assert "does it watch namespace 'ns'?" in reason


def test_explain_names_the_condition_its_meaning_and_the_pods_that_cannot_start() -> None:
    message = "spec.tls.secretName: Secret 'nope' not found; nothing of the spec was applied (0/2 pods ready)"
    c = cluster(
        {
            "phase": "Initializing",
            "observedGeneration": 2,
            "conditions": [ready("False", "InvalidSpec", message)],
        }
    )
    text = render_explain(
        Snapshot(c, [pod("rc-0", waiting="CreateContainerConfigError", is_ready=False)], now=NOW)
    )
    assert text.startswith("RedisCluster ns/rc is not Ready:\n")
    assert f"  - Ready is False (InvalidSpec): {message}\n" in text
    assert "The spec cannot be run as written" in text
    assert "Pod rc-0 is CreateContainerConfigError: a Secret or ConfigMap the pod needs is missing." in text


def test_explain_of_a_ready_cluster_is_short_and_empty() -> None:
    conditions = [ready("True", "AllReplicasReady", "3/3 pods ready and replicating")]
    c = cluster({"phase": "Running", "observedGeneration": 2, "conditions": conditions})
    assert explain(Snapshot(c, now=NOW)) == []
    assert (
        render_explain(Snapshot(c, now=NOW))
        == "RedisCluster ns/rc is Ready: 3/3 pods ready and replicating\n"
    )


def test_a_spec_not_yet_seen_is_a_reason() -> None:
    c = cluster({"phase": "Running", "observedGeneration": 1,
                 "conditions": [ready("False", "Degraded", "1/2 pods ready and replicating")]})  # fmt: skip
    assert (
        "has not yet acted on the latest spec (generation 2, status from 1)"
        in explain(Snapshot(c, now=NOW))[0]
    )


def test_a_backup_needs_a_destination_and_a_fence_list_must_be_json() -> None:
    with pytest.raises(cli.UsageError, match=r"has no spec\.backup\.destination: pass --pvc CLAIM"):
        cli._backup_object(cluster(), None, None)
    made = cli._backup_object(cluster(), "b1", "claim")
    assert made["spec"] == {"clusterName": "rc", "destination": {"pvc": {"claimName": "claim"}}}
    broken = cluster()
    broken.metadata.annotations = {cli.FENCED_PODS: "rc-1"}
    with pytest.raises(cli.UsageError, match="is not a JSON list of pod names: 'rc-1'"):
        cli._fenced(broken)


async def test_bad_arguments_and_a_missing_kubeconfig_are_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    with pytest.raises(SystemExit) as exited:
        await cli.run(["hibernate", "maybe", "rc"])
    assert exited.value.code == 2
    assert "invalid choice: 'maybe'" in capsys.readouterr().err
    assert await cli.run(["--kubeconfig", str(tmp_path / "none"), "status", "rc"]) == 2
    assert f"error: kubeconfig {tmp_path / 'none'} does not exist" in capsys.readouterr().err
