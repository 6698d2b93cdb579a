"""The implementations compared by ``python -m benchmarks`` (see ``benchmarks/README.md``).

Each is a program run as its own process: ``--kubeconfig PATH --namespace NS --concurrency N
[--mark M]``. It watches ``bench.pyctrl.dev/v1`` Items in that namespace and writes ``M`` followed
by ``spec.value`` into ``status.observed`` through the status subresource (``M`` is empty unless
given), with ``N`` concurrent reconciles and no client-side rate limit. The mark lets the benchmark
reuse stored Items: every Item converged by a program run with one mark is unconverged for the next
run, given another, with no write by the benchmark.

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
    parser.add_argument("--mark", default="", help="prefix of status.observed (default: none)")
    return parser.parse_args()
