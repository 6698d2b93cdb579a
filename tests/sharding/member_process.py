"""A sharded manager process for the sharding tests (run with ``sys.executable -m``).

It reconciles the ConfigMaps labelled ``shard-test=yes`` of one namespace (``requeue_after``
0.3 s, so every held object is reconciled continuously) as a member of a sharding ring, and
appends one line per fact to ``--out``: ``<fact> <time.monotonic()> <detail>``
(CLOCK_MONOTONIC is system-wide on Linux, so times of different processes compare). Facts:
``started`` (identity), ``begin``/``end`` (name) around each reconcile, whose body is an
uncached read (a real await, so reconciles of different members interleave), ``release``
(name) from the fence's release hook (the object left the member's held set), and ``exit``.
SIGKILL is the crash the test inflicts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from pyctrl.builder import ControllerBuilder
from pyctrl.client import ConfigMap, load_kubeconfig
from pyctrl.log import setup_logging
from pyctrl.manager import Manager
from pyctrl.predicate import label_selector
from pyctrl.reconcile import Request, Result
from pyctrl.sharding import ShardingOptions


class Facts:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, fact: str, detail: str = "") -> None:
        os.write(self.fd, f"{fact} {time.monotonic():.6f} {detail}\n".encode())


class Recording:
    def __init__(self, reader: Any, facts: Facts) -> None:
        self.reader, self.facts = reader, facts

    async def reconcile(self, request: Request) -> Result:
        self.facts.write("begin", request.name)
        try:
            await self.reader.get(ConfigMap, request.name, namespace=request.namespace)
        finally:
            self.facts.write("end", request.name)
        return Result(requeue_after=0.3)


async def main(args: argparse.Namespace) -> None:
    setup_logging("text", "INFO")  # to the process's log file, read when the test fails
    facts = Facts(args.out)
    lease, renew, retry = (float(x) for x in args.timings.split(","))
    options = ShardingOptions(
        ring="shard-test",
        namespace=args.namespace,
        identity=args.identity,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
    )
    mgr = Manager(
        await load_kubeconfig(args.kubeconfig),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        cache_options={"default_namespaces": [args.namespace]},
        sharding=options,
        graceful_shutdown_timeout=5.0,
    )
    facts.write("started", args.identity)
    selected = label_selector({"shard-test": "yes"})  # not the namespace's kube-root-ca.crt
    builder = ControllerBuilder(mgr).for_(ConfigMap, predicates=[selected]).named("recording")
    builder.with_options(max_concurrent_reconciles=4).complete(Recording(mgr.api_reader, facts))
    assert mgr.shard_coordinator is not None
    mgr.shard_coordinator.gate("recording").on_release(lambda request: facts.write("release", request.name))
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
    parser.add_argument("--identity", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timings", default="6,4,1")
    asyncio.run(main(parser.parse_args()))
