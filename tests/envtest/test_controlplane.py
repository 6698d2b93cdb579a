"""The local control plane behaves like a real cluster: CRUD, controllers, CRDs, RBAC."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyctrl.envtest import Environment, poll_until
from pyctrl.envtest._http import ApiError

pytestmark = pytest.mark.controlplane

TESTDATA = Path(__file__).parent / "testdata"


def kubectl(envtest: Environment, kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    assert envtest.bin_dir is not None
    proc = subprocess.run(
        [str(envtest.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def raw_request(kubeconfig: Path, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """An HTTPS request using only what the kubeconfig file says (no pyctrl code)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
    ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(cluster["server"] + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_apiserver_reports_the_pinned_release(envtest: Environment) -> None:
    version = envtest.http.get("/version")
    assert version["gitVersion"] == "v1.36.3"
    assert (version["major"], version["minor"]) == ("1", "36")


def test_configmap_crud_through_kubectl(envtest: Environment, kubeconfig: Path, namespace: str) -> None:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}}
    kubectl(envtest, kubeconfig, "-n", namespace, "apply", "-f", "-", stdin=json.dumps(manifest))
    got = json.loads(kubectl(envtest, kubeconfig, "-n", namespace, "get", "configmap", "cm", "-o", "json"))
    assert got["data"] == {"a": "1"}
    kubectl(envtest, kubeconfig, "-n", namespace, "patch", "configmap", "cm", "-p", '{"data":{"a":"2"}}')
    got = json.loads(kubectl(envtest, kubeconfig, "-n", namespace, "get", "configmap", "cm", "-o", "json"))
    assert got["data"] == {"a": "2"}
    kubectl(envtest, kubeconfig, "-n", namespace, "delete", "configmap", "cm")
    out = kubectl(envtest, kubeconfig, "-n", namespace, "get", "configmaps", "-o", "name")
    assert "configmap/cm" not in out.split()


def test_configmap_crud_through_raw_https(kubeconfig: Path, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    status, created = raw_request(kubeconfig, "POST", base, {"metadata": {"name": "cm"}, "data": {"k": "v"}})
    assert status == 201
    status, got = raw_request(kubeconfig, "GET", f"{base}/cm")
    assert (status, got["data"]) == (200, {"k": "v"})
    got["data"]["k"] = "w"
    status, updated = raw_request(kubeconfig, "PUT", f"{base}/cm", got)
    assert status == 200
    assert updated["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    status, _ = raw_request(kubeconfig, "PUT", f"{base}/cm", created)  # stale resourceVersion
    assert status == 409
    status, _ = raw_request(kubeconfig, "DELETE", f"{base}/cm")
    assert status == 200
    status, _ = raw_request(kubeconfig, "GET", f"{base}/cm")
    assert status == 404


def _statefulset(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 3,
            "podManagementPolicy": "Parallel",
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                # No node matches: the pods stay unscheduled, so only the controllers act here.
                "spec": {
                    "nodeSelector": {"pyctrl.dev/no-such-node": "true"},
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def test_statefulset_pods_are_created_and_garbage_collected(envtest: Environment, namespace: str) -> None:
    http = envtest.http
    http.request("POST", f"/apis/apps/v1/namespaces/{namespace}/statefulsets", _statefulset("web"))
    pods_path = f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dweb"

    def pod_names() -> set[str]:
        return {p["metadata"]["name"] for p in http.get(pods_path)["items"]}

    poll_until("3 pods from kube-controller-manager", lambda: pod_names() == {"web-0", "web-1", "web-2"}, 60)
    pod = http.get(f"/api/v1/namespaces/{namespace}/pods/web-0")
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    http.request(
        "DELETE",
        f"/apis/apps/v1/namespaces/{namespace}/statefulsets/web",
        {"propagationPolicy": "Background"},
    )
    poll_until("garbage collection of the pods", lambda: pod_names() == set(), 60)


def test_crd_from_directory_is_established_and_enforces_its_schema(
    envtest: Environment, namespace: str
) -> None:
    assert envtest.install_crds([TESTDATA]) == ["widgets.test.pyctrl.dev"]
    base = f"/apis/test.pyctrl.dev/v1/namespaces/{namespace}/widgets"
    ok = {
        "apiVersion": "test.pyctrl.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 3},
    }
    assert envtest.http.request("POST", base, ok)["spec"]["size"] == 3
    bad = {**ok, "metadata": {"name": "too-big"}, "spec": {"size": 9}}
    with pytest.raises(ApiError) as err:
        envtest.http.request("POST", base, bad)
    assert err.value.code == 422
    assert "spec.size" in str(err.value)


def test_user_without_role_bindings_is_forbidden(envtest: Environment, namespace: str) -> None:
    kubeconfig = envtest.add_user("alice", groups=["developers"])
    status, body = raw_request(kubeconfig, "GET", f"/api/v1/namespaces/{namespace}/configmaps")
    assert status == 403
    assert 'User "alice"' in body["message"]
    envtest.http.request(
        "POST",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        {
            "metadata": {"name": "alice-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}],
        },
    )
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    poll_until("the role binding to take effect", lambda: raw_request(kubeconfig, "GET", path)[0] == 200, 30)
