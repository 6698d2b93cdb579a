"""``python -m pyctrl.envtest start|stop|status|node|bin-dir`` -- the local control plane, detached.

- ``start --state-dir DIR [--nodes N] [--runtime local|kubelet] [--crds PATH ...] [--no-local-node]
  [--metrics-server]``:
  start it (N nodes, default 1: local nodes, or with ``--runtime kubelet`` real nodes -- kubelet,
  containerd, kube-proxy -- and CoreDNS) and print the kubeconfig path (``DIR/kubeconfig``); on a
  directory whose control plane runs, say so and exit 0; a stale directory from a killed run is
  recovered. ``--metrics-server`` also runs metrics-server (``kubectl top``, HPA resource metrics).
- ``stop --state-dir DIR``: stop it; no process is left behind.
- ``status --state-dir DIR``: print each component's pid and whether it runs, and each stopped
  node (exit 1 if a component or a node not stopped on purpose is dead).
- ``node stop NAME --state-dir DIR``: power node NAME off (its process and containers SIGKILLed);
  ``node start NAME --state-dir DIR``: boot it again and wait until it is Ready.
- ``bin-dir``: print the directory holding the binaries, building them first when needed.

Bad input -- ``--nodes 0``, an unknown node name, stopping a stopped node or starting a running
one -- is reported on stderr with exit code 2; other failures exit 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyctrl.envtest import AlreadyRunning, BinariesError, Environment, EnvtestError, NodeError, bin_dir


def _node_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {count} (--no-local-node runs none)")
    return count


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pyctrl.envtest", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a detached control plane")
    start.add_argument("--state-dir", type=Path, required=True)
    start.add_argument("--crds", type=Path, action="append", default=[], help="CRD file or directory")
    start.add_argument("--no-local-node", action="store_true", help="do not run Pods as local processes")
    start.add_argument(
        "--nodes", type=_node_count, default=1, help="local nodes (default 1: local-node; N: local-node-1..N)"
    )
    start.add_argument("--api-port", type=int, default=None, help="preferred apiserver port")
    start.add_argument(
        "--runtime",
        choices=["local", "kubelet"],
        default="local",
        help="local: Pods as local processes (default); kubelet: real nodes (kubelet, containerd, CoreDNS)",
    )
    start.add_argument(
        "--metrics-server",
        action="store_true",
        help="run metrics-server behind the metrics.k8s.io APIService (kubectl top, HPA resource metrics)",
    )
    for name in ("stop", "status"):
        p = sub.add_parser(name, help=f"{name} the control plane in --state-dir")
        p.add_argument("--state-dir", type=Path, required=True)
    node = sub.add_parser("node", help="power a node off (stop) or on again (start)")
    node.add_argument("action", choices=["stop", "start"])
    node.add_argument("name", help="the node's name (see status)")
    node.add_argument("--state-dir", type=Path, required=True)
    sub.add_parser("bin-dir", help="print (and build if needed) the control-plane binaries' directory")
    return parser


def _start(args: argparse.Namespace) -> int:
    env = Environment(
        state_dir=args.state_dir,
        crd_directory_paths=args.crds,
        local_node=not args.no_local_node,
        nodes=args.nodes,
        api_port=args.api_port,
        attached=False,
        runtime=args.runtime,
        metrics_server=args.metrics_server,
    )
    try:
        env.start()
    except AlreadyRunning as exc:
        print(f"envtest: {exc}", file=sys.stderr)
        print(env.kubeconfig_path)
        return 0
    nodes = ", ".join(env.node_names) or "no nodes"
    print(
        f"envtest: control plane running at {env.server_url} ({nodes}; logs in {env.log_dir})",
        file=sys.stderr,
    )
    print(env.kubeconfig_path)
    return 0


def _status(env: Environment) -> int:
    for name, proc in env.processes.items():
        print(f"{name}\t{proc.pid}\t{'running' if proc.alive() else 'dead'}")
    for name in env.node_names:
        if name not in env.processes:
            print(f"{name}\t-\tstopped")
    return 0 if env.running() else 1


def _node(env: Environment, action: str, name: str) -> int:
    if not env.processes:
        raise NodeError(f"nothing runs in {env.state_dir}")
    if action == "stop":
        env.stop_node(name)
        print(f"envtest: node {name} powered off", file=sys.stderr)
    else:
        env.start_node(name)
        print(f"envtest: node {name} Ready", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "bin-dir":
            print(bin_dir())
            return 0
        if args.command == "start":
            return _start(args)
        env = Environment.attach(args.state_dir)
        if args.command == "node":
            return _node(env, args.action, args.name)
        if args.command == "status":
            return _status(env)
        if not env.processes:
            print(f"envtest: nothing running in {args.state_dir}", file=sys.stderr)
            return 0
        env.stop()
        print(f"envtest: stopped the control plane in {args.state_dir}", file=sys.stderr)
    except NodeError as exc:
        print(f"envtest: error: {exc}", file=sys.stderr)
        return 2
    except (EnvtestError, BinariesError, TimeoutError) as exc:
        print(f"envtest: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
