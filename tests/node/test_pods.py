"""Pod features on the local node: volumes at their mountPaths, env and $(VAR), probes, restart
policies, init containers, graceful deletion with preStop, and the local volume provisioner."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest import Environment
from pyctrl.envtest.node import LOG_DIR_ANNOTATION
from pyctrl.envtest.node.kube import ApiError, Kube
from pyctrl.testing import eventually
from tests.node.helpers import (
    alive,
    condition,
    container_pid,
    container_status,
    create,
    get_pod,
    read,
)

pytestmark = pytest.mark.controlplane


def exists(path: Path) -> bool:
    return path.exists()


async def make_pod(kube: Kube, namespace: str, name: str, spec: dict[str, Any]) -> None:
    await create(kube, f"/api/v1/namespaces/{namespace}/pods", {"metadata": {"name": name}, "spec": spec})


async def pod_where(kube: Kube, namespace: str, name: str, what: str, check: Any) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        pod = await get_pod(kube, namespace, name)
        return pod if pod is not None and check(pod) else None

    return await eventually(probe, within=60, what=f"pod {name}: {what}", interval=0.1)


async def log_with(kube: Kube, namespace: str, name: str, container: str, text: str) -> str:
    pod = await pod_where(
        kube, namespace, name, "log dir", lambda p: LOG_DIR_ANNOTATION in p["metadata"].get("annotations", {})
    )
    log = Path(pod["metadata"]["annotations"][LOG_DIR_ANNOTATION]) / f"{container}.log"

    async def contains() -> str | None:
        content = read(log)
        return content if text in content else None

    return await eventually(contains, within=60, what=f"{text!r} in {log}", interval=0.1)


async def test_containers_see_their_volumes_at_their_mount_paths(kube: Kube, namespace: str) -> None:
    await create(
        kube,
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"metadata": {"name": "app"}, "data": {"app.conf": "color=blue"}},
    )
    await create(
        kube,
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "app"}, "stringData": {"password": "s3cret"}},
    )
    script = "; ".join(
        [
            "echo conf=$(cat /etc/app-config/app.conf)",
            "echo password=$(cat /etc/app-secret/password)",
            "echo podname=$(cat /etc/podinfo/name)",
            "echo scratch > /scratch/f; echo scratch=$(cat /scratch/f)",
            "sa=/var/run/secrets/kubernetes.io/serviceaccount",
            'echo sa-namespace=$(cat $sa/namespace) sa-ca=$(grep -c "BEGIN CERTIFICATE" $sa/ca.crt)',
            "echo token-parts=$(awk -F. '{print NF}' $sa/token)",
            "echo ro=$(touch /etc/app-config/x 2>&1 | grep -c 'Read-only')",
            "echo done; exec sleep 300",
        ]
    )
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "redis:7",
                "command": ["sh", "-c", script],
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/app-config"},
                    {"name": "secret", "mountPath": "/etc/app-secret"},
                    {"name": "info", "mountPath": "/etc/podinfo"},
                    {"name": "scratch", "mountPath": "/scratch"},
                ],
            }
        ],
        "volumes": [
            {"name": "config", "configMap": {"name": "app"}},
            {"name": "secret", "secret": {"secretName": "app"}},
            {
                "name": "info",
                "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]},
            },
            {"name": "scratch", "emptyDir": {}},
        ],
    }
    await make_pod(kube, namespace, "vols", spec)
    log = await log_with(kube, namespace, "vols", "c", "done")
    for expected in (
        "conf=color=blue",
        "password=s3cret",
        "podname=vols",
        "scratch=scratch",
        f"sa-namespace={namespace} sa-ca=1",
        "token-parts=3",
        "ro=1",
    ):
        assert expected in log
    for host_path in ("/etc/app-config", "/etc/app-secret", "/etc/podinfo", "/scratch"):
        assert not exists(Path(host_path))


async def test_containers_see_the_managed_hosts_file_with_their_own_names(kube: Kube, namespace: str) -> None:
    """As the kubelet writes it: a Pod resolves its hostname and (with a subdomain, as a
    StatefulSet's Pods) its stable name to its own IP, and its hostAliases; no cluster DNS needed."""
    fqdn = f"web-0.web.{namespace}.svc.cluster.local"
    script = (
        f"cat /etc/hosts; echo fqdn=$(getent hosts {fqdn}); echo alias=$(getent hosts db.test); echo done"
    )
    spec = {
        "hostname": "web-0",
        "subdomain": "web",
        "hostAliases": [{"ip": "127.0.0.9", "hostnames": ["db.test", "db"]}],
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "redis:7", "command": ["sh", "-c", script]}],
    }
    await make_pod(kube, namespace, "named", spec)
    log = await log_with(kube, namespace, "named", "c", "done")
    pod = await get_pod(kube, namespace, "named")
    assert pod is not None
    ip = pod["status"]["podIP"]
    hosts = "\n".join(
        [
            "# Kubernetes-managed hosts file.",
            "127.0.0.1\tlocalhost",
            "::1\tlocalhost ip6-localhost ip6-loopback",
            "fe00::0\tip6-localnet",
            "fe00::0\tip6-mcastprefix",
            "fe00::1\tip6-allnodes",
            "fe00::2\tip6-allrouters",
            f"{ip}\t{fqdn}\tweb-0",
            "",
            "# Entries added by HostAliases.",
            "127.0.0.9\tdb.test\tdb",
            f"fqdn={ip} {fqdn} web-0",
            "alias=127.0.0.9 db.test db",
            "done",
        ]
    )
    assert log.startswith(hosts), log  # the node's own /etc/hosts is not what the Pod sees


