"""Trace one object from the apiserver to its reconciles (the guide's "Tracing a reconcile" page).

    PYCTRL_TRACE=1 .venv/bin/python docs/examples/trace_a_reconcile.py

starts a local control plane (envtest, no node), runs a manager with one controller, creates one
ConfigMap, changes its data once, and stops everything. The controller records the ConfigMap's
data keys in an annotation, which is a write to the very object it watches: the trace shows that
write coming back as a watch event and a predicate filtering it, so it costs no reconcile.
The trace goes to stderr; stdout says what the script does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyctrl import ControllerBuilder, Manager, Request, Result, load_config
from pyctrl.cache import ByObject
from pyctrl.client import ConfigMap, ObjectMeta
from pyctrl.client.patch import PatchType, RawPatch
from pyctrl.envtest import Environment
from pyctrl.event import UpdateEvent
from pyctrl.predicate import Funcs
from pyctrl.testing import eventually

NAMESPACE, NAME = "default", "traced"
KEYS = "guide.pyctrl.dev/keys"
LABELS = {"guide.pyctrl.dev/example": "trace"}


def data_changed(event: UpdateEvent) -> bool:
    """Updates pass only when ``data`` changed (our own annotation write does not count)."""
    return bool(event.object_old.data != event.object_new.data)


class KeysReconciler:
    """Writes the sorted data keys of each ConfigMap to its ``guide.pyctrl.dev/keys`` annotation."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def reconcile(self, request: Request) -> Result:
        cm = await self.client.get(ConfigMap, request.name, namespace=request.namespace)  # the cache
        keys = ",".join(sorted(cm.data or {}))
        if (cm.metadata.annotations or {}).get(KEYS) != keys:
            patch = RawPatch(PatchType.MERGE, {"metadata": {"annotations": {KEYS: keys}}})
            await self.client.patch(cm, patch)  # to the apiserver; the cache sees it when its event comes
        return Result(requeue_after=30)  # level-triggered: look again in 30 s whatever happens


async def annotated(mgr: Manager, keys: str) -> bool:
    """The annotation is written and the cache has seen that write (its watch event is through)."""
    cached = await mgr.client.get(ConfigMap, NAME, namespace=NAMESPACE)
    return (cached.metadata.annotations or {}).get(KEYS) == keys


async def run(kubeconfig: str) -> None:
    mgr = Manager(
        await load_config(kubeconfig),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        # cache only the example's ConfigMaps: the trace then shows nothing else
        cache_options={"by_object": {ConfigMap: ByObject(namespaces=[NAMESPACE], labels=LABELS)}},
    )
    ControllerBuilder(mgr).for_(ConfigMap, predicates=[Funcs(update_func=data_changed)]).named(
        "keys"
    ).complete(KeysReconciler(mgr.client))
    stop = asyncio.Event()
    manager = asyncio.create_task(mgr.start(stop))
    try:
        await eventually(mgr.elected.is_set, within=60, what="the manager to start its controllers")
        print(f"creating ConfigMap {NAMESPACE}/{NAME}")
        cm = ConfigMap(
            metadata=ObjectMeta(name=NAME, namespace=NAMESPACE, labels=LABELS), data={"greeting": "hello"}
        )
        created = await mgr.client.create(cm)
        await eventually(lambda: annotated(mgr, "greeting"), within=60, what="the first reconcile")
        print(f"changing the data of {NAMESPACE}/{NAME}")
        await mgr.client.patch(created, RawPatch(PatchType.MERGE, {"data": {"name": "world"}}))
        await eventually(lambda: annotated(mgr, "greeting,name"), within=60, what="the second reconcile")
        print("stopping")
    finally:
        stop.set()
        await manager


def main() -> None:
    with Environment(local_node=False) as env:  # stopped on exit, even on an error or Ctrl-C
        print(f"control plane started in {env.state_dir}")
        asyncio.run(run(str(env.kubeconfig_path)))
    print("stopped: control plane and manager")


if __name__ == "__main__":
    main()
