"""The chart installed with the real helm on a control plane of its own, the operator running
in-cluster on the local node (its image mapped to this checkout), as an SRE would use it.

One control plane, started without the CRD, serves the module's steps in order (each step leaves
the cluster as the next expects; a failed step fails the later ones with it):
1. ``helm install --skip-crds``: the operator exits 2 and the Pod's status says the CRD is missing;
2. ``helm install`` (CRDs from the chart, lease timings from values, the validating webhook, the
   ServiceMonitor, PodMonitor and PrometheusRule on — the Prometheus Operator's real CRDs installed first, so
   the apiserver validates them against its schema, strictly):
   both replicas Running as the chart's ServiceAccount, exactly one leading, the Lease with the
   chart's duration; the apiserver calls the webhook through its Service (the local node's service
   proxy) and refuses an invalid RedisCluster with the webhook's message; a RedisCluster becomes
   ready and fails over when its master is crashed;
3. ``kubectl delete pod`` of the leader: the other replica leads within lease duration + retry
   period, and a master crash in that window still fails over; every metric the dashboard and
   alerts name is on the new leader's ``/metrics``;
4. ``/metrics`` over HTTPS: no token 401, an unauthorized ServiceAccount 403, the chart's
   metrics-reader role served; the operator's ServiceAccount may not list or watch Secrets;
5. ``helm upgrade`` with a changed value rolls the Deployment; the webhook's self-signed
   certificate and the caBundle stay the same, and the new pods still refuse an invalid spec;
6. a ServiceAccount without RBAC: Forbidden in the log and on ``/readyz``, the replica never ready;
7. ``helm uninstall`` leaves nothing of the release, the CRD stays;
8. ``kubectl apply -k config/default``: the same operator in ``rediscluster-system``, two replicas,
   one leader.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml

from pyctrl.client.errors import AlreadyExists, ApiError, NotFound
from pyctrl.envtest import Environment
from pyctrl.envtest.node.pod import LOG_DIR_ANNOTATION
from pyctrl.testing import eventually
from tests.install._promql import named_by_dashboard_and_alerts
from tests.install.conftest import CHART, ROOT, run
from tests.operator.conftest import Cluster
from tests.operator.test_podsecurity import restrict

pytestmark = pytest.mark.controlplane

NS = "ops"
RELEASE = "rco"
LEASE = "rediscluster-operator.redis.pyctrl.dev"
# The chart's leaderElection values the release is installed with (defaults 15 / 10 / 2).
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 12, 8, 2
APPS = "apps"
CRD = "redisclusters.redis.pyctrl.dev"
SLACK = 20.0  # a loaded 2-core machine: bounds are generous, the measured figures are printed


class Helm:
    """The real helm against ``env`` (its config and cache in a temporary directory)."""

    def __init__(self, binary: str, env: Environment, home: Path) -> None:
        self.binary = binary
        self.environ = {
            **os.environ,
            "KUBECONFIG": str(env.kubeconfig_path),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.binary, *args], env=self.environ, capture_output=True, text=True, timeout=600, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
        return result


@pytest.fixture(scope="module")
def cp() -> Iterator[Environment]:
    """A control plane without the CRD (helm installs it), with the local node."""
    env = Environment(crd_directory_paths=[], local_node=True)
    env.start()
    try:
        yield env
    finally:
        env.stop()


@pytest.fixture(scope="module")
def chart(helm: str, cp: Environment, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm, cp, tmp_path_factory.mktemp("helm"))


# -- reading the cluster ---------------------------------------------------------------------------
def operator_pods(env: Environment, namespace: str = NS, instance: str = RELEASE) -> list[dict[str, Any]]:
    sel = f"app.kubernetes.io/instance%3D{instance}"
    items = env.http.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={sel}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def holder(env: Environment, namespace: str = NS) -> str | None:
    """The pod name of the Lease's holder (identity ``<hostname>_<uuid>``; hostname = pod name)."""
    try:
        lease = env.http.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{LEASE}")
    except NotFound:
        return None
    identity = lease["spec"].get("holderIdentity") or ""
    return identity.rsplit("_", 1)[0] or None


