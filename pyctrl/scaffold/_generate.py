"""``pyctrl generate``: every install manifest of a scaffolded project, from its code
(kubebuilder's ``make manifests`` plus its Helm plugin, as one step).

From ``PROJECT`` it imports the API models, the reconcilers and the webhook flags, then writes:

- ``crds/<group>_<plural>.yaml`` (what envtest installs), ``charts/<name>/crds/`` and
  ``config/crd/bases/``: the same CRD text from :func:`pyctrl.crdgen.generate_crd`; a kind with a
  conversion hub points its conversion webhook at the chart's Service
  ``<name>-webhook-service`` in ``<name>-system`` (cert-manager injects its CA);
- ``charts/<name>/files/role.yaml`` and ``files/leader_election_role.yaml``: ClusterRole rules from
  :func:`pyctrl.rbacgen.render_cluster_role` (the reconcilers' ``@rbac`` declarations, Events;
  the Lease rules apart, granted in the release namespace only);
- ``charts/<name>/files/webhook.yaml``: :func:`pyctrl.builder.webhook_configurations` of every
  defaulting/validating webhook, and whether a kind converts;
- ``config/``: the chart rendered by the real ``helm template`` (release ``<name>``, namespace
  ``<name>-system``, the webhook certificate left to you), split into kubebuilder's files, with a
  ``kustomization.yaml`` per directory: ``kubectl apply -k config/default`` installs it.

Guarantees: the output depends only on the sources (deterministic YAML, the same bytes each run);
``check=True`` writes nothing and returns one line per stale file; files carrying the generated
header that are no longer produced are removed (hand-written files never are).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from pyctrl.builder import webhook_configurations
from pyctrl.crdgen import check_files, dump_yaml, generate_crd, header, import_object, write_files
from pyctrl.rbacgen import EVENT_RULES, LEADER_ELECTION_RULES, render_cluster_role
from pyctrl.scaffold import _project
from pyctrl.scaffold._names import ScaffoldError
from pyctrl.scaffold._project import Project

__all__ = ["TOOL", "find_helm", "generate"]

TOOL = "pyctrl generate"
# kind (and name suffix after the release's fullname) -> kubebuilder's file under config/
_CONFIG_FILES = {
    ("ServiceAccount", ""): "rbac/service_account.yaml",
    ("ClusterRole", "-manager"): "rbac/role.yaml",
    ("ClusterRoleBinding", "-manager"): "rbac/role_binding.yaml",
    ("Role", "-leader-election"): "rbac/leader_election_role.yaml",
    ("RoleBinding", "-leader-election"): "rbac/leader_election_role_binding.yaml",
    ("Deployment", ""): "manager/manager.yaml",
    ("Service", "-metrics"): "default/metrics_service.yaml",
    ("Service", "-webhook-service"): "webhook/service.yaml",
    ("MutatingWebhookConfiguration", None): "webhook/manifests.yaml",
    ("ValidatingWebhookConfiguration", None): "webhook/manifests.yaml",
}


def find_helm(given: str | None = None) -> str:
    """``given``, else ``$HELM``, else ``helm`` on ``PATH``."""
    helm = given or os.environ.get("HELM") or shutil.which("helm")
    if not helm:
        raise ScaffoldError(
            "pyctrl generate needs helm to render config/: put it on PATH, set $HELM or pass --helm"
        )
    return helm


def _models(project: Project) -> dict[tuple[str, str], list[Any]]:
    by_kind: dict[tuple[str, str], list[Any]] = {}
    for r in project.resources:
        if r.api:
            model = import_object(f"{project.package}.api.{r.version}.{r.module}:{r.kind}")
            by_kind.setdefault((r.group, r.kind), []).append(model)
    return by_kind


def _crd_files(project: Project) -> dict[str, str]:
    service = {
        "name": f"{project.project_name}-webhook-service",
        "namespace": f"{project.project_name}-system",
    }
    files = {}
    for models in _models(project).values():
        crd = generate_crd(*models)
        conversion = crd["spec"].get("conversion")
        if conversion is not None:
            conversion = copy.deepcopy(conversion)
            conversion["webhook"]["clientConfig"]["service"].update(service)
            crd["spec"]["conversion"] = conversion
            inject = f"{service['namespace']}/{service['name']}"
            crd["metadata"]["annotations"] = {"cert-manager.io/inject-ca-from": inject}
        name = f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"
        sources = ", ".join(f"{m.__module__}:{m.__qualname__}" for m in models)
        files[name] = dump_yaml([crd], header(TOOL, f"source: {sources}"))
    return files


def _chart_files(root: Path, project: Project, crds: dict[str, str]) -> dict[Path, str]:
    chart = root / "charts" / project.project_name
    files = {chart / "crds" / name: text for name, text in crds.items()}
    reconcilers = [
        f"{project.package}.controllers.{r.module}:{r.kind}Reconciler"
        for r in project.resources
        if r.controller
    ]
    name = project.project_name
    files[chart / "files" / "role.yaml"] = render_cluster_role(f"{name}-manager", reconcilers, EVENT_RULES)
    files[chart / "files" / "leader_election_role.yaml"] = render_cluster_role(
        f"{name}-leader-election", [], [*LEADER_ELECTION_RULES, *EVENT_RULES]
    )
    configurations: list[dict[str, Any]] = []
    for r in project.resources:
        if r.defaulting or r.validation:
            kind = import_object(f"{project.package}.api.{r.version}.{r.module}:{r.kind}")
            configurations += webhook_configurations(
                kind, defaulting=r.defaulting, validating=r.validation, service=("webhook-service", "system")
            )
    webhooks = {"configurations": configurations, "conversion": any(r.conversion for r in project.resources)}
    files[chart / "files" / "webhook.yaml"] = dump_yaml([webhooks], header(TOOL, "source: PROJECT webhooks"))
    return files


def _kustomize_base(obj: dict[str, Any]) -> dict[str, Any]:
    """An object of the chart as kustomize's: no Helm bookkeeping labels."""
    for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
        labels = meta.get("labels", {})
        labels.pop("helm.sh/chart", None)
        if "app.kubernetes.io/managed-by" in labels:
            labels["app.kubernetes.io/managed-by"] = "kustomize"
    return obj


