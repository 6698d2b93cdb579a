"""Three candidates and one Lease: release on cancel, then a lost renew (the guide's "Leader election").

    .venv/bin/python docs/examples/leader_election.py

starts a local control plane (no node) and runs client-go's algorithm with short timings
(lease 4 s, renew deadline 3 s, retry 0.5 s) through ``pyctrl.leaderelection.LeaderElector``:

1. A acquires the Lease; B campaigns and waits;
2. A stops with ``release_on_cancel``: it writes an empty holder, and B takes over at its next try;
3. B's connection to the apiserver is cut: its renewals fail, and once none succeeded for the
   renew deadline B declares leadership lost;
4. C, a fresh candidate, must first see the Lease unchanged for a whole lease duration on its own
   clock: it acquires it only after B has stopped leading.

Prints one line per step with the time since the start; stops everything at the end.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pyctrl.client import ApiClient, Lease, load_kubeconfig
from pyctrl.client.errors import TransportError
from pyctrl.envtest import Environment
from pyctrl.leaderelection import LeaderElectionConfig, LeaderElectionLost, LeaderElector

TIMINGS: dict[str, Any] = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 0.5}


class Cuttable:
    """A candidate's view of the apiserver that can be cut off, like a network partition."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.cut = False
        self.flowing = asyncio.Event()  # cleared: requests wait (a slow link), nothing fails
        self.flowing.set()

    async def _check(self) -> None:
        await self.flowing.wait()
        if self.cut:
            raise TransportError("connection refused (the example cut this candidate off)")

    async def get(self, kind: Any, name: str, *, namespace: str) -> Any:
        await self._check()
        return await self.client.get(kind, name, namespace=namespace)

    async def create(self, obj: Any) -> Any:
        await self._check()
        return await self.client.create(obj)

    async def update(self, obj: Any) -> Any:
        await self._check()
        return await self.client.update(obj)


async def run(kubeconfig: str, namespace: str = "default") -> None:
    client = ApiClient(await load_kubeconfig(kubeconfig))
    t0 = time.monotonic()

    def say(what: str, at: float | None = None) -> None:
        print(f"t={(at if at is not None else time.monotonic()) - t0:4.1f}s  {what}")

    async def when(event: asyncio.Event) -> float:
        await event.wait()
        return time.monotonic()

    def candidate(identity: str, view: Any) -> tuple[LeaderElector, asyncio.Event]:
        config = LeaderElectionConfig(
            name="guide-example", namespace=namespace, identity=identity, release_on_cancel=True, **TIMINGS
        )
        return LeaderElector(view, config), asyncio.Event()

    async def holder() -> str:
        lease = await client.get(Lease, "guide-example", namespace=namespace)
        return (lease.spec.holder_identity if lease.spec else None) or "(nobody)"

    a, stop_a = candidate("A", client)
    b_view = Cuttable(client)
    b, stop_b = candidate("B", b_view)
    c, stop_c = candidate("C", client)
    tasks = {name: asyncio.create_task(e.run(stop)) for name, e, stop in (("A", a, stop_a), ("B", b, stop_b))}
    try:
        await a.elected.wait()
        say(f"A is leader; the Lease holder is {await holder()}")
        await asyncio.sleep(TIMINGS["retry_period"] * 3)  # the example's pace: B tries a few times
        say(f"B is leader: {b.is_leader()} (A's Lease has not expired on B's clock)")

        # B's requests are held while A releases, so the empty holder is read before B's next
        # try can take the Lease (at 0.5 s retries, a loaded machine's GET could otherwise lose)
        b_view.flowing.clear()
        stop_a.set()
        await tasks["A"]
        say(f"A stopped and released the Lease; holder now {await holder()}")
        b_view.flowing.set()
        await b.elected.wait()
        say(f"B is leader; the Lease holder is {await holder()}")

        tasks["C"] = asyncio.create_task(c.run(stop_c))
        c_elected = asyncio.create_task(when(c.elected))
        b_lost: list[float] = []
        tasks["B"].add_done_callback(lambda _: b_lost.append(time.monotonic()))
        b_view.cut = True
        say("B is cut off from the apiserver; C starts campaigning")
        try:
            await tasks["B"]
        except LeaderElectionLost as exc:
            say(f"B lost leadership: {exc}", at=b_lost[0])
        at = await c_elected
        say(f"C is leader; the Lease holder is {await holder()}", at=at)
    finally:
        for stop in (stop_a, stop_b, stop_c):
            stop.set()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        await client.close()


def main() -> None:
    with Environment(local_node=False) as env:
        asyncio.run(run(str(env.kubeconfig_path)))


if __name__ == "__main__":
    main()
