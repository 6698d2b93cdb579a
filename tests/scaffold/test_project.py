"""The scaffolded project (see conftest): it passes ruff, ``mypy --strict`` and its own envtest
tests with pyctrl from this checkout (offline: nothing is installed), ``pyctrl generate`` is
idempotent, its chart lints and renders with the real helm and ``config/default`` applies to a real
apiserver (server-side dry run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pyctrl.envtest import Environment
from pyctrl.envtest._binaries import bin_dir

from .conftest import NAME, Scaffolded, project_env, pyctrl


def run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=project_env(cwd), check=False
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


def test_generate_is_idempotent_and_check_finds_a_stale_file(scaffolded: Scaffolded) -> None:
    root = scaffolded.root
    assert pyctrl(root, "generate", "--check", "--helm", scaffolded.helm).returncode == 0
    role = root / "charts" / NAME / "files" / "role.yaml"
    text = role.read_text()
    role.write_text(text + "# edited\n")
    try:
        stale = pyctrl(root, "generate", "--check", "--helm", scaffolded.helm, check=False)
        assert stale.returncode == 1
        assert f"{role}: stale" in stale.stdout
    finally:
        role.write_text(text)


def test_the_generated_project_passes_ruff_and_mypy_strict(scaffolded: Scaffolded, tmp_path: Path) -> None:
    root = scaffolded.root
    run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], root)
    run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."], root)
    out = run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy")], root)
    assert "Success: no issues found" in out.stdout


@pytest.mark.controlplane
def test_the_generated_projects_own_tests_pass_on_a_real_control_plane(scaffolded: Scaffolded) -> None:
    root = scaffolded.root
    out = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], root)
    tests = sorted(p.name for p in (root / "tests").glob("test_*.py"))
    assert tests == [
        "test_cache_policy_controller.py",
        "test_memcached_controller.py",
        "test_memcached_conversion.py",
        "test_memcached_webhook_v1.py",
    ]
    # 2 per controller, 2 webhook decisions, 1 round trip per spoke: every test collected and passed
    assert "7 passed in" in out.stdout, out.stdout
    assert "failed" not in out.stdout
    assert "skipped" not in out.stdout


def test_the_chart_lints_and_renders_restricted_pods(scaffolded: Scaffolded) -> None:
    chart = scaffolded.root / "charts" / NAME
    run([scaffolded.helm, "lint", "--strict", str(chart)], scaffolded.root)
    rendered = run([scaffolded.helm, "template", "demo", str(chart), "--namespace", "demo"], scaffolded.root)
    objects = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == sorted(
        {
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "MutatingWebhookConfiguration",
            "Role",
            "RoleBinding",
            "Secret",
            "Service",
            "ServiceAccount",
            "ValidatingWebhookConfiguration",
        }
    )
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]["securityContext"]
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"] == {"drop": ["ALL"]}
    assert "--webhook-port=9443" in pod["containers"][0]["args"]
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert {
        ("cache.example.com", "memcacheds/status"),
        ("ops.example.com", "cachepolicies/status"),
        ("apps", "deployments"),
    } <= granted


@pytest.mark.controlplane
def test_config_default_applies_to_a_real_apiserver(scaffolded: Scaffolded, envtest: Environment) -> None:
    kubectl = str(bin_dir() / "kubectl")
    namespace = f"{NAME}-system"
    envtest.create_namespace(namespace)  # a dry run does not create it for the objects in it
    try:
        out = run(
            [
                kubectl,
                "--kubeconfig",
                str(envtest.kubeconfig_path),
                "apply",
                "-k",
                str(scaffolded.root / "config" / "default"),
                "--dry-run=server",
            ],
            scaffolded.root,
        )
    finally:
        envtest.delete_namespace(namespace)
    # The CRD may be installed already (the operator's test installs it in this session's control
    # plane): then the server's dry run reports it "configured" or "unchanged", not "created".
    lines = out.stdout.splitlines()
    assert all(line.endswith(" (server dry run)") for line in lines), out.stdout
    done = [line.removesuffix(" (server dry run)").rsplit(" ", 1) for line in lines]
    verbs = {name: verb for name, verb in done}
    expected = {
        "customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com": {
            "created",
            "configured",
            "unchanged",
        },
        f"deployment.apps/{NAME}": {"created"},
        f"clusterrole.rbac.authorization.k8s.io/{NAME}-manager": {"created"},
        f"mutatingwebhookconfiguration.admissionregistration.k8s.io/{NAME}-mmemcached.cache.example.com": {
            "created"
        },
        f"validatingwebhookconfiguration.admissionregistration.k8s.io/{NAME}-vmemcached.cache.example.com": {
            "created"
        },
        f"service/{NAME}-webhook-service": {"created"},
    }
    for name, allowed in expected.items():
        assert verbs.get(name) in allowed, out.stdout
