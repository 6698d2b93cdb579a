"""The pyctrl peer: one controller for ``Item`` written against pyctrl's public API.

The reconciler reads the Item from the informer cache and, when ``status.observed`` differs from
the mark followed by ``spec.value``, patches the status subresource with a merge patch computed
from the original (controller-runtime's ``client.MergeFrom``), as the Go peer does. Metrics and
probe servers are off, the cache holds only the benchmark's namespace, the client has no rate
limit (pyctrl's default).
"""

from __future__ import annotations

import asyncio

from benchmarks.peers import parse_args
from pyctrl import ControllerBuilder, Manager, Request, Result, load_config, setup_logging
from pyctrl.client import GroupVersionKind, KubeModel, KubeObject, MergeFrom, NotFound
from pyctrl.client.interfaces import Client


class ItemSpec(KubeModel):
    value: str


class ItemStatus(KubeModel):
    observed: str | None = None


class Item(KubeObject):
    """``bench.pyctrl.dev/v1`` Item (benchmarks/peers/crd.yaml)."""

    gvk = GroupVersionKind("bench.pyctrl.dev", "v1", "Item")
    spec: ItemSpec
    status: ItemStatus | None = None


class ItemReconciler:
    def __init__(self, client: Client, mark: str) -> None:
        self.client = client
        self.mark = mark

    async def reconcile(self, request: Request) -> Result:
        try:
            item = await self.client.get(Item, request.name, namespace=request.namespace)
        except NotFound:
            return Result()
        observed = self.mark + item.spec.value
        if item.status is not None and item.status.observed == observed:
            return Result()
        original = item.model_copy(deep=True)
        item.status = ItemStatus(observed=observed)
        await self.client.status().patch(item, MergeFrom(original))
        return Result()


async def main() -> None:
    args = parse_args("pyctrl_impl")
    setup_logging(level="INFO")
    mgr = Manager(
        await load_config(args.kubeconfig),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        cache_options={"default_namespaces": [args.namespace]},
    )
    (
        ControllerBuilder(mgr)
        .for_(Item)
        .with_options(max_concurrent_reconciles=args.concurrency)
        .complete(ItemReconciler(mgr.client, args.mark))
    )
    await mgr.start()  # until SIGTERM/SIGINT


if __name__ == "__main__":
    asyncio.run(main())
