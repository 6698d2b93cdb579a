"""``kubectl-rediscluster``: argument parsing, reading the cluster and writing intents through
the apiserver (pyctrl's :class:`~pyctrl.client.ApiClient`, the kubeconfig loaded as kubectl does:
``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``; ``--context``; the namespace from
``-n``, else the context's, else ``default``).

Exit status: 0 done (``explain``: Ready), 1 ``explain`` of a cluster that is not Ready, 2 an error
(bad arguments, a missing object, the apiserver refusing, an intent asked of a ``mode: cluster``
RedisCluster, which the operator acts on in replication mode only), its message on stderr naming
what failed. Colour only when stdout is a terminal (``--color auto``) and ``NO_COLOR`` is unset.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.backup import RedisBackup
from examples.rediscluster.api.intents import FENCED_PODS, HIBERNATION, SWITCHOVER_TO
from examples.rediscluster.plugin.view import Snapshot, explain, render_explain, render_status
from pyctrl.client import (
    ApiClient,
    ConfigError,
    Conflict,
    Event,
    KubernetesError,
    NotFound,
    Pod,
    RawPatch,
    load_kubeconfig,
)
from pyctrl.client.patch import PatchType
from pyctrl.client.scheme import default_scheme

__all__ = ["FENCED_PODS", "HIBERNATION", "SWITCHOVER_TO", "main", "run"]

CLUSTER_LABEL = "redis.pyctrl.dev/cluster"  # the RedisBackup's cluster (as scheduled backups carry)
KIND_LABEL = "redis.pyctrl.dev/backup-kind"
_NOTE = "note: the operator carries out {what}; `kubectl rediscluster status` shows its progress."


class UsageError(Exception):
    """A refused command: the message says what to change."""


def _common(defaults: bool) -> argparse.ArgumentParser:
    """The options kubectl users type anywhere (``kubectl rediscluster status rc -n ns``): on the
    top parser with their defaults, on each command without (so a value given first stays)."""
    common = argparse.ArgumentParser(add_help=False, argument_default=None if defaults else argparse.SUPPRESS)
    common.add_argument("-n", "--namespace", help="namespace (default: the context's, else default)")
    common.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    common.add_argument("--context", help="kubeconfig context (default: the current one)")
    colour = {"default": "auto"} if defaults else {}
    common.add_argument("--color", choices=("auto", "always", "never"), **colour)  # type: ignore[arg-type]
    return common


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl rediscluster",
        description="Inspect and operate pyctrl RedisClusters.",
        parents=[_common(defaults=True)],
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, what: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=what, parents=[_common(defaults=False)])

    status = command("status", "pods, roles, shards, backups, conditions, Events")
    status.add_argument("name")
    why = command("explain", "why the cluster is not Ready, in plain words")
    why.add_argument("name")
    backup = command("backup", "create a RedisBackup of the cluster now")
    backup.add_argument("name")
    backup.add_argument(
        "--name", dest="backup_name", help="the RedisBackup's name (default: NAME-manual-<time>)"
    )
    backup.add_argument("--pvc", help="PersistentVolumeClaim to write to (default: spec.backup.destination)")
    hibernate = command("hibernate", "ask the operator to hibernate (on) or wake (off)")
    hibernate.add_argument("state", choices=("on", "off"))
    hibernate.add_argument("name")
    for verb in ("fence", "unfence"):
        fence = command(verb, f"ask the operator to {verb} a pod")
        fence.add_argument("name")
        fence.add_argument("pod")
    promote = command("promote", "ask the operator for a planned switchover to POD")
    promote.add_argument("name")
    promote.add_argument("pod")
    return parser


def _context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig context (as kubectl takes it), else ``default``."""
    paths = kubeconfig or os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    for path in paths.split(os.pathsep):
        try:
            doc = yaml.safe_load(Path(path).expanduser().read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        wanted = context or doc.get("current-context")
        for entry in doc.get("contexts") or []:
            if entry.get("name") == wanted:
                return str((entry.get("context") or {}).get("namespace") or "default")
    return "default"


def _colour(choice: str) -> bool:
    if choice == "always":
        return True
    return choice == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR")


async def _read(client: ApiClient, namespace: str, name: str) -> Snapshot:
    try:
        cluster = await client.get(RedisCluster, name, namespace=namespace)
    except NotFound:
        raise UsageError(f"RedisCluster {namespace}/{name} not found") from None
    selector = (cluster.status.selector if cluster.status else None) or f"app.kubernetes.io/instance={name}"
    pods = list(await client.list(Pod, namespace=namespace, label_selector=selector))
    # the cluster's Events, its StatefulSet's (pods created) and its pods' (scheduled, probes)
    involved = {("RedisCluster", name), ("StatefulSet", name), *(("Pod", p.name) for p in pods)}
    events = [
        e
        for e in await client.list(Event, namespace=namespace)
        if (e.involved_object.kind, e.involved_object.name) in involved
    ]
    backups = [b for b in await client.list(RedisBackup, namespace=namespace) if b.spec.cluster_name == name]
    return Snapshot(cluster, pods, events, backups)


async def _annotate(client: ApiClient, cluster: RedisCluster, annotations: dict[str, str | None]) -> None:
    """A merge patch of annotations, refused (Conflict) if the cluster changed since it was read."""
    meta = {"annotations": annotations, "resourceVersion": cluster.metadata.resource_version}
    await client.patch(cluster, RawPatch(PatchType.MERGE, {"metadata": meta}))


def _pod_of(snapshot: Snapshot, pod: str) -> str:
    names = sorted(p.name for p in snapshot.pods)
    if pod not in names:
        raise UsageError(
            f"{pod!r} is not a pod of RedisCluster {snapshot.cluster.name} (pods: {', '.join(names)})"
        )
    return pod


def _fenced(cluster: RedisCluster) -> list[str]:
    text = (cluster.metadata.annotations or {}).get(FENCED_PODS)
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"annotation {FENCED_PODS} is not a JSON list of pod names: {text!r}; fix it first")
    return value