def _config_files(root: Path, project: Project, helm: str, crds: dict[str, str]) -> dict[Path, str]:
    name = project.project_name
    namespace = f"{name}-system"
    chart = root / "charts" / name
    args = [
        helm,
        "template",
        name,
        str(chart),
        "--namespace",
        namespace,
        "--set",
        "webhook.certificate=existingSecret",
    ]
    try:
        rendered = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise ScaffoldError(f"helm template {chart} failed: {detail.strip()}") from exc
    config = root / "config"
    head = header(TOOL, f"source: helm template charts/{name} (change the chart, not this file)")
    by_file: dict[str, list[dict[str, Any]]] = {}
    for obj in (d for d in yaml.safe_load_all(rendered) if d):
        kind, obj_name = obj["kind"], obj["metadata"]["name"]
        suffix = obj_name.removeprefix(name)
        where = _CONFIG_FILES.get((kind, suffix)) or _CONFIG_FILES.get((kind, None))
        if where is None:
            raise ScaffoldError(f"the chart renders {kind} {obj_name}, which has no place in config/")
        by_file.setdefault(where, []).append(_kustomize_base(obj))
    by_file["manager/manager.yaml"].insert(
        0, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    files = {config / where: dump_yaml(docs, head) for where, docs in sorted(by_file.items())}
    files.update({config / "crd" / "bases" / crd_name: text for crd_name, text in crds.items()})
    kustomize = header(TOOL, "source: PROJECT")
    directories: dict[str, list[str]] = {}
    for path in files:
        sub = path.parent.relative_to(config).parts[0]
        directories.setdefault(sub, []).append(str(path.relative_to(config / sub)))
    samples = sorted(p.name for p in (config / "samples").glob("*.yaml") if p.name != "kustomization.yaml")
    if samples:
        directories["samples"] = samples
    for sub, resources in directories.items():
        if sub == "default":
            continue
        doc = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": sorted(resources),
        }
        files[config / sub / "kustomization.yaml"] = dump_yaml([doc], kustomize)
    default = sorted(f"../{sub}" for sub in directories if sub not in ("default", "samples"))
    default += sorted(directories.get("default", []))
    doc = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": default}
    files[config / "default" / "kustomization.yaml"] = dump_yaml([doc], kustomize)
    return files


def generate(root: Path, *, helm: str | None = None, check: bool = False) -> list[str]:
    """Write (or, with ``check``, compare) every generated file; the lines to print.

    With ``check``, a non-empty result means something is stale."""
    project = _project.load(root)
    if not any(r.api for r in project.resources):
        raise ScaffoldError("nothing to generate yet: pyctrl create api --group G --version V --kind K")
    helm_bin = find_helm(helm)
    _import_path(root)
    crds = _crd_files(project)
    chart_files = {root / "crds" / name: text for name, text in crds.items()}
    chart_files.update(_chart_files(root, project, crds))
    owned = [root / "crds", root / "charts" / project.project_name / "crds"]
    if check:
        problems = _check(chart_files, owned)
        if problems:  # config/ renders the chart as it is on disk: stale chart files first
            return problems
        return _check(_config_files(root, project, helm_bin, crds), _config_dirs(root))
    changes = _write(chart_files, owned)
    changes += _write(_config_files(root, project, helm_bin, crds), _config_dirs(root))
    return changes or ["generated files up to date"]


def _config_dirs(root: Path) -> list[Path]:
    config = root / "config"
    return [p for p in config.iterdir() if p.is_dir()] if config.is_dir() else []


def _group(files: dict[Path, str], dirs: list[Path]) -> list[tuple[dict[Path, str], Path | None]]:
    groups: dict[Path, dict[Path, str]] = {}
    for path, text in files.items():
        groups.setdefault(path.parent, {})[path] = text
    out: list[tuple[dict[Path, str], Path | None]] = [
        (g, d if d in dirs else None) for d, g in groups.items()
    ]
    out += [({}, d) for d in dirs if d not in groups]
    return out


def _check(files: dict[Path, str], dirs: list[Path]) -> list[str]:
    return [p for group, owned in _group(files, dirs) for p in check_files(group, owned_dir=owned, tool=TOOL)]


def _write(files: dict[Path, str], dirs: list[Path]) -> list[str]:
    return [c for group, owned in _group(files, dirs) for c in write_files(group, owned_dir=owned, tool=TOOL)]


def _import_path(root: Path) -> None:
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