async def test_env_comes_from_values_config_maps_secrets_and_the_downward_api_and_expands_in_args(
    kube: Kube, namespace: str
) -> None:
    await create(
        kube,
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"metadata": {"name": "cfg"}, "data": {"mode": "fast"}},
    )
    await create(
        kube,
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "sec"}, "stringData": {"pw": "hunter2"}},
    )
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "pw"}}},
        {"name": "ADDR", "value": "$(POD_IP):6379"},
    ]
    args = [
        "echo 'args: $(POD_NAME).$(POD_NAMESPACE) $(MODE) $(UNDEFINED) $$(ESCAPED)'; "
        'echo "env: $ADDR $PW"; exec sleep 300'
    ]
    spec = {
        "containers": [{"name": "c", "image": "redis:7", "command": ["sh", "-c"], "args": args, "env": env}]
    }
    await make_pod(kube, namespace, "envs", spec)
    log = await log_with(kube, namespace, "envs", "c", "env:")
    pod = await pod_where(kube, namespace, "envs", "podIP", lambda p: p["status"].get("podIP"))
    assert f"args: envs.{namespace} fast $(UNDEFINED) $(ESCAPED)" in log
    assert f"env: {pod['status']['podIP']}:6379 hunter2" in log


async def test_an_http_readiness_probe_gates_readiness(kube: Kube, namespace: str) -> None:
    def server(path: str) -> dict[str, Any]:
        return {
            "name": "web",
            "image": "redis:7",
            "command": [sys.executable, "-m", "http.server", "--bind", "$(POD_IP)", "8080"],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": path, "port": "http"}, "periodSeconds": 1},
        }

    await make_pod(kube, namespace, "good", {"containers": [server("/")]})
    await make_pod(kube, namespace, "bad", {"containers": [server("/missing")]})
    await pod_where(kube, namespace, "good", "Ready", lambda p: condition(p, "Ready") == "True")
    bad = await pod_where(kube, namespace, "bad", "running", lambda p: container_status(p).get("started"))
    await log_with(kube, namespace, "bad", "web", '"GET /missing HTTP/1.1" 404')
    bad = await get_pod(kube, namespace, "bad") or bad
    assert condition(bad, "Ready") == "False"
    assert not container_status(bad)["ready"]


async def test_a_failing_liveness_probe_restarts_the_container(kube: Kube, namespace: str) -> None:
    container = {
        "name": "c",
        "image": "redis:7",
        "command": ["sleep", "300"],
        "livenessProbe": {"tcpSocket": {"port": 9}, "periodSeconds": 1, "failureThreshold": 2},
    }
    await make_pod(kube, namespace, "live", {"terminationGracePeriodSeconds": 1, "containers": [container]})
    pod = await pod_where(
        kube, namespace, "live", "restarted", lambda p: container_status(p).get("restartCount", 0) >= 1
    )
    assert container_status(pod)["lastState"]["terminated"]["exitCode"] == 143  # SIGTERM


async def test_restart_policies_on_failure_and_never_end_in_the_right_phase(
    kube: Kube, namespace: str
) -> None:
    once = "if [ -f /work/ran ]; then echo second run; exit 0; fi; touch /work/ran; exit 1"
    on_failure = {
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "name": "c",
                "image": "redis:7",
                "command": ["sh", "-c", once],
                "volumeMounts": [{"name": "w", "mountPath": "/work"}],
            }
        ],
        "volumes": [{"name": "w", "emptyDir": {}}],
    }
    never = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "redis:7", "command": ["sh", "-c", "exit 4"]}],
    }
    await make_pod(kube, namespace, "on-failure", on_failure)
    await make_pod(kube, namespace, "never", never)
    done = await pod_where(
        kube, namespace, "on-failure", "Succeeded", lambda p: p["status"].get("phase") == "Succeeded"
    )
    status = container_status(done)
    assert status["restartCount"] == 1
    assert status["state"]["terminated"]["exitCode"] == 0
    assert status["lastState"]["terminated"]["exitCode"] == 1
    failed = await pod_where(
        kube, namespace, "never", "Failed", lambda p: p["status"].get("phase") == "Failed"
    )
    assert container_status(failed)["state"]["terminated"]["exitCode"] == 4
    assert container_status(failed)["restartCount"] == 0
    assert condition(failed, "Ready") == "False"


