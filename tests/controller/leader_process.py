"""A leader-elected manager process for the leader-election tests (run with ``sys.executable -m``).

It reconciles the ConfigMaps of one namespace continuously (``requeue_after`` 0.2 s) and appends
one line per fact to ``--out``: ``<fact> <time.monotonic()> <detail>`` (CLOCK_MONOTONIC is
system-wide on Linux, so times of different processes compare). Facts: ``started`` (identity),
``leading``, ``reconcile`` (name), ``stopped-leading``, ``cut``, ``exit`` (how ``start`` ended).

SIGUSR1 cuts the process off from the apiserver: from then on every request and watch hangs, as
behind a network partition (the cache keeps what it has, so reconciles go on until the leader
notices it lost the lease). SIGTERM/SIGINT stop it gracefully (the manager's handlers).
Timings are short (``--timings 4,3,1``: lease duration, renew deadline, retry period).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncGenerator
from typing import Any

from pyctrl.builder import ControllerBuilder
from pyctrl.client import ConfigMap, load_kubeconfig
from pyctrl.manager import Manager
from pyctrl.reconcile import Request, Result


class Facts:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, fact: str, detail: str = "") -> None:
        os.write(self.fd, f"{fact} {time.monotonic():.6f} {detail}\n".encode())


class Acting:
    """The reconciler: reads from the cache (works while cut off) and records each run."""

    def __init__(self, client: Any, facts: Facts) -> None:
        self.client, self.facts = client, facts

    async def reconcile(self, request: Request) -> Result:
        self.facts.write("reconcile", request.name)
        await self.client.get(ConfigMap, request.name, namespace=request.namespace)
        return Result(requeue_after=0.2)


class LeadingMarker:
    """A leader-only runnable recording when leader-only work starts and stops."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts

    async def start(self, stop: asyncio.Event) -> None:
        self.facts.write("leading")
        try:
            await stop.wait()
        finally:
            self.facts.write("stopped-leading")


def cut_off(mgr: Manager, facts: Facts) -> None:
    transport = mgr.api_client.rest
    forever = asyncio.Event()

    async def hang_request(*args: Any, **kwargs: Any) -> bytes:
        await forever.wait()
        raise AssertionError("unreachable")

    async def hang_stream(*args: Any, **kwargs: Any) -> AsyncGenerator[bytes, None]:
        await forever.wait()
        yield b""

    transport.request = hang_request  # type: ignore[method-assign]
    transport.stream_lines = hang_stream  # type: ignore[method-assign]
    facts.write("cut")


async def main(args: argparse.Namespace) -> None:
    facts = Facts(args.out)
    lease, renew, retry = (float(x) for x in args.timings.split(","))
    mgr = Manager(
        await load_kubeconfig(args.kubeconfig),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        cache_options={"default_namespaces": [args.namespace]},
        leader_election=True,
        leader_election_id=args.lease,
        leader_election_namespace=args.namespace,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        leader_election_release_on_cancel=args.release_on_cancel,
        graceful_shutdown_timeout=5.0,
    )
    assert mgr.elector is not None
    facts.write("started", mgr.elector.config.identity)
    ControllerBuilder(mgr).for_(ConfigMap).named("acting").complete(Acting(mgr.client, facts))
    mgr.add(LeadingMarker(facts))
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, cut_off, mgr, facts)
    try:
        await mgr.start()
    except BaseException as exc:
        facts.write("exit", type(exc).__name__)
        raise
    facts.write("exit", "clean")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--lease", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timings", default="4,3,1")
    parser.add_argument("--release-on-cancel", action="store_true")
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
