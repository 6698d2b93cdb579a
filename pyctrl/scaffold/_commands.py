"""``pyctrl init``, ``pyctrl create api`` and ``pyctrl create webhook`` (kubebuilder's commands).

Each command checks its arguments and the ``PROJECT`` record first, collects every file it writes
(:class:`~pyctrl.scaffold._render.Changes`) and writes only when everything checked out, so a
refused command (a bad name, a kind created twice, a file that would be overwritten) changes
nothing. Scaffolded Python files are the user's from then on; the commands edit them only at
``# +pyctrl:scaffold:`` markers. ``<package>/_wiring.py`` (what the manager registers) is rewritten
from ``PROJECT`` by every command.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyctrl.scaffold import _project
from pyctrl.scaffold._names import (
    ScaffoldError,
    check_domain,
    check_group,
    check_kind,
    check_project_name,
    check_version,
)
from pyctrl.scaffold._project import Project, Resource
from pyctrl.scaffold._render import Changes, insert_at_marker, render

__all__ = ["create_api", "create_webhook", "init_project", "wiring"]


def init_project(root: Path, *, domain: str, project_name: str | None = None, owner: str = "") -> list[str]:
    """Lay out a new operator project in ``root`` (created when missing)."""
    check_domain(domain)
    name = check_project_name(project_name or root.resolve().name)
    if (root / _project.FILE).exists():
        raise ScaffoldError(f"{root / _project.FILE} exists: {root} is already a pyctrl project")
    project = Project(domain=domain, project_name=name, owner=owner)
    pkg = project.package
    ctx = {"project_name": name, "package": pkg, "domain": domain, "owner": owner}
    changes = Changes(root)
    for template, target in [
        ("init/pyproject.toml.j2", "pyproject.toml"),
        ("init/README.md.j2", "README.md"),
        ("init/Makefile.j2", "Makefile"),
        ("init/Dockerfile.j2", "Dockerfile"),
        ("init/gitignore.j2", ".gitignore"),
        ("init/dockerignore.j2", ".dockerignore"),
        ("init/pkg_init.py.j2", f"{pkg}/__init__.py"),
        ("init/pkg_main.py.j2", f"{pkg}/__main__.py"),
        ("init/operator.py.j2", f"{pkg}/operator.py"),
        ("init/conftest.py.j2", "tests/conftest.py"),
        ("chart/Chart.yaml.j2", f"charts/{name}/Chart.yaml"),
        ("chart/values.yaml.j2", f"charts/{name}/values.yaml"),
    ]:
        changes.add(target, render(template, **ctx))
    changes.add(".ci/run", render("init/ci_run.j2", **ctx), executable=True)
    for doc, sub in [
        ("The API types, one package per version.", "api"),
        ("The reconcilers, one module per kind.", "controllers"),
        ("The admission and conversion webhooks, one module per kind and version.", "webhooks"),
    ]:
        changes.add(f"{pkg}/{sub}/__init__.py", render("init/subpkg_init.py.j2", doc=doc))
    changes.add("tests/__init__.py", "")
    chart_dir = Path(__file__).parent / "templates" / "chart" / "templates"
    for path in sorted(chart_dir.iterdir()):  # Helm templates: copied as they are
        changes.add(f"charts/{name}/templates/{path.name}", path.read_text())
    changes.add(f"{pkg}/_wiring.py", wiring(project))
    lines = changes.write()
    _project.save(root, project)
    return [*lines, f"created {_project.FILE}", "next: pyctrl create api --group G --version V --kind K"]


def create_api(
    root: Path,
    *,
    group: str,
    version: str,
    kind: str,
    namespaced: bool = True,
    controller: bool | None = None,
    scale: bool = False,
) -> list[str]:
    """A version of a kind: its types, a sample, and (by default for its first version) a controller."""
    check_group(group)
    check_version(version)
    check_kind(kind)
    project = _project.load(root)
    if project.find(group, version, kind) is not None:
        raise ScaffoldError(
            f"the API {project.api_group(group)}/{version} {kind} already exists (see {_project.FILE}); "
            "nothing was written"
        )
    siblings = project.versions_of(group, kind)
    has_controller = next((r for r in siblings if r.controller), None)
    if controller is None:
        controller = has_controller is None
    elif controller and has_controller is not None:
        raise ScaffoldError(
            f"{kind} already has a controller (for {has_controller.version}); one controller reconciles "
            "every version of a kind: pass --controller=false"
        )
    if siblings and siblings[0].namespaced != namespaced:
        raise ScaffoldError(
            f"{kind} is {'namespaced' if siblings[0].namespaced else 'cluster-scoped'} in "
            f"{siblings[0].version}; every version of a kind has the same scope"
        )
    resource = Resource(
        group=group,
        version=version,
        kind=kind,
        namespaced=namespaced,
        controller=controller,
        scale=scale,
        storage=not siblings,  # the first version is stored; `create webhook --conversion` makes it the hub
    )
    hub = project.hub_of(group, kind)
    changes = Changes(root)
    ctx = _context(project, resource)
    pkg = project.package
    types_path = f"{pkg}/api/{version}/{resource.module}.py"
    types = render("api/types.py.j2", **ctx)
    if hub is not None:  # a new version of a kind that already converts: a spoke at once
        types = _as_spoke(types, project, resource, hub, root / types_path)
    changes.add(types_path, types)
    changes.add(f"config/samples/{ctx['sample_file']}", render("api/sample.yaml.j2", **ctx))
    if controller:
        changes.add(f"{pkg}/controllers/{resource.module}.py", render("api/controller.py.j2", **ctx))
        changes.add(f"tests/test_{resource.module}_controller.py", render("api/test_controller.py.j2", **ctx))
    project.resources.append(resource)
    version_init = f"{pkg}/api/{version}/__init__.py"
    if (root / version_init).exists():
        changes.edit(version_init, version_module(project, version))
    else:
        changes.add(version_init, version_module(project, version))
    if hub is not None:
        _add_conversion_test(changes, project, hub, replace_existing=True)
    changes.edit(f"{pkg}/_wiring.py", wiring(project))
    lines = changes.write()
    _project.save(root, project)
    return [*lines, f"updated {_project.FILE}", "next: make generate"]


def create_webhook(
    root: Path,
    *,
    group: str,
    version: str,
    kind: str,
    defaulting: bool = False,
    validation: bool = False,
    conversion: bool = False,
) -> list[str]:
    """Defaulting and/or validating webhooks for a version of a kind, or (``conversion``) make that
    version the hub that every other version of the kind converts through."""
    check_group(group)
    check_version(version)
    check_kind(kind)
    if not (defaulting or validation or conversion):
        raise ScaffoldError("create webhook needs at least one of --defaulting, --validation, --conversion")
    project = _project.load(root)
    resource = project.find(group, version, kind)
    if resource is None:
        raise ScaffoldError(
            f"no API {project.api_group(group)}/{version} {kind} in {_project.FILE}: "
            f"run `pyctrl create api --group {group} --version {version} --kind {kind}` first"
        )
    for flag, asked, done in [
        ("--defaulting", defaulting, resource.defaulting),
        ("--validation", validation, resource.validation),
        ("--conversion", conversion, resource.conversion),
    ]:
        if asked and done:
            raise ScaffoldError(f"{kind} {version} already has the {flag} webhook (see {_project.FILE})")
    changes = Changes(root)
    pkg = project.package
    if conversion:
        _make_hub(changes, project, resource)
    had_module = resource.defaulting or resource.validation or resource.conversion
    updated = replace(
        resource,
        defaulting=resource.defaulting or defaulting,
        validation=resource.validation or validation,
        conversion=resource.conversion or conversion,
    )
    ctx = {**_context(project, updated)}
    module = f"{pkg}/webhooks/{resource.module}_{version}.py"
    if had_module and (defaulting or validation):
        raise ScaffoldError(
            f"{module} exists: add the defaulting or validating webhook to it by hand "
            "(WebhookBuilder.with_defaulter / with_validator)"
        )
    if not had_module:
        changes.add(module, render("webhook/webhook.py.j2", **ctx))
    if defaulting or validation:
        changes.add(
            f"tests/test_{resource.module}_webhook_{version}.py", render("webhook/test_webhook.py.j2", **ctx)
        )
    project.resources[project.resources.index(resource)] = updated
    if conversion:
        _add_conversion_test(changes, project, updated, replace_existing=False)
    changes.edit(f"{pkg}/_wiring.py", wiring(project))
    lines = changes.write()
    _project.save(root, project)
    return [*lines, f"updated {_project.FILE}", "next: make generate"]


def _context(project: Project, r: Resource) -> dict[str, Any]:
    return {
        "project_name": project.project_name,
        "package": project.package,
        "domain": project.domain,
        "group": r.group,
        "api_group": project.api_group(r.group),
        "version": r.version,
        "kind": r.kind,
        "plural": r.plural,
        "module": r.module,
        "namespaced": r.namespaced,
        "scale": r.scale,
        "storage": r.storage,
        "defaulting": r.defaulting,
        "validation": r.validation,
        "finalizer": f"{project.api_group(r.group)}/finalizer",
        "sample_file": f"{r.group}_{r.version}_{r.module}.yaml",
    }


def _types_path(project: Project, r: Resource) -> str:
    return f"{project.package}/api/{r.version}/{r.module}.py"


def _make_hub(changes: Changes, project: Project, hub: Resource) -> None:
    siblings = [r for r in project.versions_of(hub.group, hub.kind) if r.version != hub.version]
    if not siblings:
        raise ScaffoldError(
            f"{hub.kind} has only the version {hub.version}: create another one first "
            f"(pyctrl create api --group {hub.group} --version V --kind {hub.kind} --controller=false)"
        )
    if not hub.storage:
        stored = next(r.version for r in project.versions_of(hub.group, hub.kind) if r.storage)
        raise ScaffoldError(
            f"the hub must be the storage version: {hub.kind} is stored as {stored}, so run "
            f"create webhook --version {stored} --conversion"
        )
    path = _types_path(project, hub)
    text = changes.read(path)
    bases = f"class {hub.kind}(KubeObject):"
    if bases not in text:
        raise ScaffoldError(f"{changes.root / path}: no line {bases!r} to make the hub")
    text = text.replace(bases, f"class {hub.kind}(Hub, KubeObject):", 1)
    text = text.replace(
        "from pyctrl.crdgen import", "from pyctrl.conversion import Hub\nfrom pyctrl.crdgen import", 1
    )
    changes.edit(path, text)
    for spoke in siblings:
        spoke_path = _types_path(project, spoke)
        changes.edit(
            spoke_path, _as_spoke(changes.read(spoke_path), project, spoke, hub, changes.root / spoke_path)
        )


def _as_spoke(text: str, project: Project, spoke: Resource, hub: Resource, path: Path) -> str:
    ctx = {**_context(project, spoke), "hub_version": hub.version}
    text = insert_at_marker(text, "imports", render("webhook/spoke_imports.j2", **ctx) + "\n", path=path)
    return insert_at_marker(text, "methods", render("webhook/spoke_methods.j2", **ctx), path=path)


def _add_conversion_test(
    changes: Changes, project: Project, hub: Resource, *, replace_existing: bool
) -> None:
    versions = sorted((r.version for r in project.versions_of(hub.group, hub.kind)), key=natural)
    ctx = {**_context(project, hub), "hub_version": hub.version, "versions": versions}
    target = f"tests/test_{hub.module}_conversion.py"
    text = render("webhook/test_conversion.py.j2", **ctx)
    if replace_existing and (changes.root / target).exists():
        changes.edit(target, text)
    else:
        changes.add(target, text)


_LINE_LENGTH = 110  # the scaffolded pyproject's ruff line-length


def natural(name: str) -> list[str | int]:
    """The order ruff's isort gives module and member names: case-insensitive, digit runs compared
    as numbers (``v2`` before ``v10``, ``v1`` before ``v1alpha1``)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name.lower())]