async def test_a_terminated_container_reports_its_termination_message(kube: Kube, namespace: str) -> None:
    def pod(command: str, **extra: str) -> dict[str, Any]:
        container = {"name": "c", "image": "redis:7", "command": ["sh", "-c", command], **extra}
        return {"restartPolicy": "Never", "containers": [container]}

    await make_pod(kube, namespace, "default-path", pod("echo '{\"done\": 1}' > /dev/termination-log"))
    await make_pod(
        kube,
        namespace,
        "own-path",
        pod("echo custom > /tmp/msg; exit 2", terminationMessagePath="/tmp/msg"),
    )
    await make_pod(
        kube,
        namespace,
        "from-logs",
        pod("echo first; echo last words; exit 5", terminationMessagePolicy="FallbackToLogsOnError"),
    )
    await make_pod(kube, namespace, "silent", pod("exit 0"))
    messages = {}
    for name in ("default-path", "own-path", "from-logs", "silent"):
        done = await pod_where(
            kube, namespace, name, "terminated", lambda p: p["status"].get("phase") in ("Succeeded", "Failed")
        )
        messages[name] = container_status(done)["state"]["terminated"].get("message")
    assert messages == {
        "default-path": '{"done": 1}\n',
        "own-path": "custom\n",
        "from-logs": "first\nlast words",
        "silent": None,
    }
    assert not exists(Path("/dev/termination-log"))  # the host's /dev is never written


async def test_init_containers_complete_before_the_main_container_starts(kube: Kube, namespace: str) -> None:
    mount = [{"name": "w", "mountPath": "/shared"}]
    spec = {
        "initContainers": [
            {
                "name": "first",
                "image": "redis:7",
                "command": ["sh", "-c", "echo one > /shared/order"],
                "volumeMounts": mount,
            },
            {
                "name": "second",
                "image": "redis:7",
                "command": ["sh", "-c", "echo two >> /shared/order"],
                "volumeMounts": mount,
            },
        ],
        "containers": [
            {
                "name": "main",
                "image": "redis:7",
                "command": ["sh", "-c", "cat /shared/order; exec sleep 300"],
                "volumeMounts": mount,
            }
        ],
        "volumes": [{"name": "w", "emptyDir": {}}],
    }
    await make_pod(kube, namespace, "init", spec)
    pod = await pod_where(kube, namespace, "init", "Ready", lambda p: condition(p, "Ready") == "True")
    assert condition(pod, "Initialized") == "True"
    assert [s["state"]["terminated"]["reason"] for s in pod["status"]["initContainerStatuses"]] == [
        "Completed"
    ] * 2
    assert "one\ntwo\n" in await log_with(kube, namespace, "init", "main", "two")


async def test_graceful_deletion_runs_pre_stop_then_sigterm_then_sigkill_after_the_grace_period(
    kube: Kube, namespace: str, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    script = (
        "trap 'echo TERM >> /out/events' TERM; echo started >> /out/events; while true; do sleep 0.1; done"
    )
    spec = {
        "terminationGracePeriodSeconds": 2,
        "containers": [
            {
                "name": "c",
                "image": "redis:7",
                "command": ["sh", "-c", script],
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo preStop >> /out/events"]}}},
                "volumeMounts": [{"name": "out", "mountPath": "/out"}],
            }
        ],
        "volumes": [{"name": "out", "hostPath": {"path": str(tmp_path), "type": "Directory"}}],
    }
    await make_pod(kube, namespace, "graceful", spec)
    # The container can write "started" before the node has written its running status.
    pod = await pod_where(
        kube,
        namespace,
        "graceful",
        "running",
        lambda p: "started" in read(events) and "running" in container_status(p).get("state", {}),
    )
    pid = container_pid(pod)
    started = time.monotonic()
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/graceful")

    async def gone() -> bool:
        return await get_pod(kube, namespace, "graceful") is None

    await eventually(gone, within=30, what="graceful deleted", interval=0.1)
    elapsed = time.monotonic() - started
    assert 2.0 <= elapsed < 10
    assert read(events).split() == ["started", "preStop", "TERM"]
    assert not alive(pid)


async def test_a_claim_gets_a_local_volume_whose_data_is_removed_with_the_claim(
    kube: Kube, namespace: str, envtest: Environment
) -> None:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Mi"}}},
    }
    await create(kube, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim)

    async def bound() -> dict[str, Any] | None:
        current = await kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data")
        return current if current.get("status", {}).get("phase") == "Bound" else None

    bound_claim = await eventually(bound, within=60, what="claim Bound", interval=0.1)
    volume_name = bound_claim["spec"]["volumeName"]
    assert volume_name == f"pvc-{bound_claim['metadata']['uid']}"
    volume = await kube.get(f"/api/v1/persistentvolumes/{volume_name}")
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert volume["spec"]["capacity"]["storage"] == "10Mi"
    assert volume["spec"]["claimRef"]["name"] == "data"
    path = Path(volume["spec"]["hostPath"]["path"])
    assert path.parent == envtest.state_dir / "volumes"  # shared by the nodes, like network storage
    assert exists(path)
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data")

    async def volume_gone() -> bool:
        try:
            await kube.get(f"/api/v1/persistentvolumes/{volume_name}")
        except ApiError as exc:
            return exc.code == 404
        return False

    await eventually(volume_gone, within=60, what="the volume deleted", interval=0.1)
    assert not exists(path)
