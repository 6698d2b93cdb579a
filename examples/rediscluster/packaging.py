"""``python -m examples.rediscluster.packaging [--check]``: the operator's install manifests, all
generated from one source (kubebuilder's ``make manifests`` + helmify, as one step).

The chart ``charts/rediscluster-operator/`` is the hand-written source of every object; what it
embeds from code and kustomize's ``config/`` are written here:

- ``charts/.../crds/`` — the CRDs from ``pyctrl.crdgen`` (the models and text of ``crds/``);
- ``charts/.../files/role.yaml`` — the ClusterRole from ``pyctrl.rbacgen`` (the reconcilers'
  ``@rbac`` declarations and events), which the chart's manager (Cluster)Roles embed;
- ``charts/.../files/role_cluster_scoped.yaml`` and ``role_namespaced.yaml`` — the same rules split
  by scope (``CLUSTER_SCOPED``: Nodes, StorageClasses): with ``watchNamespaces`` the chart binds
  the first cluster-wide and the second in a Role per namespace (a Role cannot grant a
  cluster-scoped resource);
- ``charts/.../files/leader_election_role.yaml`` — ``pyctrl.rbacgen``'s leader-election and event
  rules, which the chart's leader-election Role (the release namespace only) embeds: the Lease is
  granted there and nowhere else;
- ``charts/.../files/metrics_auth_role.yaml`` and ``metrics_reader_role.yaml`` — ``pyctrl.rbacgen``'s
  rules of the secure metrics server (TokenReview, SubjectAccessReview) and of its scrapers
  (``get`` on ``/metrics``), kubebuilder's ``metrics_auth_role`` and ``metrics_reader_role``;
- ``charts/.../files/webhook.yaml`` — ``webhook_configurations(RedisCluster)``, which the chart's
  ValidatingWebhookConfiguration fills in with its Service and CA;
- ``config/{crd/bases,rbac,manager,default,prometheus,samples}/`` — the chart rendered by the real
  ``helm template`` with kustomize-base values (names ``operator*``, namespace ``system``), split
  into kubebuilder's files; ``config/*/kustomization.yaml`` (the layout: ``namePrefix:
  rediscluster-``, ``namespace: rediscluster-system``) are hand-written.

Guarantees: the output depends only on the sources (deterministic YAML); ``--check`` writes
nothing and exits 1 naming each stale file (tests run it); files carrying this tool's header that
are no longer generated are removed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from examples.rediscluster.api import RedisCluster
from pyctrl.builder import webhook_configurations
from pyctrl.crdgen import check_files, dump_yaml, header, import_object, load_config, render_crds, write_files
from pyctrl.rbacgen import (
    EVENT_RULES,
    LEADER_ELECTION_RULES,
    METRICS_AUTH_RULES,
    METRICS_READER_RULES,
    PolicyRule,
    generate_cluster_role,
    rbac_rules,
    render_cluster_role,
)

__all__ = ["CHART", "CONFIG", "KUSTOMIZE_BASE_VALUES", "helm_binary", "main", "render"]

TOOL = "examples.rediscluster.packaging"
ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rediscluster-operator"
CONFIG = ROOT / "config"
RECONCILERS = [
    "examples.rediscluster.controller:RedisClusterReconciler",
    "examples.rediscluster.backup.reconciler:RedisBackupReconciler",
]
# The cluster-scoped resources among the reconcilers' rules (a Role cannot grant them); a rule on
# any other resource is namespaced. tests/operator/test_rbac.py checks this against the
# apiserver's discovery, so the list cannot drift unnoticed.
CLUSTER_SCOPED = frozenset({("", "nodes"), ("storage.k8s.io", "storageclasses")})
# What `helm template` renders for config/: kubebuilder's base names, before kustomize's
# namePrefix (rediscluster-) and namespace (rediscluster-system).
KUSTOMIZE_BASE_VALUES = (
    "fullnameOverride=operator",
    "serviceMonitor.enabled=true",
    "prometheusRule.enabled=true",
    "grafanaDashboard.enabled=true",
)
_BASE_RELEASE, _BASE_NAMESPACE = "rediscluster-operator", "system"
# kind (and name suffix) -> kubebuilder's file under config/
_CONFIG_FILES = {
    ("ServiceAccount", ""): "rbac/service_account.yaml",
    ("ClusterRole", "-manager"): "rbac/role.yaml",
    ("ClusterRoleBinding", "-manager"): "rbac/role_binding.yaml",
    ("Role", "-leader-election"): "rbac/leader_election_role.yaml",
    ("RoleBinding", "-leader-election"): "rbac/leader_election_role_binding.yaml",
    ("ClusterRole", "-metrics-auth"): "rbac/metrics_auth_role.yaml",
    ("ClusterRoleBinding", "-metrics-auth"): "rbac/metrics_auth_role_binding.yaml",
    ("ClusterRole", "-metrics-reader"): "rbac/metrics_reader_role.yaml",
    ("Deployment", ""): "manager/manager.yaml",
    ("PodDisruptionBudget", ""): "manager/pdb.yaml",
    ("Service", "-metrics"): "default/metrics_service.yaml",
    ("ServiceMonitor", ""): "prometheus/monitor.yaml",
    ("PodMonitor", "-redis"): "prometheus/redis_monitor.yaml",
    ("PrometheusRule", ""): "prometheus/rules.yaml",
    ("ConfigMap", "-dashboard"): "prometheus/dashboard.yaml",
}


def helm_binary() -> str:
    """The real helm built by ``tools/helm/build.sh`` (built when missing)."""
    out = subprocess.run(
        [str(ROOT / "tools" / "helm" / "build.sh"), "--print-bin-dir", "--quiet"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return str(Path(out.stdout.strip()) / "helm")


def _chart_files() -> dict[Path, str]:
    models = [import_object(ref) for ref in load_config(ROOT / "pyproject.toml").models]  # crds/'s
    files = {CHART / "crds" / name: text for name, text in render_crds(models).items()}
    role = render_cluster_role("rediscluster-operator", RECONCILERS, EVENT_RULES)
    files[CHART / "files" / "role.yaml"] = role
    declared = rbac_rules([import_object(r) for r in RECONCILERS])
    for scoped, suffix in ((True, "cluster_scoped"), (False, "namespaced")):
        split = generate_cluster_role(
            f"rediscluster-operator-{suffix.replace('_', '-')}",
            _by_scope(declared, cluster_scoped=scoped) + ([] if scoped else list(EVENT_RULES)),
        )
        note = f"source: {', '.join(RECONCILERS)} ({suffix.replace('_', '-')} resources)"
        files[CHART / "files" / f"role_{suffix}.yaml"] = dump_yaml([split], header(TOOL, note))
    files[CHART / "files" / "leader_election_role.yaml"] = render_cluster_role(
        "rediscluster-operator-leader-election", [], [*LEADER_ELECTION_RULES, *EVENT_RULES]
    )
    files[CHART / "files" / "metrics_auth_role.yaml"] = render_cluster_role(
        "rediscluster-operator-metrics-auth", [], METRICS_AUTH_RULES
    )
    files[CHART / "files" / "metrics_reader_role.yaml"] = render_cluster_role(
        "rediscluster-operator-metrics-reader", [], METRICS_READER_RULES
    )
    webhook = webhook_configurations(
        RedisCluster, defaulting=False, validating=True, service=("webhook-service", "system")
    )
    files[CHART / "files" / "webhook.yaml"] = dump_yaml(
        webhook, header(TOOL, "source: RedisClusterValidator")
    )
    return files


def _by_scope(rules: tuple[PolicyRule, ...], *, cluster_scoped: bool) -> list[PolicyRule]:
    """The part of ``rules`` on ``CLUSTER_SCOPED`` resources (or on the others)."""
    out = []
    for rule in rules:
        for group in rule.api_groups:
            resources = tuple(
                r for r in rule.resources if ((group, r.split("/")[0]) in CLUSTER_SCOPED) == cluster_scoped
            )
            if resources:
                out.append(PolicyRule(api_groups=(group,), resources=resources, verbs=rule.verbs))
    return out


def _kustomize_base(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's objects as a kustomize base: no Helm bookkeeping labels."""
    for obj in objects:
        for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
            labels = meta.get("labels", {})
            labels.pop("helm.sh/chart", None)
            if "app.kubernetes.io/managed-by" in labels:
                labels["app.kubernetes.io/managed-by"] = "kustomize"
    return objects