def import_line(module: str, names: list[str]) -> str:
    """``from module import a, b``, members in isort's order, exploded (with a trailing comma, as
    ruff format writes it) when it does not fit on one line."""
    members = sorted(names, key=natural)
    line = f"from {module} import {', '.join(members)}\n"
    if len(line) - 1 <= _LINE_LENGTH:
        return line
    return f"from {module} import (\n" + "".join(f"    {m},\n" for m in members) + ")\n"


def version_module(project: Project, version: str) -> str:
    """``<package>/api/<version>/__init__.py``: re-exports the kinds ``PROJECT`` has in ``version``."""
    pkg = project.package
    kinds = sorted(
        (r for r in project.resources if r.version == version and r.api), key=lambda r: natural(r.module)
    )
    lines = [
        f"from {pkg}.api.{version}.{r.module} import {name} as {name}\n"
        for r in kinds
        for name in (r.kind, f"{r.kind}Spec", f"{r.kind}Status")
    ]
    head = f"# generated by pyctrl from {_project.FILE} (create api); do not edit\n"
    return head + f'"""``{project.domain}`` API version {version}: its kinds."""\n\n' + "".join(lines)


def wiring(project: Project) -> str:
    """``<package>/_wiring.py``: the API types, controllers and webhooks ``PROJECT`` records.

    Imports come out as ruff's isort and formatter write them, so the file passes ``make lint``
    whatever the versions and kinds (``v2`` before ``v10``)."""
    pkg = project.package
    apis = sorted(
        (r for r in project.resources if r.api), key=lambda r: (natural(r.version), natural(r.kind))
    )
    controllers = sorted((r for r in project.resources if r.controller), key=lambda r: natural(r.module))
    hooks = [r for r in project.resources if r.defaulting or r.validation or r.conversion]
    imports = ""
    if apis:
        imports += import_line(f"{pkg}.api", sorted({r.version for r in apis}))
    for r in controllers:
        imports += import_line(f"{pkg}.controllers.{r.module}", [f"{r.kind}Reconciler"])
    if hooks:
        imports += import_line(f"{pkg}.webhooks", [f"{r.module}_{r.version}" for r in hooks])
    first_party = "\n" + imports if imports else ""
    types = "".join(f"    {r.version}.{r.kind},\n" for r in apis)
    types = f"(\n{types})" if types else "()"
    setup_controllers = "".join(
        f"    {r.kind}Reconciler.setup_with_manager(mgr, max_concurrent_reconciles)\n" for r in controllers
    )
    setup_hooks = "".join(f"    {r.module}_{r.version}.setup_webhook_with_manager(mgr)\n" for r in hooks)
    return (
        f"# generated by pyctrl from {_project.FILE} (init, create api, create webhook); do not edit\n"
        '"""What the manager registers: the API types, the controllers and the webhooks\n'
        '(kubebuilder\'s ``+kubebuilder:scaffold`` lines in ``cmd/main.go``)."""\n'
        "\n"
        "from __future__ import annotations\n"
        "\n"
        "from pyctrl import Manager\n"
        "from pyctrl.client.objects import KubeObject\n"
        f"{first_party}"
        "\n"
        '__all__ = ["API_TYPES", "setup_controllers", "setup_webhooks"]\n'
        "\n"
        f"API_TYPES: tuple[type[KubeObject], ...] = {types}\n"
        "\n"
        "\n"
        "def setup_controllers(mgr: Manager, max_concurrent_reconciles: int) -> None:\n"
        '    """Register every controller on ``mgr``."""\n'
        f"{setup_controllers}"
        "\n"
        "\n"
        "def setup_webhooks(mgr: Manager) -> None:\n"
        '    """Register every webhook on ``mgr``\'s webhook server."""\n'
        f"{setup_hooks}"
    )
