"""The Helm chart with the real helm (lint, template, values.schema.json) and kustomize's config/
with kubectl's kustomize: what each renders, bad values refused naming the value, and every
generated file fresh. No control plane needed."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from examples.rediscluster import packaging
from tests.install.conftest import CHART, ROOT, Render, find, kinds, run

ROLE_RULES = yaml.safe_load((CHART / "files" / "role.yaml").read_text())["rules"]
LEADER_ELECTION_RULES = yaml.safe_load((CHART / "files" / "leader_election_role.yaml").read_text())["rules"]


def test_helm_lint_strict_passes(helm: str) -> None:
    result = run(helm, "lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_the_default_render_is_two_leader_electing_replicas_with_restricted_pods(render: Render) -> None:
    objects = render()
    assert kinds(objects) == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )
    deploy = find(objects, "Deployment", "rco-rediscluster-operator")
    assert deploy["spec"]["replicas"] == 2
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "rco-rediscluster-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["image"] == "pyctrl/rediscluster-operator:0.1.0"
    assert "--leader-elect" in container["args"]
    assert "--log-format=json" in container["args"]
    assert not any(a.startswith("--namespace") for a in container["args"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["resources"]["limits"]["memory"] == "256Mi"
    assert find(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    # The ClusterRole's rules are rbacgen's, bound to the chart's ServiceAccount.
    assert find(objects, "ClusterRole")["rules"] == ROLE_RULES
    subjects = find(objects, "ClusterRoleBinding")["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "rco-rediscluster-operator", "namespace": "ops"}]
    # The Lease is granted by the leader-election Role (release namespace) only, not cluster-wide.
    lease_rules = find(objects, "Role", "rco-rediscluster-operator-leader-election")["rules"]
    assert lease_rules == LEADER_ELECTION_RULES
    assert any("leases" in r["resources"] for r in lease_rules)
    assert not any("leases" in r["resources"] for r in ROLE_RULES)
    assert {
        "--leader-elect-lease-duration=15",
        "--leader-elect-renew-deadline=10",
        "--leader-elect-retry-period=2",
    } <= set(container["args"])
    service = find(objects, "Service", "rco-rediscluster-operator-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_watched_namespaces_get_a_role_each_and_no_cluster_role(render: Render) -> None:
    objects = render(
        "watchNamespaces={team-a,team-b}",
        "logLevel=debug",
        "maxConcurrentReconciles=8",
        "clusterDomain=k8s.example",
    )
    assert "ClusterRole" not in kinds(objects)
    roles = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"].endswith("manager")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert all(r["rules"] == ROLE_RULES for r in roles)
    bindings = [
        o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"].endswith("-manager")
    ]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    args = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {
        "--namespace=team-a,team-b",
        "--log-level=debug",
        "--max-concurrent-reconciles=8",
        "--cluster-domain=k8s.example",
    } <= set(args)


def test_monitoring_objects_carry_the_tested_alerts_and_dashboard(render: Render) -> None:
    objects = render(
        "serviceMonitor.enabled=true", "prometheusRule.enabled=true", "grafanaDashboard.enabled=true"
    )
    monitor = find(objects, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    rule = find(objects, "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    dashboard = find(objects, "ConfigMap", "rco-rediscluster-operator-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    text = dashboard["data"]["rediscluster-operator.json"]
    assert json.loads(text) == json.loads((CHART / "files" / "dashboard.json").read_text())


def test_the_webhook_with_a_self_signed_ca_trusts_the_serving_certificate(render: Render) -> None:
    objects = render("webhook.enabled=true")
    secret = find(objects, "Secret", "rco-rediscluster-operator-webhook-tls")
    config = find(objects, "ValidatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["clientConfig"]["service"] == {
        "name": "rco-rediscluster-operator-webhook",
        "namespace": "ops",
        "path": "/validate-redis-pyctrl-dev-v1alpha1-rediscluster",
        "port": 443,
    }
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert "rco-rediscluster-operator-webhook.ops.svc" in names
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert.verify_directly_issued_by(ca)
    args = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"--webhook-port=9443", "--webhook-host=$(POD_IP)"} <= set(
        args
    )  # replicas share the node's network


def test_the_webhook_with_cert_manager_asks_for_a_certificate_and_ca_injection(render: Render) -> None:
    objects = render("webhook.enabled=true", "webhook.certManager.enabled=true")
    assert "Secret" not in kinds(objects)
    certificate = find(objects, "Certificate")
    assert certificate["spec"]["secretName"] == "rco-rediscluster-operator-webhook-tls"
    assert certificate["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": "rco-rediscluster-operator-selfsigned",
    }
    assert find(objects, "Issuer")["spec"] == {"selfSigned": {}}
    config = find(objects, "ValidatingWebhookConfiguration")
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "ops/rco-rediscluster-operator-webhook"
    )
    assert "caBundle" not in config["webhooks"][0]["clientConfig"]


def test_lease_timings_are_values_and_a_combination_client_go_refuses_is_refused(
    helm: str, render: Render
) -> None:
    timings = ("leaseDuration=8", "renewDeadline=6", "retryPeriod=1")
    deploy = find(render(*(f"leaderElection.{t}" for t in timings)), "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {
        "--leader-elect-lease-duration=8",
        "--leader-elect-renew-deadline=6",
        "--leader-elect-retry-period=1",
    } <= set(args)
    result = run(helm, "template", "rco", str(CHART), "--set", "leaderElection.renewDeadline=15", check=False)
    assert result.returncode != 0
    assert "leaseDuration (15) > renewDeadline (15) > 1.2 x retryPeriod (2) must hold" in result.stderr
    assert result.stdout == ""


def test_shard_count_runs_that_many_sharding_replicas_instead_of_leader_election(
    helm: str, render: Render
) -> None:
    objects = render("shardCount=3", "leaderElection.enabled=false", "leaderElection.leaseDuration=8")
    deploy = find(objects, "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert deploy["spec"]["replicas"] == 3
    assert {"--shard-count=3", "--leader-elect-lease-duration=8"} <= set(args)
    assert "--leader-elect" not in args
    rules = find(objects, "Role", "rco-rediscluster-operator-leader-election")["rules"]
    ring_rule = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "delete"]}
    assert ring_rule in rules
    result = run(helm, "template", "rco", str(CHART), "--set", "shardCount=3", check=False)
    assert result.returncode != 0
    assert "shardCount > 1 replaces leader election" in result.stderr


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("replicaCount=0", "replicaCount"),
        ("replicaCount=two", "replicaCount"),
        ("logLevel=verbose", "logLevel"),
        ("logFormat=xml", "logFormat"),
        ("image.pullPolicy=Sometimes", "image.pullPolicy"),
        ("watchNamespaces={Not_A_Namespace}", "watchNamespaces.0"),
        ("replicas=2", "replicas"),  # not a value of this chart (helm create's name is replicaCount)
        ("serviceMonitor.interval=soon", "serviceMonitor.interval"),
        ("leaderElection.retryPeriod=0", "leaderElection.retryPeriod"),
        ("shardCount=0", "shardCount"),
    ],
)
def test_values_breaking_the_schema_are_refused_naming_the_value(helm: str, value: str, named: str) -> None:
    result = run(helm, "template", "rco", str(CHART), "--set", value, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert named.rsplit(".", maxsplit=1)[-1] in result.stderr, result.stderr
    assert result.stdout == ""


def test_the_generated_chart_files_and_config_are_fresh(helm: str) -> None:
    """The chart's CRDs, ClusterRole and webhook configuration, and config/, are what
    ``make generate`` writes now (edit the chart or the code, then run it)."""
    assert packaging.main(["--check", "--helm", helm]) == 0


def test_config_default_is_the_operator_in_its_own_namespace_with_prefixed_names(kubectl: str) -> None:
    objects = [
        d for d in yaml.safe_load_all(run(kubectl, "kustomize", str(ROOT / "config" / "default")).stdout)
    ]
    assert find(objects, "Namespace")["metadata"]["name"] == "rediscluster-system"
    namespaced = [o for o in objects if o["kind"] not in {"Namespace", "CustomResourceDefinition"}]
    for obj in namespaced:
        assert obj["metadata"]["name"].startswith("rediscluster-"), obj["metadata"]["name"]
        if not obj["kind"].startswith("Cluster"):
            assert obj["metadata"]["namespace"] == "rediscluster-system"
    deploy = find(objects, "Deployment", "rediscluster-operator")
    assert deploy["spec"]["replicas"] == 2
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "rediscluster-operator"
    assert "--leader-elect" in pod["containers"][0]["args"]
    binding = find(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "rediscluster-operator-manager"
    assert binding["subjects"][0] == {
        "kind": "ServiceAccount",
        "name": "rediscluster-operator",
        "namespace": "rediscluster-system",
    }
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    expected = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "crds").glob("*.yaml"))]
    assert sorted(crds, key=lambda c: c["metadata"]["name"]) == expected


def test_chart_and_config_are_never_hand_edited_copies() -> None:
    """Every file under config/ except the layout (kustomization.yaml) is generated."""
    for path in Path(ROOT / "config").rglob("*.yaml"):
        if path.name != "kustomization.yaml":
            assert "# generated by" in path.read_text().splitlines()[0], path
