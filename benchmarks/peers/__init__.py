"""The implementations compared by ``python -m benchmarks`` (see ``benchmarks/README.md``).

Each is a program run as its own process: ``--kubeconfig PATH --namespace NS --concurrency N``.
It watches ``bench.pyctrl.dev/v1`` Items in that namespace and copies ``spec.value`` into
``status.observed`` through the status subresource, with ``N`` concurrent reconciles and no
client-side rate limit:

- ``pyctrl_impl``       -- pyctrl's public API (Manager, ControllerBuilder, the split client);
- ``kopf_impl``         -- kopf, with an equivalent handler patching status;
- ``raw_loop``          -- plain aiohttp list + watch + status merge-patch, no framework;
- ``controller-runtime/`` -- the same controller in Go with sigs.k8s.io/controller-runtime.
"""

from __future__ import annotations

import argparse

__all__ = ["parse_args"]


def parse_args(prog: str) -> argparse.Namespace:
    """The command line every peer takes."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    return parser.parse_args()
