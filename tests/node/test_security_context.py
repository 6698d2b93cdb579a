"""What the local node enforces of a container's securityContext, on the real control plane:
readOnlyRootFilesystem (the root is read-only, volumes are not), allowPrivilegeEscalation: false
(no_new_privs), the kubelet's runAsNonRoot check (refused without a non-zero runAsUser), and
runAsUser/runAsGroup/fsGroup/supplementalGroups (the processes' ids, volume ownership, exec)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest import Environment
from pyctrl.envtest.node.identity import home_for
from pyctrl.envtest.node.pod import LOG_DIR_ANNOTATION
from pyctrl.testing import eventually
from tests.node.helpers import kubectl

pytestmark = pytest.mark.controlplane

# Without the read-only root this would write the host's /var/tmp (the view binds the host's
# directories): the test removes it then, and fails.
HOST_PROBE = Path("/var/tmp/pyctrl-read-only-root-probe")
PROBE = (
    f"touch {HOST_PROBE} 2>/dev/null && echo root: writable || echo root: read-only; "
    "touch /scratch/x && echo volume: writable; grep NoNewPrivs /proc/self/status; exec sleep 3600"
)


PLAIN = "grep NoNewPrivs /proc/self/status; exec sleep 3600"


def sleeper(name: str, security: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "image": "redis:7", "command": ["sleep", "3600"], "securityContext": security}


async def test_the_node_enforces_a_read_only_root_no_new_privileges_and_run_as_non_root(
    envtest: Environment, namespace: str
) -> None:
    restricted = {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}
    pod = {
        "metadata": {"name": "restricted"},
        "spec": {
            "containers": [
                {
                    "name": "probe",
                    "image": "redis:7",
                    "command": ["sh", "-c", PROBE],
                    "securityContext": restricted,
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                },
                {"name": "plain", "image": "redis:7", "command": ["sh", "-c", PLAIN]},
                sleeper("no-user", {"runAsNonRoot": True}),
                sleeper("root-user", {"runAsNonRoot": True, "runAsUser": 0}),
                sleeper("non-root-user", {"runAsNonRoot": True, "runAsUser": 65532}),
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    }
    envtest.http.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)

    def states() -> dict[str, dict[str, Any]] | None:
        found = envtest.http.get(f"/api/v1/namespaces/{namespace}/pods/restricted")
        statuses = {s["name"]: s["state"] for s in found.get("status", {}).get("containerStatuses") or []}
        settled = ("probe", "plain", "non-root-user")
        if all("running" in statuses.get(n, {}) for n in settled) and all(
            "waiting" in statuses.get(n, {}) for n in ("no-user", "root-user")
        ):
            return {**statuses, "_pod": found}
        return None

    settled = await eventually(states, within=60, what="the containers started or refused", interval=0.3)
    log_dir = Path(settled["_pod"]["metadata"]["annotations"][LOG_DIR_ANNOTATION])

    def logged(container: str) -> str | None:
        text = (log_dir / f"{container}.log").read_text() if (log_dir / f"{container}.log").exists() else ""
        return text if "NoNewPrivs" in text else None

    probe = await eventually(lambda: logged("probe"), within=30, what="the probe's report")
    HOST_PROBE.unlink(missing_ok=True)  # noqa: ASYNC240 (a local file, once)
    assert "root: read-only" in probe
    assert "volume: writable" in probe
    assert "NoNewPrivs:\t1" in probe
    plain = await eventually(lambda: logged("plain"), within=30, what="the plain container's report")
    assert "NoNewPrivs:\t0" in plain  # no securityContext: as before
    assert settled["no-user"]["waiting"]["reason"] == "CreateContainerConfigError"
    assert "container has runAsNonRoot and image will run as root" in settled["no-user"]["waiting"]["message"]
    assert settled["root-user"]["waiting"]["reason"] == "CreateContainerConfigError"
    assert "runAsUser breaks non-root policy" in settled["root-user"]["waiting"]["message"]


IDS = (
    "echo uid=$(id -u) gid=$(id -g) groups=$(id -G); grep CapEff /proc/self/status; echo HOME=$HOME; "
    "stat -c 'scratch %g %a' /scratch; touch /scratch/new && stat -c 'new %g' /scratch/new; "
    "echo secret=$(cat /secret/password); echo reported; exec sleep 3600"
)


async def test_the_node_runs_containers_as_run_as_user_group_fs_group_and_supplemental_groups(
    envtest: Environment, namespace: str
) -> None:
    envtest.http.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "creds"}, "stringData": {"password": "s3cret"}},
    )
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    pod = {
        "metadata": {"name": "ids"},
        "spec": {
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 5000,  # no passwd entry on the host: no groups of its own
                "runAsGroup": 3000,
                "fsGroup": 2000,
                "supplementalGroups": [4000],
            },
            "containers": [
                {
                    "name": "report",
                    "image": "redis:7",
                    "command": ["sh", "-c", IDS],
                    "securityContext": restricted,
                    "volumeMounts": [
                        {"name": "scratch", "mountPath": "/scratch"},
                        {"name": "creds", "mountPath": "/secret"},
                    ],
                },
                {
                    "name": "other-user",
                    "image": "redis:7",
                    "command": ["sh", "-c", "echo uid=$(id -u) gid=$(id -g); echo reported; exec sleep 3600"],
                    "securityContext": {**restricted, "runAsUser": 5001},
                },
            ],
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o440}},
            ],
        },
    }
    envtest.http.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)

    def log_dir() -> Path | None:
        found = envtest.http.get(f"/api/v1/namespaces/{namespace}/pods/ids")
        statuses = found.get("status", {}).get("containerStatuses") or []
        if len(statuses) == 2 and all("running" in s["state"] for s in statuses):
            return Path(found["metadata"]["annotations"][LOG_DIR_ANNOTATION])
        return None

    logs = await eventually(log_dir, within=60, what="both containers running", interval=0.3)

    def reported(container: str) -> str | None:
        path = logs / f"{container}.log"
        text = path.read_text() if path.exists() else ""
        return text if "reported" in text else None

    report = await eventually(lambda: reported("report"), within=30, what="the report")
    ids = next(line for line in report.splitlines() if line.startswith("uid="))
    assert ids.startswith("uid=5000 gid=3000 groups=")
    assert set(ids.split("groups=")[1].split()) == {"3000", "4000", "2000"}  # the kernel sorts them
    assert "CapEff:\t0000000000000000" in report  # a non-root uid holds no capability
    assert f"HOME={home_for(5000)}" in report  # "/" for a uid the image does not know
    assert "scratch 2000 2777" in report  # emptyDir: group fsGroup, setgid, world-writable
    assert "new 2000" in report  # a new file inherits the fsGroup (setgid directory)
    assert "secret=s3cret" in report  # mode 0440, group fsGroup: readable by uid 5000
    other = await eventually(lambda: reported("other-user"), within=30, what="the other report")
    assert "uid=5001 gid=3000" in other  # the container's runAsUser over the Pod's
    done = kubectl(envtest, "exec", "-n", namespace, "ids", "-c", "report", "--", "id", "-u")
    assert (done.returncode, done.stdout.strip()) == (0, "5000"), done.stderr  # exec runs as the user
