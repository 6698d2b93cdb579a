"""Reads from the cache, writes to the apiserver (the guide's "The split client" page).

    .venv/bin/python docs/examples/split_client.py

starts a local control plane (no node), then shows the manager's two readers after one write:
``mgr.api_reader`` answers from the apiserver at once, ``mgr.client`` from the informer cache once
the write's watch event has arrived. Stops everything at the end.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from pyctrl import Manager, load_config
from pyctrl.client import ConfigMap, ObjectMeta
from pyctrl.envtest import Environment
from pyctrl.testing import eventually


async def run(kubeconfig: str, namespace: str = "default") -> None:
    mgr = Manager(await load_config(kubeconfig), metrics_bind_address="0", health_probe_bind_address="0")
    stop = asyncio.Event()
    manager = asyncio.create_task(mgr.start(stop))
    try:
        await eventually(mgr.elected.is_set, within=60, what="the manager to start")
        await mgr.client.list(ConfigMap, namespace=namespace)  # starts the ConfigMap informer, waits for sync
        name = f"split-{uuid.uuid4().hex[:6]}"
        cm = ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace), data={"v": "1"})
        written = await mgr.client.create(cm)  # a write: straight to the apiserver
        print(f"created {namespace}/{name} at resourceVersion {written.metadata.resource_version}")

        direct = await mgr.api_reader.get(ConfigMap, name, namespace=namespace)
        print(f"api_reader.get: resourceVersion {direct.metadata.resource_version} (the apiserver)")

        started = time.perf_counter()

        async def cached_version() -> str | None:
            cached = await mgr.client.get(ConfigMap, name, namespace=namespace)
            return cached.metadata.resource_version

        rv = await eventually(cached_version, within=30, what="the watch event", interval=0.001)
        waited = (time.perf_counter() - started) * 1000
        print(f"client.get: resourceVersion {rv} (the cache, once its watch event arrived: {waited:.0f} ms)")
        await mgr.client.delete(written)
    finally:
        stop.set()
        await manager


def main() -> None:
    with Environment(local_node=False) as env:
        asyncio.run(run(str(env.kubeconfig_path)))


if __name__ == "__main__":
    main()