def log_of(pod: dict[str, Any], container: str = "manager") -> str:
    path = Path(pod["metadata"]["annotations"][LOG_DIR_ANNOTATION]) / f"{container}.log"
    return path.read_text() if path.exists() else ""


def whoami(env: Environment, pod: dict[str, Any]) -> str:
    """The identity of the token the node mounted into ``pod`` (SelfSubjectReview with it)."""
    pod_dir = Path(pod["metadata"]["annotations"][LOG_DIR_ANNOTATION])
    (token_file,) = (pod_dir / "volumes").glob("kube-api-access-*/token")
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    req = urllib.request.Request(
        f"{env.server_url}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        data=json.dumps(review).encode(),
        headers={"Authorization": f"Bearer {token_file.read_text()}", "Content-Type": "application/json"},
        method="POST",
    )
    ctx = ssl.create_default_context(cafile=str(env.pki.ca_cert))
    with urllib.request.urlopen(req, context=ctx, timeout=10) as answer:
        return str(json.loads(answer.read())["status"]["userInfo"]["username"])


async def two_running_one_leading(env: Environment, namespace: str = NS, instance: str = RELEASE) -> str:
    async def settled() -> str | None:
        pods = operator_pods(env, namespace, instance)
        names = {p["metadata"]["name"] for p in pods}
        leader = holder(env, namespace)
        if len(pods) == 2 and all(is_ready(p) for p in pods) and leader in names:
            return leader
        return None

    return str(
        await eventually(settled, within=180, what="two ready operator pods, one leading", interval=0.5)
    )


async def crash_master(cluster: Cluster) -> str:
    master = str(cluster.status()["currentMaster"])
    victim = await cluster.redis(master)
    try:
        await victim.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
    except (aioredis.ConnectionError, aioredis.ResponseError):
        pass  # the connection closes as the server exits
    finally:
        await victim.aclose()
    return master


async def failed_over(cluster: Cluster, old_master: str, epoch: int) -> None:
    async def done() -> bool:
        s = cluster.status()
        return bool(s.get("currentMaster") not in (None, old_master) and s.get("masterEpoch", 0) > epoch)

    await eventually(done, within=90, what=f"a failover away from {old_master}", interval=0.3)


WEBHOOK_SECRET = f"{RELEASE}-rediscluster-operator-webhook-tls"
WEBHOOK_CONFIG = f"{RELEASE}-rediscluster-operator-vrediscluster.redis.pyctrl.dev"


async def the_webhook_refuses_an_invalid_spec(env: Environment) -> None:
    """The apiserver calls the in-cluster webhook (Service -> ClusterIP -> a ready operator pod)
    and refuses a spec only the webhook can judge (the CRD schema accepts it)."""
    bad = {
        "apiVersion": "redis.pyctrl.dev/v1alpha1",
        "kind": "RedisCluster",
        "metadata": {"name": "bad"},
        "spec": {"replicas": 2, "redisConfig": {"client-output-buffer-limit": "replica 0 0 0"}},
    }
    path = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{APPS}/redisclusters?dryRun=All"

    def refused() -> ApiError:  # retried until the proxy listens on a new Service's ClusterIP
        try:
            env.http.request("POST", path, bad)
        except ApiError as exc:
            if exc.code == 422:
                return exc
            raise  # e.g. 500 "failed calling webhook": reported if still the last outcome
        raise AssertionError("an invalid RedisCluster was admitted")

    error = await eventually(refused, within=30, what="the webhook's refusal")
    assert (
        'admission webhook "vrediscluster.redis.pyctrl.dev" denied the request: '
        "spec.redisConfig key 'client-output-buffer-limit'"
    ) in error.message


