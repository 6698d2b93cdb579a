"""The pyctrl peer of ``benchmarks/watch_stall_bench.py``: an informer cache on ConfigMaps in one
namespace, through the server given by ``--server`` (the benchmark's fault proxy), reporting every
event it delivers as one JSON line on stdout: ``{"event": "add|update|delete", "name": ..., "v":
...}`` (``v`` is ``data["v"]``), and ``{"event": "synced"}`` once synced.

pyctrl's defaults otherwise, as a ``Manager``'s cache has them (``watch_stall_timeout`` 30 s);
``--stall-timeout`` sets it. The client-go counterpart is ``peers/client-go-watch/main.go``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from pyctrl.cache import Cache, HandlerFuncs
from pyctrl.cache.watcher import DEFAULT_STALL_TIMEOUT
from pyctrl.client import ApiClient, ConfigMap, load_kubeconfig


def report(event: str, obj: ConfigMap | None = None) -> None:
    line: dict[str, Any] = {"event": event}
    if obj is not None:
        line |= {"name": obj.name, "v": (obj.data or {}).get("v", "")}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main(kubeconfig: Path, server: str, namespace: str, stall_timeout: float) -> None:
    config = await load_kubeconfig(kubeconfig)
    if server:
        config = config.with_options(host=server)
    async with ApiClient(config) as client:
        cache = Cache(client, default_namespaces=[namespace], watch_stall_timeout=stall_timeout)
        informer = await cache.get_informer(ConfigMap)
        informer.add_event_handler(
            HandlerFuncs(
                add=lambda obj, _initial: report("add", obj),
                update=lambda _old, new: report("update", new),
                delete=lambda obj: report("delete", obj if isinstance(obj, ConfigMap) else None),
            )
        )
        async with cache:
            if not await cache.wait_for_cache_sync(120):
                raise SystemExit(f"watch_stall_pyctrl: cache did not sync: {cache.unsynced()}")
            report("synced")
            await asyncio.Event().wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--server", default="", help="the apiserver URL to use instead of the kubeconfig's")
    p.add_argument("--namespace", required=True)
    p.add_argument("--stall-timeout", type=float, default=DEFAULT_STALL_TIMEOUT)
    a = p.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(a.kubeconfig, a.server, a.namespace, a.stall_timeout))
