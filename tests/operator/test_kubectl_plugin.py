"""``kubectl rediscluster`` on the real control plane, with the operator running in-process
(tests/operator/conftest.py): ``status`` of a healthy, then degraded (a replica's redis-server
hung) replication-mode cluster and of a cluster-mode cluster through the real ``kubectl``
(which finds the ``kubectl-rediscluster`` console script on PATH) as a user holding only read
RBAC, each matched against a golden file with the volatile parts masked; on the cluster-mode
cluster, the intents the plugin refuses and the operator reports (condition ``Intents``, a Warning
Event) without acting on them; ``explain`` naming the missing
Secret a cluster is stuck on; ``backup`` creating a RedisBackup; the write intents set their
annotations; and every operator metric the chart's dashboard and alerts query is a family of the
running operator's registry."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from examples.rediscluster.plugin import cli
from pyctrl.envtest import Environment
from pyctrl.envtest._binaries import bin_dir
from pyctrl.metrics import registry
from pyctrl.testing import eventually
from tests.install._promql import named_by_dashboard_and_alerts
from tests.operator.conftest import Cluster, RunningOperator
from tests.operator.test_cluster_mode import cluster_ready

TESTDATA = Path(__file__).resolve().parent / "testdata"
GOLDEN = TESTDATA / "kubectl_rediscluster_status.txt"
GOLDEN_DEGRADED = TESTDATA / "kubectl_rediscluster_status_degraded.txt"
GOLDEN_CLUSTER_MODE = TESTDATA / "kubectl_rediscluster_status_cluster_mode.txt"
VIEWER = "rediscluster-viewer"
#: what the read-only commands need (docs/toolkit.md shows the same ClusterRole)
VIEWER_RULES = [
    {
        "apiGroups": ["redis.pyctrl.dev"],
        "resources": ["redisclusters", "redisbackups"],
        "verbs": ["get", "list"],
    },
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["list"]},
]


def viewer_kubeconfig(envtest: Environment) -> Path:
    for kind, partial in (
        ("clusterroles", {"kind": "ClusterRole", "metadata": {"name": VIEWER}, "rules": VIEWER_RULES}),
        (
            "clusterrolebindings",
            {
                "kind": "ClusterRoleBinding",
                "metadata": {"name": VIEWER},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": VIEWER},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": VIEWER}],
            },
        ),
    ):
        body = {"apiVersion": "rbac.authorization.k8s.io/v1", **partial}
        envtest.http.request(
            "PATCH",
            f"/apis/rbac.authorization.k8s.io/v1/{kind}/{VIEWER}?fieldManager=test&force=true",
            yaml.safe_dump(body).encode(),
            content_type="application/apply-patch+yaml",
        )
    return envtest.add_user(VIEWER)


def kubectl_plugin(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    """``kubectl rediscluster ARGS``: kubectl runs the console script it finds on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [str(bin_dir() / "kubectl"), "rediscluster", *args, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


def mask(text: str, namespace: str, nodes: set[str]) -> str:
    """The status screen without what differs between runs: the namespace, node names, IPs, ages
    and timestamps; runs of spaces (column widths follow those) become one."""
    text = text.replace(namespace, "<ns>")
    for node in nodes:
        text = text.replace(node, "<node>")
    text = re.sub(r"\b127\.\d+\.\d+\.\d+\b", "<ip>", text)
    text = re.sub(r"\b\d+[smhd]\b", "<age>", text)
    text = re.sub(r"revision \S+", "revision <hash>", text)  # the pod template's hash
    return "\n".join(re.sub(r" {2,}", "  ", line).rstrip() for line in text.splitlines()) + "\n"


def assert_golden(masked: str, golden: Path) -> None:
    """``masked`` is ``golden``'s text (``PYCTRL_UPDATE_GOLDEN=1`` rewrites the file first)."""
    if os.environ.get("PYCTRL_UPDATE_GOLDEN") == "1":
        golden.write_text(masked)
    assert masked == golden.read_text(), f"status screen changed ({golden.name}):\n{masked}"


async def test_status_of_a_healthy_then_degraded_cluster_matches_the_golden_screens(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster], envtest: Environment, namespace: str
) -> None:
    c = cluster_factory("kp")
    await c.create_ready(3)
    kubeconfig = viewer_kubeconfig(envtest)

    async def settled() -> str | None:  # the events of start-up all recorded, the status synced
        out = kubectl_plugin("status", "kp", "-n", namespace, kubeconfig=kubeconfig)
        assert out.returncode == 0, out.stderr
        return out.stdout if "AllReplicasReady" in out.stdout else None

    screen = await eventually(settled, within=60, what="a status screen of the Ready cluster", interval=0.5)
    nodes = {p["spec"]["nodeName"] for p in c.pods().values()}
    # Which start-up Events are the six newest depends on the second each was recorded in: the
    # screen is golden up to them; they are checked as a set of the known start-up Events.
    masked, events = mask(screen, namespace, nodes).split("Recent events\n")
    assert_golden(masked, GOLDEN)
    lines = events.splitlines()
    assert len(lines) == 6
    assert "  <age>  Normal  MasterElected: kp-0 is the master (epoch 1)" in lines
    reasons = "MasterElected|PasswordGenerated|SuccessfulCreate|Scheduled|Pulled|Created|Started"
    start_up = rf"  <age>  Normal  ({reasons}): .+"  # PasswordGenerated: auth is on by default
    assert all(re.fullmatch(start_up, line) for line in lines), lines
    assert "\033[" not in screen  # not a terminal: no colour

    # the read-only user cannot write: the plugin's write commands fail with the apiserver's reason
    refused = kubectl_plugin("hibernate", "on", "kp", "-n", namespace, kubeconfig=kubeconfig)
    assert refused.returncode == 2
    assert "error: hibernate" in refused.stderr
    assert "forbidden" in refused.stderr.lower()

    # degraded: kp-2's redis-server stopped (SIGSTOP: hung, not exited, so nothing restarts it
    # and the state stays put until SIGCONT); its readiness probe fails, the operator reports the
    # cluster Degraded with 2/3 pods ready while the master kp-0 keeps serving
    pid = int((await server_info(c, "kp-2"))["process_id"])
    os.kill(pid, signal.SIGSTOP)
    try:

        async def degraded() -> str | None:
            out = kubectl_plugin("status", "kp", "-n", namespace, kubeconfig=kubeconfig)
            assert out.returncode == 0, out.stderr
            header, counts = out.stdout.splitlines()[:2]
            kp2_unready = re.search(r"^kp-2 +replica +no ", out.stdout, re.MULTILINE)
            return (
                out.stdout
                if header.endswith("Degraded") and " ready 2/3 " in counts and kp2_unready
                else None
            )

        screen = await eventually(
            degraded, within=60, what="a status screen of the Degraded cluster", interval=0.5
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    masked, _ = mask(screen, namespace, nodes).split("Recent events\n")
    assert_golden(masked, GOLDEN_DEGRADED)

    # every operator metric the dashboard and alerts name is a family of the running operator
    families = {m.name for m in registry.collect()}
    families |= {f"{m.name}_total" for m in registry.collect() if m.type == "counter"}
    operators = {n for n in named_by_dashboard_and_alerts() if not n.startswith("redis_")}
    assert not operators - families, f"queried but not registered: {sorted(operators - families)}"


async def server_info(c: Cluster, pod: str) -> dict[str, str]:
    client = await c.redis(pod)
    try:
        return dict(await client.info("server"))
    finally:
        await client.aclose()


@pytest.mark.usefixtures("operator")
async def test_status_of_a_cluster_mode_cluster_shows_each_shards_slots_and_refuses_the_intents(
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
    kubeconfig: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    c = cluster_factory("ks")
    # no replicas: which pod of a shard is its master is then fixed (ks-N serves shard N)
    c.create(mode="cluster", shards=3, replicasPerShard=0)
    await eventually(
        lambda: cluster_ready(c, 3, 0, idle=True), within=120, what="3 shards Running", interval=0.5
    )
    viewer = viewer_kubeconfig(envtest)
    out = kubectl_plugin("status", "ks", "-n", namespace, kubeconfig=viewer)
    assert out.returncode == 0, out.stderr
    nodes = {p["spec"]["nodeName"] for p in c.pods().values()}
    masked, _ = mask(out.stdout, namespace, nodes).split("Recent events\n")
    assert_golden(masked, GOLDEN_CLUSTER_MODE)

    # the day-2 intents are replication mode's: the plugin refuses them here and writes nothing
    admin = ["-n", namespace, "--kubeconfig", str(kubeconfig)]
    for argv, what in (
        (["hibernate", "on", "ks"], "hibernation"),
        (["fence", "ks", "ks-1"], "fencing"),
        (["promote", "ks", "ks-1"], "a switchover"),
    ):
        assert await cli.run([*admin, *argv]) == 2
        assert capsys.readouterr().err == (
            f"error: RedisCluster {namespace}/ks runs mode: cluster, where the operator does not act "
            f"on {what} (replication mode only); nothing was written\n"
        )
    assert not set(c.get()["metadata"].get("annotations") or {}) & {
        cli.HIBERNATION,
        cli.FENCED_PODS,
        cli.SWITCHOVER_TO,
    }
    # written by hand, the operator reports them (condition Intents, a Warning Event) and acts on none
    before = {name: (p["metadata"]["uid"], p["metadata"]["labels"]) for name, p in c.pods().items()}
    intents = {cli.HIBERNATION: "on", cli.FENCED_PODS: '["ks-1"]', cli.SWITCHOVER_TO: "ks-2"}
    envtest.http.request(
        "PATCH",
        f"{c.base}/ks",
        {"metadata": {"annotations": intents}},
        content_type="application/merge-patch+json",
    )
    expected = (
        f"mode: cluster does not act on {cli.HIBERNATION}, {cli.FENCED_PODS}, {cli.SWITCHOVER_TO} yet "
        "(replication mode only): nothing was stopped, fenced or switched over; remove the annotation(s)"
    )

    def intents_condition() -> dict[str, str] | None:
        return next((x for x in c.status().get("conditions", []) if x["type"] == "Intents"), None)

    refused = await eventually(intents_condition, within=30, what="the Intents condition", interval=0.3)
    assert (refused["status"], refused["reason"], refused["message"]) == (
        "False",
        "UnsupportedInClusterMode",
        expected,
    )

    def warned() -> list[tuple[str, str, str]]:  # the recorder writes Events in the background
        events = envtest.http.get(f"/api/v1/namespaces/{namespace}/events")["items"]
        return [
            (e["type"], e["message"], e["involvedObject"]["name"])
            for e in events
            if e["reason"] == "UnsupportedInClusterMode"
        ]

    event = await eventually(warned, within=30, what="the UnsupportedInClusterMode Event", interval=0.3)
    assert event == [("Warning", expected, "ks")]
    out = kubectl_plugin("status", "ks", "-n", namespace, kubeconfig=viewer)
    assert re.search(r"Intents +False +UnsupportedInClusterMode +\S+ +mode: cluster does not act", out.stdout)
    assert "UnsupportedInClusterMode: mode: cluster does not act" in out.stdout  # the Event
    assert {name: (p["metadata"]["uid"], p["metadata"]["labels"]) for name, p in c.pods().items()} == before
    assert all(s["ready"] for s in c.status()["shards"])
    # removed, the condition goes
    envtest.http.request(
        "PATCH",
        f"{c.base}/ks",
        {"metadata": {"annotations": dict.fromkeys(intents)}},
        content_type="application/merge-patch+json",
    )
    await eventually(lambda: intents_condition() is None, within=30, what="Intents gone", interval=0.3)


async def test_explain_names_the_missing_secret(
    operator: RunningOperator,
    cluster_factory: Callable[[str], Cluster],
    kubeconfig: Path,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    c = cluster_factory("stuck")
    c.create(replicas=2, tls={"secretName": "stuck-tls"})

    async def explained() -> str:
        code = await cli.run(["explain", "stuck", "-n", namespace, "--kubeconfig", str(kubeconfig)])
        out = capsys.readouterr().out
        assert code == 1, out
        assert "InvalidSpec" in out, out
        return out

    text = await eventually(explained, within=60, what="explain to give the InvalidSpec reason", interval=0.5)
    assert text.startswith(f"RedisCluster {namespace}/stuck is not Ready:\n"), text
    assert "The operator reported InvalidSpec" in text
    assert "spec.tls.secretName: Secret 'stuck-tls' not found" in text
    assert "The spec cannot be run as written" in text  # what InvalidSpec means, in words


@pytest.mark.usefixtures("operator")
async def test_backup_and_the_write_intents(
    cluster_factory: Callable[[str], Cluster],
    kubeconfig: Path,
    envtest: Environment,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    c = cluster_factory("kw")
    c.create(replicas=2)
    await eventually(lambda: len(c.pods()) == 2, within=60, what="two pods", interval=0.2)
    base = ["-n", namespace, "--kubeconfig", str(kubeconfig)]
    assert await cli.run([*base, "backup", "kw", "--name", "kw-now", "--pvc", "backups"]) == 0
    backup = envtest.http.get(f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{namespace}/redisbackups/kw-now")
    assert backup["spec"] == {"clusterName": "kw", "destination": {"pvc": {"claimName": "backups"}}}
    assert "redisbackup/kw-now created" in capsys.readouterr().out

    # promote first: fencing kw-0 (the first master) below makes the operator hand the master
    # over to kw-1, and promoting the master is refused by the plugin
    assert await cli.run([*base, "promote", "kw", "kw-1"]) == 0
    assert await cli.run([*base, "fence", "kw", "kw-1"]) == 0
    assert await cli.run([*base, "fence", "kw", "kw-0"]) == 0
    assert await cli.run([*base, "unfence", "kw", "kw-1"]) == 0
    assert await cli.run([*base, "hibernate", "on", "kw"]) == 0
    said = capsys.readouterr()
    assert "note: the operator carries out a planned switchover" in said.err
    # the operator acts on the switchover at once (and removes the annotation once done:
    # tests/operator/test_intents.py), so what was written is read from the command's output
    assert f"rediscluster/kw annotated {cli.SWITCHOVER_TO}=kw-1" in said.out
    annotations = c.get()["metadata"]["annotations"]
    assert json.loads(annotations[cli.FENCED_PODS]) == ["kw-0"]
    assert annotations[cli.HIBERNATION] == "on"

    assert await cli.run([*base, "fence", "kw", "kw-7"]) == 2
    assert "'kw-7' is not a pod of RedisCluster kw (pods: kw-0, kw-1)" in capsys.readouterr().err
    assert await cli.run([*base, "status", "nope"]) == 2
    assert f"error: RedisCluster {namespace}/nope not found" in capsys.readouterr().err