def monitoring_objects_pass_the_prometheus_operator_schema(
    env: Environment, chart: Helm, values: list[str]
) -> None:
    """The release's ServiceMonitor, PodMonitor (the Redis pods' exporters) and PrometheusRule
    exist, and what the chart renders passes the real CRDs' schema with unknown fields refused
    (``fieldValidation=Strict``), while a value the schema forbids is refused (the validation is
    real)."""
    rendered = yaml.safe_load_all(chart("template", RELEASE, str(CHART), "-n", NS, *values).stdout)
    plurals = {
        "ServiceMonitor": "servicemonitors",
        "PodMonitor": "podmonitors",
        "PrometheusRule": "prometheusrules",
    }
    objects = [o for o in rendered if o and o["kind"] in plurals]
    assert sorted(o["kind"] for o in objects) == sorted(plurals)
    for obj in objects:
        name = obj["metadata"]["name"]
        path = f"/apis/monitoring.coreos.com/v1/namespaces/{NS}/{plurals[obj['kind']]}/{name}"
        obj["metadata"]["resourceVersion"] = env.http.get(path)["metadata"]["resourceVersion"]
        env.http.request("PUT", f"{path}?dryRun=All&fieldValidation=Strict", obj)
        if obj["kind"] == "ServiceMonitor":
            obj["spec"]["endpoints"][0]["interval"] = "soon"
            with pytest.raises(ApiError, match=r"spec.endpoints\[0\].interval"):
                env.http.request("PUT", f"{path}?dryRun=All", obj)


def webhook_certificates(env: Environment) -> tuple[str, str]:
    """The serving certificate in the release's Secret and the caBundle the apiserver trusts."""
    secret = env.http.get(f"/api/v1/namespaces/{NS}/secrets/{WEBHOOK_SECRET}")
    config = env.http.get(
        f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK_CONFIG}"
    )
    (hook,) = config["webhooks"]
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    return secret["data"]["tls.crt"], hook["clientConfig"]["caBundle"]


# -- the steps -------------------------------------------------------------------------------------
async def test_install_without_the_crds_shows_the_missing_crd_in_the_pod_status(
    cp: Environment, chart: Helm
) -> None:
    chart(
        "install",
        RELEASE,
        str(CHART),
        "-n",
        NS,
        "--create-namespace",
        "--skip-crds",
        "--set",
        "replicaCount=1",
    )

    def terminated() -> dict[str, Any] | None:
        for pod in operator_pods(cp):
            for status in pod.get("status", {}).get("containerStatuses") or []:
                for state in (status.get("state", {}), status.get("lastState", {})):
                    if "terminated" in state:
                        return dict(state["terminated"])
        return None

    state = await eventually(terminated, within=120, what="the operator to exit", interval=0.5)
    assert state["exitCode"] == 2
    assert "The RedisCluster CRD is not installed" in state["message"]
    chart("uninstall", RELEASE, "-n", NS, "--wait")
    await eventually(lambda: not operator_pods(cp), within=60, what="the release's pods gone", interval=0.5)


async def test_install_runs_two_replicas_one_leading_and_a_cluster_fails_over(
    cp: Environment, chart: Helm, monitoring_crds: Path
) -> None:
    cp.install_crds([monitoring_crds])
    timings = {"leaseDuration": LEASE_DURATION, "renewDeadline": RENEW_DEADLINE, "retryPeriod": RETRY_PERIOD}
    values = [arg for key, value in timings.items() for arg in ("--set", f"leaderElection.{key}={value}")]
    for enabled in ("webhook", "serviceMonitor", "prometheusRule"):
        values += ["--set", f"{enabled}.enabled=true"]
    with contextlib.suppress(AlreadyExists):  # made by the first test of the module, if it ran
        cp.create_namespace(NS)
    restrict(cp, NS)  # Pod Security "restricted" (issue 24): the operator's pods are admitted
    chart("install", RELEASE, str(CHART), "-n", NS, *values, "--wait", "--timeout", "5m")
    assert cp.http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
    leader = await two_running_one_leading(cp)
    monitoring_objects_pass_the_prometheus_operator_schema(cp, chart, values)
    lease = cp.http.get(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}")
    assert lease["spec"]["leaseDurationSeconds"] == LEASE_DURATION  # the value reached the operator
    sa = f"{RELEASE}-rediscluster-operator"
    for pod in operator_pods(cp):
        assert pod["spec"]["serviceAccountName"] == sa
        assert whoami(cp, pod) == f"system:serviceaccount:{NS}:{sa}"
    standby = next(p for p in operator_pods(cp) if p["metadata"]["name"] != leader)
    assert "successfully acquired lease" not in log_of(standby).lower()

    cp.create_namespace(APPS)
    restrict(cp, APPS)  # and so are the Redis pods the in-cluster operator makes
    await the_webhook_refuses_an_invalid_spec(cp)
    cluster = Cluster(cp, APPS, "cache")
    cluster.create(replicas=2, downAfterMilliseconds=2000)
    await eventually(lambda: cluster.ready(2), within=120, what="the RedisCluster Running", interval=0.5)
    epoch = int(cluster.status()["masterEpoch"])
    old = await crash_master(cluster)
    await failed_over(cluster, old, epoch)


