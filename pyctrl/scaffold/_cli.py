"""``pyctrl`` (also ``python -m pyctrl``): scaffold and generate an operator project.

    pyctrl init --domain example.com [--project NAME] [--owner "Jane Doe"]
    pyctrl create api --group cache --version v1alpha1 --kind Memcached [--cluster-scoped]
                      [--controller | --controller=false] [--scale]
    pyctrl create webhook --group cache --version v1alpha1 --kind Memcached
                      [--defaulting] [--validation] [--conversion]
    pyctrl generate [--check] [--helm PATH]

Exit status: 0 done, 1 ``generate --check`` found stale files, 2 a command refused (the message
says why and what to run instead; nothing was written).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pyctrl.scaffold._commands import create_api, create_webhook, init_project
from pyctrl.scaffold._names import ScaffoldError
from pyctrl.scaffold._project import find_root

__all__ = ["main"]


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pyctrl", description="Scaffold and generate a pyctrl operator project.")
    p.add_argument("-C", "--directory", type=Path, default=Path.cwd(), help="project directory (default: .)")
    sub = p.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="lay out a new operator project")
    init.add_argument("--domain", required=True, help="API groups are <group>.<domain>, e.g. example.com")
    init.add_argument("--project", default=None, help="project name (default: the directory's name)")
    init.add_argument("--owner", default="", help="copyright owner, recorded in PROJECT")
    create = sub.add_parser("create", help="add an API or a webhook").add_subparsers(
        dest="what", required=True
    )
    for what, text in (("api", "a version of a kind and its controller"), ("webhook", "webhooks of a kind")):
        c = create.add_parser(what, help=text)
        c.add_argument("--group", required=True, help="DNS-1123 label, e.g. cache")
        c.add_argument("--version", required=True, help="e.g. v1alpha1")
        c.add_argument("--kind", required=True, help="UpperCamelCase, e.g. Memcached")
        if what == "api":
            scope = c.add_mutually_exclusive_group()
            scope.add_argument("--namespaced", dest="namespaced", action="store_true", default=True)
            scope.add_argument("--cluster-scoped", dest="namespaced", action="store_false")
            c.add_argument(
                "--controller",
                type=_bool,
                nargs="?",
                const=True,
                default=None,
                help="scaffold a controller (default: for the first version of a kind only)",
            )
            c.add_argument(
                "--resource", type=_bool, nargs="?", const=True, default=True, help=argparse.SUPPRESS
            )
            c.add_argument("--scale", action="store_true", help="add the scale subresource (.spec.size)")
        else:
            c.add_argument("--defaulting", action="store_true", help="a mutating (defaulting) webhook")
            c.add_argument("--validation", action="store_true", help="a validating webhook")
            c.add_argument(
                "--conversion",
                action="store_true",
                help="make this version the hub other versions convert through",
            )
    gen = sub.add_parser("generate", help="CRDs, RBAC, webhook configurations, the chart's files, config/")
    gen.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    gen.add_argument("--helm", default=None, help="helm binary (default: $HELM, then helm on PATH)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    directory: Path = args.directory
    try:
        if args.command == "init":
            directory.mkdir(parents=True, exist_ok=True)
            lines = init_project(directory, domain=args.domain, project_name=args.project, owner=args.owner)
        elif args.command == "create" and args.what == "api":
            if not args.resource:
                raise ScaffoldError("--resource=false: an API without its types is not supported")
            lines = create_api(
                find_root(directory),
                group=args.group,
                version=args.version,
                kind=args.kind,
                namespaced=args.namespaced,
                controller=args.controller,
                scale=args.scale,
            )
        elif args.command == "create":
            lines = create_webhook(
                find_root(directory),
                group=args.group,
                version=args.version,
                kind=args.kind,
                defaulting=args.defaulting,
                validation=args.validation,
                conversion=args.conversion,
            )
        else:
            return _generate(find_root(directory), helm=args.helm, check=args.check)
    except ScaffoldError as exc:
        print(f"pyctrl: error: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return 0


def _generate(root: Path, *, helm: str | None, check: bool) -> int:
    # Imported here: only generate needs the client, crdgen and rbacgen (init and create start fast).
    from pyctrl.crdgen import CRDGenerationError
    from pyctrl.rbacgen import RBACError
    from pyctrl.scaffold._generate import generate

    try:
        lines = generate(root, helm=helm, check=check)
    except (ScaffoldError, CRDGenerationError, RBACError) as exc:
        print(f"pyctrl: error: {exc}", file=sys.stderr)
        return 2
    if check and lines:
        print("\n".join(lines))
        print(f"{len(lines)} generated file(s) out of date; run: pyctrl generate", file=sys.stderr)
        return 1
    for line in lines or ["generated files up to date"]:
        print(line)
    return 0
