"""``python -m pyctrl.envtest.node``: run the local node agent (see ``pyctrl.envtest.node``).

Logs to stderr. SIGTERM or SIGINT stops every Pod process (SIGTERM, ``--stop-grace`` seconds,
SIGKILL) and exits 0. A stop that is still running :data:`STOP_REPORT_AFTER` seconds after the
signal writes every thread's stack to stderr (the node's log), so a stuck step names itself.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import signal
import sys
from pathlib import Path

from pyctrl.envtest.node.agent import NodeAgent, NodeConfig
from pyctrl.envtest.node.images import DEFAULT_IMAGE_MAP

#: seconds after SIGTERM/SIGINT at which a stop still under way dumps every thread's stack
STOP_REPORT_AFTER = 45.0


def parse_args(argv: list[str] | None = None) -> tuple[NodeConfig, bool]:
    parser = argparse.ArgumentParser(
        prog="python -m pyctrl.envtest.node",
        description="A local node: registers a Node and runs its Pods' containers as local processes.",
    )
    parser.add_argument(
        "--kubeconfig", type=Path, required=True, help="admin kubeconfig of the control plane"
    )
    parser.add_argument("--state-dir", type=Path, required=True, help="pod dirs, logs and volume data")
    parser.add_argument("--node-name", default="local-node")
    parser.add_argument(
        "--image-map",
        action="append",
        metavar="PATTERN=[NAME=VALUE ...] EXECUTABLE [ARG ...]",
        help="fnmatch pattern of images -> the ENTRYPOINT (and ENV) playing them, first match wins; "
        f"repeatable; rules given replace the defaults ({' '.join(DEFAULT_IMAGE_MAP)})",
    )
    parser.add_argument("--backoff-initial", type=float, default=10.0, help="crash-loop back-off start (s)")
    parser.add_argument("--backoff-max", type=float, default=300.0, help="crash-loop back-off cap (s)")
    parser.add_argument(
        "--stop-grace", type=float, default=5.0, help="SIGTERM grace for pods on node stop (s)"
    )
    parser.add_argument(
        "--no-provisioner", action="store_true", help="do not provision volumes (another node does)"
    )
    parser.add_argument("--zone", default="zone-a", help="the topology.kubernetes.io/zone label")
    parser.add_argument(
        "--volumes-dir", type=Path, default=None, help="provisioned volumes' data (default STATE_DIR/volumes)"
    )
    parser.add_argument(
        "--cluster-pki-dir",
        type=Path,
        default=None,
        help="the cluster CA's directory (ca.crt, ca.key): the kubelet API trusts client certificates "
        "it signed and serves a certificate it issues; without it the kubelet API is off",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    return NodeConfig(
        kubeconfig=args.kubeconfig,
        state_dir=args.state_dir.resolve(),
        node_name=args.node_name,
        image_map=args.image_map or list(DEFAULT_IMAGE_MAP),
        backoff_initial=args.backoff_initial,
        backoff_max=args.backoff_max,
        stop_grace=args.stop_grace,
        provisioner=not args.no_provisioner,
        zone=args.zone,
        volumes_dir=args.volumes_dir.resolve() if args.volumes_dir else None,
        cluster_pki=args.cluster_pki_dir.resolve() if args.cluster_pki_dir else None,
    ), args.verbose


async def _serve(config: NodeConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stopping() -> None:
        if not stop.is_set():
            faulthandler.dump_traceback_later(STOP_REPORT_AFTER, exit=False, file=sys.stderr)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping)
    await NodeAgent(config).run(stop)


def main(argv: list[str] | None = None) -> int:
    config, verbose = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    try:
        asyncio.run(_serve(config))
    finally:
        faulthandler.cancel_dump_traceback_later()
    logging.getLogger(__name__).info("local node stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