async def test_deleting_the_leading_pod_hands_over_and_a_master_crash_meanwhile_still_fails_over(
    cp: Environment, kubectl: str
) -> None:
    leader = await two_running_one_leading(cp)
    cluster = Cluster(cp, APPS, "cache")
    await eventually(lambda: cluster.ready(2), within=120, what="the RedisCluster Running", interval=0.5)
    epoch = int(cluster.status()["masterEpoch"])
    run(kubectl, f"--kubeconfig={cp.kubeconfig_path}", "-n", NS, "delete", "pod", leader, "--wait=false")
    deleted_at = time.monotonic()
    old = await crash_master(cluster)  # in the hand-over window

    # The released lease goes to whichever candidate tries first: the standby, or the pod the
    # ReplicaSet starts in place of the deleted one (leader election prefers neither).
    def new_leader() -> str:
        current = holder(cp)
        pods = {p["metadata"]["name"] for p in operator_pods(cp)} - {leader}
        if current is None or current not in pods:
            raise AssertionError(f"holder {current!r}; the release's other pods: {sorted(pods)}")
        return current

    successor = await eventually(
        new_leader, within=LEASE_DURATION + RETRY_PERIOD + SLACK, what="another pod leading", interval=0.2
    )
    took = time.monotonic() - deleted_at
    bound = LEASE_DURATION + RETRY_PERIOD
    print(f"\nleader {leader} deleted: {successor} leads after {took:.1f}s (lease + retry: {bound:g}s)")
    await failed_over(cluster, old, epoch)
    assert "FailoverCompleted" in {
        e["reason"] for e in cp.http.get(f"/api/v1/namespaces/{APPS}/events")["items"]
    }

    # Every metric the dashboard and alerts name is exported by the (new) leader, to a scraper
    # bound to the chart's metrics-reader ClusterRole (HTTPS, bearer token: secure by default).
    pod = next(p for p in operator_pods(cp) if p["metadata"]["name"] == successor)
    url = f"https://{pod['status']['podIP']}:8443/metrics"
    exported = scrape(url, token=scraper_token(cp, "prometheus", reader=True))
    # Not here: redis_* (the Redis pods' exporter sidecars: tests/toolkit scrapes the real
    # exporter for each), and the series only a backup schedule, cluster mode or continuous
    # archiving gives samples (tests/operator/test_kubectl_plugin.py finds every operator name in
    # its registry).
    elsewhere = ("redis_", "rediscluster_backup_", "rediscluster_slots_", "rediscluster_archive_")
    named = {n for n in named_by_dashboard_and_alerts() if not n.startswith(elsewhere)}
    assert named, "no metric names found"
    missing = {m for m in named if not {m, f"{m}_total", f"{m}_bucket"} & exported}
    assert not missing, f"named but not exported: {sorted(missing)}"


def probe(url: str) -> tuple[int, str]:
    """Status and body of a GET (a 500 answer included)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _unverified() -> ssl.SSLContext:
    """The operator's metrics certificate is self-signed at its start (the chart's default)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def scrape(url: str, *, token: str) -> set[str]:
    """Metric names (samples) on a Prometheus text exposition, read with a bearer token."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10, context=_unverified()) as answer:
        return set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", answer.read().decode(), re.MULTILINE))


def scrape_status(url: str, token: str | None) -> tuple[int, str]:
    """Status and body of a GET of ``url`` with ``token`` (or none)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=10, context=_unverified()
        ) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def plain_http_refused(url: str, token: str) -> bool:
    """Whether a plain-HTTP GET of the TLS port is refused (closed, or not a 200)."""
    try:
        return scrape_status(url, token)[0] != 200
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError):
        return True


