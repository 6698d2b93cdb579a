"""The Helm chart with the real helm (lint, template, values.schema.json) and kustomize's config/
with kubectl's kustomize: what each renders, bad values refused naming the value, and every
generated file fresh. No control plane needed."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from examples.rediscluster import packaging
from tests.install.conftest import CHART, ROOT, Render, find, kinds, run


def _rules(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load((CHART / "files" / name).read_text())["rules"])


ROLE_RULES = _rules("role.yaml")
LEADER_ELECTION_RULES = yaml.safe_load((CHART / "files" / "leader_election_role.yaml").read_text())["rules"]


def test_helm_lint_strict_passes(helm: str) -> None:
    result = run(helm, "lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_the_default_render_is_two_leader_electing_replicas_with_restricted_pods(render: Render) -> None:
    objects = render()
    assert kinds(objects) == sorted(
        [
            "ClusterRole",  # -manager
            "ClusterRole",  # -metrics-auth
            "ClusterRole",  # -metrics-reader
            "ClusterRoleBinding",  # -manager
            "ClusterRoleBinding",  # -metrics-auth
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
    assert find(objects, "ClusterRole", "rco-rediscluster-operator-manager")["rules"] == ROLE_RULES
    subjects = find(objects, "ClusterRoleBinding", "rco-rediscluster-operator-manager")["subjects"]
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
    assert service["spec"]["ports"][0] == {"name": "metrics", "port": 8443, "targetPort": "metrics"}


def grants(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    """The verbs ``rules`` grant on every object of ``resource``."""
    return {
        str(verb)
        for r in rules
        if group in r.get("apiGroups", []) and resource in r.get("resources", []) and "resourceNames" not in r
        for verb in r["verbs"]
    }


def test_the_operator_may_read_named_secrets_but_never_list_or_watch_them(render: Render) -> None:
    """Least privilege (issue 24): Secrets get/create/patch, no list/watch (no reading every
    Secret of the cluster), and none of the verbs the code never uses."""
    assert grants(ROLE_RULES, "", "secrets") == {"create", "get", "patch"}
    assert grants(ROLE_RULES, "batch", "jobs") == {"create", "get", "list", "watch"}  # no delete
    for resource in ("redisclusters", "redisclusters/status", "redisbackups", "redisbackups/status"):
        assert "update" not in grants(ROLE_RULES, "redis.pyctrl.dev", resource), resource
    assert not [r for r in ROLE_RULES if "*" in r["verbs"] or "*" in r.get("resources", [])]
    for values in ((), ("watchNamespaces={team-a}",)):
        for role in (o for o in render(*values) if o["kind"] in ("ClusterRole", "Role")):
            assert not {"list", "watch"} & grants(role["rules"], "", "secrets"), role["metadata"]["name"]


def test_secure_metrics_by_default_https_with_token_review_and_a_reader_role(render: Render) -> None:
    objects = render("serviceMonitor.enabled=true")
    args = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"--metrics-bind-address=$(POD_IP):8443", "--metrics-secure"} <= set(args)
    auth = find(objects, "ClusterRole", "rco-rediscluster-operator-metrics-auth")["rules"]
    assert auth == _rules("metrics_auth_role.yaml")
    assert grants(auth, "authentication.k8s.io", "tokenreviews") == {"create"}
    assert grants(auth, "authorization.k8s.io", "subjectaccessreviews") == {"create"}
    subjects = find(objects, "ClusterRoleBinding", "rco-rediscluster-operator-metrics-auth")["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "rco-rediscluster-operator", "namespace": "ops"}]
    reader = find(objects, "ClusterRole", "rco-rediscluster-operator-metrics-reader")["rules"]
    assert reader == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    (endpoint,) = find(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # self-signed at the operator's start

    # a certificate Secret: mounted, served, and verified by the ServiceMonitor
    objects = render("serviceMonitor.enabled=true", "metrics.certSecret=metrics-tls")
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--metrics-cert-dir=/tmp/k8s-metrics-server/metrics-certs" in container["args"]
    assert {"name": "metrics-certs", "secret": {"secretName": "metrics-tls"}} in pod["volumes"]
    (endpoint,) = find(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == {
        "serverName": "rco-rediscluster-operator-metrics.ops.svc",
        "ca": {"secret": {"name": "metrics-tls", "key": "ca.crt"}},
    }

    # the operator's other bounds are values too
    objects = render(
        "minBackupInterval=600", "s3EndpointAllowlist={https://s3.example.com,http://10.0.0.1:9000}"
    )
    args = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--min-backup-interval=600" in args
    assert "--s3-endpoint-allowlist=https://s3.example.com,http://10.0.0.1:9000" in args

    # opted out: plain HTTP, no review roles
    objects = render("serviceMonitor.enabled=true", "metrics.secure=false", "metrics.port=8080")
    args = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"--metrics-bind-address=$(POD_IP):8080", "--no-metrics-secure"} <= set(args)
    assert not [o for o in objects if o["metadata"]["name"].endswith(("-metrics-auth", "-metrics-reader"))]
    (endpoint,) = find(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert "scheme" not in endpoint
    assert "bearerTokenFile" not in endpoint


def test_watched_namespaces_get_a_role_each_and_cluster_scoped_rules_cluster_wide(render: Render) -> None:
    objects = render(
        "watchNamespaces={team-a,team-b}",
        "logLevel=debug",
        "maxConcurrentReconciles=8",
        "clusterDomain=k8s.example",
    )
    roles = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"].endswith("manager")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert all(r["rules"] == _rules("role_namespaced.yaml") for r in roles)
    # nodes and storageclasses, which a Role cannot grant, in a ClusterRole of their own
    cluster_roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    assert sorted(cluster_roles) == [
        "rco-rediscluster-operator-cluster-scoped",
        "rco-rediscluster-operator-metrics-auth",
        "rco-rediscluster-operator-metrics-reader",
    ]
    scoped = cluster_roles["rco-rediscluster-operator-cluster-scoped"]["rules"]
    assert scoped == _rules("role_cluster_scoped.yaml")
    assert grants(scoped, "", "nodes") == {"get", "list", "watch"}
    assert grants(scoped, "storage.k8s.io", "storageclasses") == {"get"}
    assert not any("nodes" in r["resources"] for r in _rules("role_namespaced.yaml"))
    # together they grant what the ClusterRole grants
    for group, resource in {
        (g, r) for rule in ROLE_RULES for g in rule["apiGroups"] for r in rule["resources"]
    }:
        both = grants(_rules("role_namespaced.yaml"), group, resource) | grants(scoped, group, resource)
        assert both == grants(ROLE_RULES, group, resource), (group, resource)
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
        ("minBackupInterval=0", "minBackupInterval"),
        ("s3EndpointAllowlist={s3.example.com}", "s3EndpointAllowlist.0"),
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
    binding = find(objects, "ClusterRoleBinding", "rediscluster-operator-manager")
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