def _config_files(helm: str, chart_files: dict[Path, str]) -> dict[Path, str]:
    args = [helm, "template", _BASE_RELEASE, str(CHART), "--namespace", _BASE_NAMESPACE, "--include-crds"]
    for value in KUSTOMIZE_BASE_VALUES:
        args += ["--set", value]
    rendered = subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout
    objects = _kustomize_base([d for d in yaml.safe_load_all(rendered) if d])
    head = header(TOOL, f"source: helm template {CHART.relative_to(ROOT)} (do not edit: change the chart)")
    files: dict[Path, str] = {}
    by_file: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind == "CustomResourceDefinition":
            continue  # copied below from the same generated text as crds/
        suffix = name.removeprefix("operator")
        where = _CONFIG_FILES.get((kind, suffix))
        if where is None:
            raise ValueError(f"the chart renders {kind} {name}, which has no place in config/")
        by_file.setdefault(where, []).append(obj)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": _BASE_NAMESPACE}}
    by_file["manager/manager.yaml"].insert(0, namespace)
    for where, docs in by_file.items():
        files[CONFIG / where] = dump_yaml(docs, head)
    for path, text in chart_files.items():
        if path.parent.name == "crds":
            files[CONFIG / "crd" / "bases" / path.name] = text
    sample = yaml.safe_load(
        (ROOT / "examples" / "rediscluster" / "samples" / "rediscluster.yaml").read_text()
    )
    files[CONFIG / "samples" / "redis_v1alpha1_rediscluster.yaml"] = dump_yaml(
        [sample], header(TOOL, "source: examples/rediscluster/samples/rediscluster.yaml")
    )
    return files


def render(helm: str) -> dict[Path, str]:
    """Every generated file: path -> text (config/ from the chart's files as they are on disk)."""
    chart_files = _chart_files()
    return {**chart_files, **_config_files(helm, chart_files)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {TOOL}", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    parser.add_argument("--helm", default=None, help="helm binary (default: built by tools/helm/build.sh)")
    args = parser.parse_args(argv)
    helm = args.helm or helm_binary()
    changes = [] if args.check else write_files(_chart_files(), tool=TOOL)  # helm template reads them
    files = render(helm)
    if args.check:
        problems = check_files(files, owned_dir=CONFIG, tool=TOOL)
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    changes += write_files(files, owned_dir=CONFIG, tool=TOOL)
    for change in changes or ["install manifests up to date"]:
        print(change)
    return 0


if __name__ == "__main__":
    sys.exit(main())