def can_i(env: Environment, kubectl: str, user: str, *args: str) -> str:
    """``kubectl auth can-i ARGS --as=USER``: the apiserver's "yes" or "no"."""
    answer = subprocess.run(
        [kubectl, f"--kubeconfig={env.kubeconfig_path}", "auth", "can-i", *args, f"--as={user}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert answer.stdout.strip() in ("yes", "no"), answer.stderr
    return answer.stdout.strip()


def scraper_token(env: Environment, name: str, *, reader: bool) -> str:
    """A token of the ServiceAccount ``name`` in the release namespace (created once), bound to
    the chart's ``metrics-reader`` ClusterRole when ``reader``."""
    accounts = f"/api/v1/namespaces/{NS}/serviceaccounts"
    try:
        env.http.get(f"{accounts}/{name}")
    except NotFound:
        env.http.request("POST", accounts, {"metadata": {"name": name}})
    if reader:
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-metrics-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{RELEASE}-rediscluster-operator-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}],
        }
        env.http.request(
            "PATCH",
            f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}-metrics-reader?fieldManager=test",
            yaml.safe_dump(binding).encode(),
            content_type="application/apply-patch+yaml",
        )
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    return str(env.http.request("POST", f"{accounts}/{name}/token", request)["status"]["token"])


async def test_metrics_need_a_token_rbac_allows_and_the_operator_may_not_list_secrets(
    cp: Environment, kubectl: str
) -> None:
    """Issue 24, test 7, on the release: ``/metrics`` is HTTPS; no token is 401, a token of a
    ServiceAccount RBAC does not allow is 403 naming it, one bound to the chart's metrics-reader
    ClusterRole is served; and the operator's ServiceAccount may not list Secrets anywhere, nor
    watch them (the apiserver's own answer), while it runs the RedisCluster above."""
    leader = await two_running_one_leading(cp)
    pod = next(p for p in operator_pods(cp) if p["metadata"]["name"] == leader)
    url = f"https://{pod['status']['podIP']}:8443/metrics"
    status, body = scrape_status(url, None)
    assert status == 401, body
    intruder = scraper_token(cp, "intruder", reader=False)
    status, body = scrape_status(url, intruder)
    assert status == 403, body
    assert f"user=system:serviceaccount:{NS}:intruder" in body
    reader = scraper_token(cp, "prometheus", reader=True)

    async def served() -> bool:  # the binding may reach the authorizer's cache a moment later
        return scrape_status(url, reader)[0] == 200

    await eventually(served, within=60, what="/metrics served to the metrics-reader", interval=0.5)
    status, body = scrape_status(url, reader)
    assert "controller_runtime_reconcile_total" in body
    assert plain_http_refused(url.replace("https://", "http://"), reader)
    sa = f"system:serviceaccount:{NS}:{RELEASE}-rediscluster-operator"
    assert can_i(cp, kubectl, sa, "list", "secrets", "-A") == "no"
    assert can_i(cp, kubectl, sa, "watch", "secrets", "-A") == "no"
    assert can_i(cp, kubectl, sa, "get", "secrets", "-n", APPS) == "yes"
    cache = Cluster(cp, APPS, "cache")  # Ready again under exactly these permissions (the
    # previous test failed its master over: the old master may still be rejoining)
    await eventually(lambda: cache.ready(2), within=120, what="cache Running with 2 ready", interval=1)


