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
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncGenerator
from typing import Any

from pyctrl.builder import ControllerBuilder
from pyctrl.client import ConfigMap, HTTPRequest, HTTPTransport, load_kubeconfig
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


class Partition:
    """The manager's transport, wrapped before start: once ``cut``, every request hangs, and so does
    every watch at its next line, as behind a network partition."""

    def __init__(self, inner: HTTPTransport) -> None:
        self.inner = inner
        self.cut = asyncio.Event()
        self._never = asyncio.Event()

    async def _hang_if_cut(self) -> None:
        if self.cut.is_set():
            await self._never.wait()

    async def send(self, request: HTTPRequest) -> bytes:
        await self._hang_if_cut()
        return await self.inner.send(request)

    async def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        await self._hang_if_cut()
        async with contextlib.aclosing(self.inner.stream(request)) as lines:
            async for line in lines:
                await self._hang_if_cut()
                yield line


def cut_off(partition: Partition, facts: Facts) -> None:
    partition.cut.set()
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
    partition = Partition(mgr.api_client.transport)
    mgr.api_client.transport = partition
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, cut_off, partition, facts)
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