def _backup_object(cluster: RedisCluster, name: str | None, pvc: str | None) -> dict[str, Any]:
    if pvc is not None:
        destination: dict[str, Any] = {"pvc": {"claimName": pvc}}
    elif cluster.spec.backup is not None:
        destination = cluster.spec.backup.destination.model_dump(by_alias=True, exclude_none=True)
    else:
        raise UsageError(
            f"RedisCluster {cluster.name} has no spec.backup.destination: pass --pvc CLAIM to say where"
        )
    now = datetime.datetime.now(datetime.UTC)
    return {
        "apiVersion": RedisBackup.gvk.api_version,
        "kind": "RedisBackup",
        "metadata": {
            "name": name or f"{cluster.name[:40]}-manual-{now:%Y%m%d%H%M%S}",
            "namespace": cluster.namespace,
            "labels": {CLUSTER_LABEL: cluster.name, KIND_LABEL: "manual"},
        },
        "spec": {"clusterName": cluster.name, "destination": destination},
    }


def _intent(command: str, snapshot: Snapshot, arg: str | None) -> tuple[dict[str, str | None], str, str]:
    """The annotations a write command sets on what was read, what it says, and what it asks for."""
    cluster = snapshot.cluster
    asks = command in ("fence", "promote") or (command == "hibernate" and arg == "on")
    if asks and cluster.spec.mode == "cluster":
        what = {"fence": "fencing", "promote": "a switchover", "hibernate": "hibernation"}[command]
        raise UsageError(
            f"RedisCluster {cluster.namespace}/{cluster.name} runs mode: cluster, where the operator "
            f"does not act on {what} (replication mode only); nothing was written"
        )
    match command:
        case "hibernate":
            return {HIBERNATION: arg}, f"annotated {HIBERNATION}={arg}", "hibernation"
        case "fence" | "unfence":
            pod, fenced = _pod_of(snapshot, arg or ""), _fenced(cluster)
            wanted = sorted({*fenced, pod}) if command == "fence" else [p for p in fenced if p != pod]
            value = json.dumps(wanted) if wanted else None
            return {FENCED_PODS: value}, f"fenced pods: {', '.join(wanted) or 'none'}", "fencing"
        case _:  # promote
            pod = _pod_of(snapshot, arg or "")
            if cluster.status is not None and cluster.status.current_master == pod:
                raise UsageError(f"{pod} is already the master of {cluster.name}")
            return {SWITCHOVER_TO: pod}, f"annotated {SWITCHOVER_TO}={pod}", "a planned switchover"


async def _write_intent(client: ApiClient, args: argparse.Namespace, namespace: str) -> None:
    """Read, compute the annotations, patch with the read resourceVersion; on a Conflict (the
    operator wrote the object meanwhile, e.g. its status) read again, like client-go's
    RetryOnConflict, up to 5 times."""
    arg = args.state if args.command == "hibernate" else args.pod
    for attempt in range(5):
        snapshot = await _read(client, namespace, args.name)
        annotations, said, what = _intent(args.command, snapshot, arg)
        try:
            await _annotate(client, snapshot.cluster, annotations)
        except Conflict:
            if attempt == 4:
                raise
            continue
        print(f"rediscluster/{args.name} {said}")
        print(_NOTE.format(what=what), file=sys.stderr)
        return


async def _command(client: ApiClient, args: argparse.Namespace, namespace: str) -> int:
    if args.command in ("hibernate", "fence", "unfence", "promote"):
        await _write_intent(client, args, namespace)
        return 0
    snapshot = await _read(client, namespace, args.name)
    colour = _colour(args.color)
    match args.command:
        case "status":
            sys.stdout.write(render_status(snapshot, colour=colour))
        case "explain":
            sys.stdout.write(render_explain(snapshot, colour=colour))
            return 1 if explain(snapshot) else 0
        case "backup":
            made = await client.create(_backup_object(snapshot.cluster, args.backup_name, args.pvc))
            name = made["metadata"]["name"]
            print(
                f"redisbackup/{name} created; follow it with:"
                f" kubectl get redisbackup -n {namespace} {name} -w"
            )
    return 0


async def run(argv: Sequence[str]) -> int:
    """Run one command; the exit status (see the module docstring)."""
    args = _parser().parse_args(argv)
    namespace = args.namespace or _context_namespace(args.kubeconfig, args.context)
    scheme = default_scheme.copy()
    scheme.add(RedisCluster)
    scheme.add(RedisBackup)
    try:
        config = await load_kubeconfig(args.kubeconfig, context=args.context)
        async with ApiClient(config, scheme=scheme) as client:
            return await _command(client, args, namespace)
    except (UsageError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except KubernetesError as exc:
        print(f"error: {args.command} {namespace}/{args.name}: {exc}", file=sys.stderr)
    return 2


def main() -> None:
    """The ``kubectl-rediscluster`` console script."""
    sys.exit(asyncio.run(run(sys.argv[1:])))