async def test_upgrade_with_a_changed_value_rolls_the_deployment(cp: Environment, chart: Helm) -> None:
    before = {p["metadata"]["name"] for p in operator_pods(cp)}
    certificates = webhook_certificates(cp)
    chart("upgrade", RELEASE, str(CHART), "-n", NS, "--reuse-values", "--set", "logLevel=debug", "--wait")
    assert webhook_certificates(cp) == certificates  # looked up, not generated again

    async def rolled() -> bool:
        pods = operator_pods(cp)
        names = {p["metadata"]["name"] for p in pods}
        return len(pods) == 2 and not names & before and all(is_ready(p) for p in pods)

    await eventually(rolled, within=240, what="two new ready pods replacing the old ones", interval=0.5)
    for pod in operator_pods(cp):
        assert "--log-level=debug" in pod["spec"]["containers"][0]["args"]
    history = chart("history", RELEASE, "-n", NS, "-o", "json").stdout
    assert [r["revision"] for r in json.loads(history)] == [1, 2]
    await the_webhook_refuses_an_invalid_spec(cp)  # served by the new pods with the same certificate


async def test_a_service_account_without_rbac_is_forbidden_in_the_log_and_never_ready(
    cp: Environment, chart: Helm
) -> None:
    ns = "norbac"
    chart(
        "install", "bare", str(CHART), "-n", ns, "--create-namespace", "--skip-crds",
        "--set", "rbac.create=false", "--set", "replicaCount=1",
    )  # fmt: skip

    def forbidden() -> dict[str, Any] | None:
        pods = operator_pods(cp, ns, "bare")
        return pods[0] if pods and "forbidden" in log_of(pods[0]).lower() else None

    pod = await eventually(forbidden, within=120, what="Forbidden in the operator's log", interval=0.5)
    assert f"system:serviceaccount:{ns}:bare-rediscluster-operator" in log_of(pod)
    assert not is_ready(pod)
    # /readyz (what the readiness probe reads) names the informer and the Forbidden.
    status, readyz = probe(f"http://{pod['status']['podIP']}:8081/readyz?verbose")
    assert status == 500
    assert re.search(r"informer for \w+: Forbidden: .* cannot (list|watch) resource", readyz), readyz
    assert f"system:serviceaccount:{ns}:bare-rediscluster-operator" in readyz
    chart("uninstall", "bare", "-n", ns, "--wait")


async def test_uninstall_leaves_nothing_of_the_release_but_the_crd(cp: Environment, chart: Helm) -> None:
    cp.http.request("DELETE", f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{APPS}/redisclusters/cache")
    chart("uninstall", RELEASE, "-n", NS, "--wait")
    await eventually(lambda: not operator_pods(cp), within=120, what="the operator pods gone", interval=0.5)
    sel = f"app.kubernetes.io/instance%3D{RELEASE}"
    for path in (
        f"/api/v1/namespaces/{NS}/serviceaccounts",
        f"/api/v1/namespaces/{NS}/services",
        f"/apis/apps/v1/namespaces/{NS}/deployments",
        f"/apis/apps/v1/namespaces/{NS}/replicasets",
        f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        f"/apis/monitoring.coreos.com/v1/namespaces/{NS}/servicemonitors",
        f"/apis/monitoring.coreos.com/v1/namespaces/{NS}/prometheusrules",
        f"/api/v1/namespaces/{NS}/secrets",
    ):
        left = [o["metadata"]["name"] for o in cp.http.get(f"{path}?labelSelector={sel}")["items"]]
        assert left == [], f"{path}: {left}"
    secrets = cp.http.get(f"/api/v1/namespaces/{NS}/secrets")["items"]
    assert not [s for s in secrets if s["type"] == "helm.sh/release.v1"]
    assert cp.http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")  # kept


async def test_kubectl_apply_k_config_default_runs_the_operator_in_its_own_namespace(
    cp: Environment, kubectl: str
) -> None:
    cmd = [kubectl, f"--kubeconfig={cp.kubeconfig_path}"]
    run(*cmd, "apply", "-k", str(ROOT / "config" / "default"))
    try:
        leader = await two_running_one_leading(cp, "rediscluster-system", "rediscluster-operator")
        pod = next(p for p in operator_pods(cp, "rediscluster-system", "rediscluster-operator"))
        assert pod["spec"]["serviceAccountName"] == "rediscluster-operator"
        assert "--leader-elect" in pod["spec"]["containers"][0]["args"]
        assert leader.startswith("rediscluster-operator-")
    finally:
        run(*cmd, "delete", "-k", str(ROOT / "config" / "default"), "--wait", check=False)
