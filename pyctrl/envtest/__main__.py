"""``python -m pyctrl.envtest start|stop|status|bin-dir`` -- the local control plane, detached.

- ``start --state-dir DIR [--crds PATH ...] [--no-local-node]``: start it and print the kubeconfig
  path (``DIR/kubeconfig``); on a directory whose control plane runs, say so and exit 0; a stale
  directory from a killed run is recovered.
- ``stop --state-dir DIR``: stop it; no process is left behind.
- ``status --state-dir DIR``: print each component's pid and whether it runs (exit 1 if not all).
- ``bin-dir``: print the directory holding the binaries, building them first when needed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyctrl.envtest import AlreadyRunning, BinariesError, Environment, EnvtestError, bin_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyctrl.envtest", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a detached control plane")
    start.add_argument("--state-dir", type=Path, required=True)
    start.add_argument("--crds", type=Path, action="append", default=[], help="CRD file or directory")
    start.add_argument("--no-local-node", action="store_true", help="do not run Pods as local processes")
    start.add_argument("--api-port", type=int, default=None, help="preferred apiserver port")
    for name in ("stop", "status"):
        p = sub.add_parser(name, help=f"{name} the control plane in --state-dir")
        p.add_argument("--state-dir", type=Path, required=True)
    sub.add_parser("bin-dir", help="print (and build if needed) the control-plane binaries' directory")
    args = parser.parse_args(argv)

    try:
        if args.command == "bin-dir":
            print(bin_dir())
        elif args.command == "start":
            env = Environment(
                state_dir=args.state_dir,
                crd_directory_paths=args.crds,
                local_node=not args.no_local_node,
                api_port=args.api_port,
                attached=False,
            )
            try:
                env.start()
            except AlreadyRunning as exc:
                print(f"envtest: {exc}", file=sys.stderr)
                print(env.kubeconfig_path)
                return 0
            print(
                f"envtest: control plane running at {env.server_url} (logs in {env.log_dir})", file=sys.stderr
            )
            print(env.kubeconfig_path)
        elif args.command == "stop":
            env = Environment.attach(args.state_dir)
            if not env.processes:
                print(f"envtest: nothing running in {args.state_dir}", file=sys.stderr)
                return 0
            env.stop()
            print(f"envtest: stopped the control plane in {args.state_dir}", file=sys.stderr)
        else:
            env = Environment.attach(args.state_dir)
            for name, proc in env.processes.items():
                print(f"{name}\t{proc.pid}\t{'running' if proc.alive() else 'dead'}")
            return 0 if env.running() else 1
    except (EnvtestError, BinariesError, TimeoutError) as exc:
        print(f"envtest: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
