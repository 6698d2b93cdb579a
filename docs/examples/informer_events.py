"""One informer, no controller: the handler calls and an index (the guide's "The informer pipeline").

    .venv/bin/python docs/examples/informer_events.py

starts a local control plane (no node), runs an ``Informer`` for the example's ConfigMaps with a
handler that records each call and an index on ``data.color``, creates two ConfigMaps, recolours
one, deletes the other, and prints what the handler saw and what the index answers. Stops
everything at the end.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyctrl.cache import HandlerFuncs, Informer
from pyctrl.client import ApiClient, ConfigMap, ObjectMeta, load_kubeconfig
from pyctrl.client.interfaces import ListOptions
from pyctrl.envtest import Environment
from pyctrl.testing import eventually

LABELS = {"guide.pyctrl.dev/example": "informer"}


def color(cm: ConfigMap) -> list[str]:
    """The index function: the values an object is found under."""
    return [(cm.data or {}).get("color", "none")]


async def run(kubeconfig: str, namespace: str = "default") -> None:
    client = ApiClient(await load_kubeconfig(kubeconfig))
    seen: list[str] = []

    def on_add(cm: Any, is_in_initial_list: bool) -> None:
        seen.append(f"on_add {cm.name} color={color(cm)[0]} initial_list={is_in_initial_list}")

    def on_update(old: Any, new: Any) -> None:
        seen.append(f"on_update {new.name} color {color(old)[0]} -> {color(new)[0]}")

    def on_delete(cm: Any) -> None:
        seen.append(f"on_delete {cm.name}")

    lister_watcher = await client.list_watcher(
        ConfigMap, ListOptions.build(namespace=namespace, labels=LABELS)
    )
    informer = Informer(lister_watcher, ConfigMap)
    informer.add_index("color", color)
    informer.add_event_handler(HandlerFuncs(add=on_add, update=on_update, delete=on_delete))
    try:
        async with informer:
            await informer.wait_for_sync(timeout=60)
            print(f"synced: {len(informer.store)} objects cached")

            def meta(name: str) -> ObjectMeta:
                return ObjectMeta(name=name, namespace=namespace, labels=LABELS)

            red = await client.create(ConfigMap(metadata=meta("apple"), data={"color": "red"}))
            await client.create(ConfigMap(metadata=meta("sky"), data={"color": "blue"}))
            await eventually(lambda: len(seen) == 2, within=30, what="two adds")
            await client.update(red.model_copy(update={"data": {"color": "blue"}}))
            await eventually(lambda: len(seen) == 3, within=30, what="the update")
            blue = sorted(name for _, name in informer.store.lookup("color", "blue"))
            red_left = len(informer.store.lookup("color", "red"))
            print(f"index color=blue: {', '.join(blue)}; color=red: {red_left} objects")
            await client.delete(red)
            await eventually(lambda: len(seen) == 4, within=30, what="the delete")
            for call in seen:
                print(call)
            await client.delete(ConfigMap(metadata=meta("sky")))
    finally:
        await client.close()


def main() -> None:
    with Environment(local_node=False) as env:
        asyncio.run(run(str(env.kubeconfig_path)))


if __name__ == "__main__":
    main()
