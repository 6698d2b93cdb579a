"""Pod Security "restricted" (issue 24, test 2) judged by the real apiserver's PodSecurity
admission: in a namespace labelled ``pod-security.kubernetes.io/enforce=restricted`` (and
``warn=restricted``) a replication-mode cluster with TLS and the exporter sidecar, its backup
Job, a restore from it, and a cluster-mode cluster with TLS and its per-shard backup Job all run:
a pod that broke the profile would be refused and the cluster or the backup would never finish.

As extra proof, every pod template the operator wrote (StatefulSets, Jobs) is sent again with
``kubectl create --dry-run=server`` as a Pod: admitted, and no ``Warning:`` line; and a pod
without a securityContext is refused there, so the namespace does enforce. The pods run as the
fixed users (999 for Redis, 65532 for the Jobs, 59000 for the exporter) on the local node too.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from pyctrl.envtest import Environment
from pyctrl.testing import eventually
from tests._certs import CertAuthority, secret_data
from tests.operator.conftest import Cluster, OperatorFactory
from tests.operator.test_backup import Backups, condition, create_claim
from tests.operator.test_cluster_mode import cluster_ready

pytestmark = pytest.mark.controlplane

RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/warn-version": "latest",
}


def restrict(env: Environment, namespace: str) -> None:
    env.http.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": RESTRICTED}},
        content_type="application/merge-patch+json",
    )


async def dry_run_pod(env: Environment, namespace: str, name: str, spec: dict[str, Any]) -> tuple[int, str]:
    """``kubectl create --dry-run=server`` of a Pod with ``spec``: (exit code, stderr)."""
    assert env.bin_dir is not None
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    argv = [str(env.bin_dir / "kubectl"), f"--kubeconfig={env.kubeconfig_path}"]
    argv += ["create", "--dry-run=server", "-o", "name", "-f", "-"]
    out = await asyncio.to_thread(
        subprocess.run, argv, input=json.dumps(pod), capture_output=True, text=True, timeout=120, check=False
    )
    return out.returncode, out.stderr


def templates(env: Environment, namespace: str) -> dict[str, dict[str, Any]]:
    """Every pod template the operator wrote in ``namespace``: StatefulSets' and Jobs'."""
    out = {}
    for kind, path in (("sts", "/apis/apps/v1"), ("job", "/apis/batch/v1")):
        resource = "statefulsets" if kind == "sts" else "jobs"
        for item in env.http.get(f"{path}/namespaces/{namespace}/{resource}")["items"]:
            out[f"{kind}-{item['metadata']['name']}"] = item["spec"]["template"]["spec"]
    return out


def story(env: Environment, namespace: str) -> str:
    """The namespace's Events and its pods' container states: what a timeout reports."""
    events = env.http.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    lines = [f"{e['involvedObject'].get('name')} {e['reason']}: {e['message']}" for e in events][-40:]
    for pod in env.http.get(f"/api/v1/namespaces/{namespace}/pods")["items"]:
        status = pod.get("status") or {}
        states = [
            (c["name"], c.get("ready"), c.get("restartCount"), c.get("state"))
            for c in [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]
        ]
        lines.append(f"pod {pod['metadata']['name']} {status.get('phase')}: {states}")
    return "\n".join(lines)


def uids(c: Cluster) -> dict[str, tuple[int | None, int | None]]:
    """container -> (runAsUser, fsGroup) as the pod runs it (container's over the pod's)."""
    out = {}
    for pod in c.pods().values():
        spec = pod["spec"]
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            own = container.get("securityContext") or {}
            out[container["name"]] = (
                own.get("runAsUser", spec["securityContext"].get("runAsUser")),
                spec["securityContext"].get("fsGroup"),
            )
    return out


async def test_clusters_backups_and_a_restore_run_in_a_namespace_enforcing_restricted(
    start_operator: OperatorFactory,
    cluster_factory: Callable[[str], Cluster],
    envtest: Environment,
    namespace: str,
) -> None:
    # --redis-timeout 3 s: on a loaded 2-core machine a TLS handshake to a cluster-mode node can
    # take over the default 1 s, and the operator assigns slots only once every node answered
    await start_operator(redis_timeout=3.0)
    restrict(envtest, namespace)
    try:
        await _run_everything(cluster_factory, envtest, namespace)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- {namespace}:\n{story(envtest, namespace)}") from None


async def _run_everything(
    cluster_factory: Callable[[str], Cluster], envtest: Environment, namespace: str
) -> None:
    code, err = await dry_run_pod(
        envtest, namespace, "plain", {"containers": [{"name": "c", "image": "redis:7.2"}]}
    )
    assert code != 0, err  # the namespace does enforce
    assert "violates PodSecurity" in err, err
    ca = CertAuthority()
    secrets = f"/api/v1/namespaces/{namespace}/secrets"
    envtest.http.request("POST", secrets, {"metadata": {"name": "tls"}, "data": secret_data(ca, ca.issue())})
    create_claim(envtest, namespace, "backups")
    b = Backups(envtest, namespace)

    # replication mode, TLS, the exporter sidecar: Ready; its backup Job's pod admitted and done
    r = cluster_factory("psa")
    await r.create_ready(1, tls={"secretName": "tls"}, within=300)  # generous: a loaded machine
    assert uids(r) == {"redis": (999, 999), "redis-exporter": (59000, 999)}
    b.create("psa-backup", "psa", {"pvc": {"claimName": "backups"}})
    done = await eventually(lambda: b.finished("psa-backup"), within=300, what="the backup", interval=0.5)
    assert done["phase"] == "Succeeded", done

    # a restore from it: the restore init container (the operator's image, Redis' user) admitted too
    copy = cluster_factory("psa-copy")
    await copy.create_ready(
        1, tls={"secretName": "tls"}, restoreFrom={"backupName": "psa-backup"}, within=300
    )

    async def restored() -> bool:
        cond = condition(copy.status(), "Restored")
        return cond is not None and cond["status"] == "True"

    await eventually(restored, within=60, what="Restored=True", interval=0.5)
    assert uids(copy)["restore"] == (999, 999)

    # cluster mode, TLS: Ready; its per-shard backup Job (init containers per shard) admitted and done
    s = cluster_factory("psc")
    s.create(mode="cluster", shards=3, replicasPerShard=0, tls={"secretName": "tls"})
    await eventually(lambda: cluster_ready(s, 3, 0), within=300, what="3 TLS shards Running", interval=0.5)
    b.create("psc-backup", "psc", {"pvc": {"claimName": "backups"}})
    done = await eventually(
        lambda: b.finished("psc-backup"), within=300, what="the shard backup", interval=0.5
    )
    assert done["phase"] == "Succeeded", done

    # every template the operator wrote, sent again as a Pod: admitted without a warning
    written = templates(envtest, namespace)
    assert {"sts-psa", "sts-psa-copy", "sts-psc", "job-psa-backup-backup", "job-psc-backup-backup"} <= set(
        written
    )
    for name, spec in written.items():
        code, err = await dry_run_pod(envtest, namespace, f"dry-{name}"[:63], spec)
        assert code == 0, (name, err)
        assert "Warning" not in err, (name, err)
        assert spec["automountServiceAccountToken"] is False, name
