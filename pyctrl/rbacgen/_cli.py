"""``python -m pyctrl.rbacgen``: the ClusterRole of a set of reconcilers (``controller-gen rbac``).

::

    python -m pyctrl.rbacgen examples.rediscluster.controller:RedisClusterReconciler \
        --leader-election --events --name rediscluster-operator -o config/rbac/role.yaml
    python -m pyctrl.rbacgen ... -o config/rbac/role.yaml --check   # exit 1 when stale

Each ``MODULE:NAME`` is anything :func:`pyctrl.rbacgen.rbac_rules` accepts (a decorated class, a
``PolicyRule`` tuple such as ``pyctrl.rbacgen:EVENT_RULES``). Without ``-o`` the YAML goes to
stdout. Exit status: 0 written / up to date, 1 stale (``--check``), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pyctrl.crdgen import CRDGenerationError, check_files, dump_yaml, header, import_object, write_files
from pyctrl.rbacgen._role import generate_cluster_role
from pyctrl.rbacgen._rules import EVENT_RULES, LEADER_ELECTION_RULES, RBACError

__all__ = ["main", "render_cluster_role"]

TOOL = "pyctrl.rbacgen"


def render_cluster_role(name: str, refs: Sequence[str], *sources: object) -> str:
    """The YAML file for ``generate_cluster_role(name, *imported refs, *sources)``."""
    role = generate_cluster_role(name, *(import_object(r) for r in refs), *sources)
    notes = [f"source: {', '.join(refs)}"] if refs else []
    return dump_yaml([role], header(TOOL, *notes))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyctrl.rbacgen", description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", metavar="MODULE:NAME", help="reconcilers or rule tuples")
    parser.add_argument("--name", required=True, help="ClusterRole name")
    parser.add_argument("-o", "--output", type=Path, help="output file (default: stdout)")
    parser.add_argument("--leader-election", action="store_true", help="include LEADER_ELECTION_RULES")
    parser.add_argument("--events", action="store_true", help="include EVENT_RULES")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when -o is stale")
    args = parser.parse_args(argv)
    extra = [*(LEADER_ELECTION_RULES if args.leader_election else ()), *(EVENT_RULES if args.events else ())]
    try:
        text = render_cluster_role(args.name, args.sources, *([extra] if extra else []))
    except (RBACError, CRDGenerationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output is None:
        if args.check:
            print("error: --check needs -o FILE", file=sys.stderr)
            return 2
        sys.stdout.write(text)
        return 0
    files = {args.output: text}
    if args.check:
        problems = check_files(files, tool=TOOL)
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    for change in write_files(files, tool=TOOL) or [f"{args.output}: up to date"]:
        print(change)
    return 0
