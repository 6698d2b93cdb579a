"""Least privilege on the real apiserver (issue 24, test 7).

The operator of these tests holds only the generated ClusterRole (``tests/operator/conftest.py``):

- the apiserver's own authorizer says it may not list or watch Secrets, in any namespace or
  across all (``kubectl auth can-i ... --as``), and may get, create and patch them;
- the generated rules' scopes match the apiserver's discovery (``packaging.CLUSTER_SCOPED``: what
  the chart's ``watchNamespaces`` mode binds cluster-wide because a Role cannot grant it);
- the operator still works with no Secret watch: a cluster whose password Secret is created only
  after the cluster becomes Running with it (the reconcile looks again every ``SECRET_POLL``), and
  a user's new password in its Secret reaches every pod (read on the next reconcile; no restart).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rexc
import yaml

from examples.rediscluster.packaging import CLUSTER_SCOPED
from pyctrl.envtest import Environment
from pyctrl.testing import eventually
from tests.crdgen._kube import kubectl_run
from tests.operator.conftest import OPERATOR_USER, ROLE, Cluster, RunningOperator

pytestmark = pytest.mark.controlplane


def can_i(envtest: Environment, kubeconfig: Path, *args: str) -> str:
    """``kubectl auth can-i ARGS --as=<the operator's user>``: "yes" or "no" (the apiserver's answer
    to a SubjectAccessReview for that user)."""
    proc = kubectl_run(envtest, kubeconfig, "auth", "can-i", *args, f"--as={OPERATOR_USER}")
    answer = proc.stdout.strip()
    assert answer in ("yes", "no"), proc.stderr
    return answer


def test_the_operator_may_not_list_or_watch_secrets_anywhere(
    envtest: Environment, kubeconfig: Path, operator_kubeconfig: Path, namespace: str
) -> None:
    for verb in ("list", "watch"):
        assert can_i(envtest, kubeconfig, verb, "secrets", "-A") == "no"
        assert can_i(envtest, kubeconfig, verb, "secrets", "-n", namespace) == "no"
    for verb in ("get", "create", "patch"):  # the Secrets a spec names, the ones it owns
        assert can_i(envtest, kubeconfig, verb, "secrets", "-n", namespace) == "yes"
    assert can_i(envtest, kubeconfig, "delete", "secrets", "-n", namespace) == "no"
    assert can_i(envtest, kubeconfig, "delete", "jobs.batch", "-n", namespace) == "no"
    assert can_i(envtest, kubeconfig, "update", "redisclusters.redis.pyctrl.dev", "-n", namespace) == "no"
    assert can_i(envtest, kubeconfig, "list", "redisclusters.redis.pyctrl.dev", "-A") == "yes"


def test_the_cluster_scoped_rules_are_what_discovery_says_is_cluster_scoped(envtest: Environment) -> None:
    (role,) = [d for d in yaml.safe_load_all(ROLE.read_text()) if d]
    declared = {
        (group, resource.split("/")[0])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    scopes: dict[tuple[str, str], bool] = {}
    for group in {g for g, _ in declared}:
        if group == "":
            paths = ["/api/v1"]
        else:
            versions = envtest.http.get(f"/apis/{group}")["versions"]
            paths = [f"/apis/{v['groupVersion']}" for v in versions]
        for path in paths:
            for res in envtest.http.get(path)["resources"]:
                scopes.setdefault((group, res["name"]), bool(res["namespaced"]))
    assert declared <= set(scopes), sorted(declared - set(scopes))
    assert {d for d in declared if not scopes[d]} == set(CLUSTER_SCOPED)


async def _authenticates(ip: str, user: str | None, password: str) -> bool:
    client = aioredis.Redis(host=ip, port=6379, username=user, password=password, socket_timeout=2)
    try:
        return bool(await client.ping())
    except (rexc.AuthenticationError, rexc.ResponseError, rexc.ConnectionError, rexc.TimeoutError):
        return False
    finally:
        await client.aclose()


def _secret(c: Cluster, name: str, password: str, *, create: bool) -> None:
    secrets = f"/api/v1/namespaces/{c.namespace}/secrets"
    body = {"metadata": {"name": name}, "data": {"password": base64.b64encode(password.encode()).decode()}}
    if create:
        c.envtest.http.request("POST", secrets, body)
    else:
        c.envtest.http.request("PUT", f"{secrets}/{name}", body)


async def test_without_a_secret_watch_a_late_secret_and_a_new_user_password_still_arrive(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("nowatch")
    _secret(c, "app-pw", "app-first-password", create=True)
    users = [{"name": "app", "passwordSecret": {"name": "app-pw"}, "rules": "~app:* +get +set +ping"}]
    c.create(
        replicas=2, downAfterMilliseconds=2000, auth={"passwordSecret": {"name": "late-pw"}}, users=users
    )

    def missing_reported() -> bool:
        events = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
        return any(e["reason"] == "SecretMissing" and "late-pw" in e["message"] for e in events)

    await eventually(missing_reported, within=60, what="an Event SecretMissing naming late-pw", interval=0.3)
    assert not c.pods()  # nothing applied without the password
    _secret(c, "late-pw", "the-default-password", create=True)  # no watch tells the operator
    await eventually(lambda: c.ready(2), within=180, what="Running once the Secret exists", interval=0.5)
    pods = c.pods()
    for pod in pods:
        await eventually(
            partial(_authenticates, c.pod_ip(pod), "app", "app-first-password"),
            within=60,
            what=f"user app on {pod}",
            interval=0.5,
        )
    restarts = {n: p["status"]["containerStatuses"][0]["restartCount"] for n, p in pods.items()}

    _secret(c, "app-pw", "app-second-password", create=False)  # rotated in place
    for pod in pods:
        ip = c.pod_ip(pod)
        await eventually(
            partial(_authenticates, ip, "app", "app-second-password"),
            within=120,  # the next reconcile: at the latest the settled look-again (30 s)
            what=f"the new password of user app on {pod}",
            interval=0.5,
        )
        assert not await _authenticates(ip, "app", "app-first-password")
    after = {n: p["status"]["containerStatuses"][0]["restartCount"] for n, p in c.pods().items()}
    assert after == restarts  # loaded, not restarted
