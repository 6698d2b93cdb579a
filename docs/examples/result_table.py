"""What the controller does with each reconcile outcome (the guide's "The controller" page).

    .venv/bin/python docs/examples/result_table.py

No cluster needed: a Channel source feeds one GenericEvent per request into a real Controller,
whose reconciler answers by the request's name. The script prints the outcomes each request went
through and the controller_runtime_reconcile_total counts, then stops the controller.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from pyctrl import Controller, Request, Result, TerminalError
from pyctrl.event import GenericEvent
from pyctrl.handler import enqueue_request_for_object
from pyctrl.metrics import registry
from pyctrl.source import Channel
from pyctrl.testing import eventually

NAMES = ["success", "requeue-after", "requeue", "error", "terminal"]


class ByName:
    """Answers by request name; the second reconcile of every request succeeds."""

    def __init__(self) -> None:
        self.outcomes: dict[str, list[str]] = defaultdict(list)

    async def reconcile(self, request: Request) -> Result:
        runs = self.outcomes[request.name]
        first = not runs
        outcome = request.name if first else "success"
        runs.append(outcome)
        match outcome:
            case "requeue-after" if first:
                return Result(requeue_after=0.05)  # forget, then add_after(50 ms)
            case "requeue" if first:
                return Result(requeue=True)  # add_rate_limited: 5 ms for a first failure
            case "error" if first:
                raise RuntimeError("the world is not ready yet")  # add_rate_limited, logged as an error
            case "terminal":
                raise TerminalError("this spec can never work")  # forget: never retried
        return Result()  # forget


async def main() -> None:
    reconciler = ByName()
    controller = Controller("results", reconciler)
    events: asyncio.Queue[GenericEvent] = asyncio.Queue()
    controller.watch(Channel(events, enqueue_request_for_object()))
    stop = asyncio.Event()
    running = asyncio.create_task(controller.start(stop))
    for name in NAMES:
        events.put_nowait(GenericEvent({"metadata": {"namespace": "default", "name": name}}))
    expected = {"success": 1, "requeue-after": 2, "requeue": 2, "error": 2, "terminal": 1}
    await eventually(
        lambda: {n: len(reconciler.outcomes[n]) for n in NAMES} == expected,
        within=30,
        what="every request's reconciles",
    )
    stop.set()
    await running
    for name in NAMES:
        print(f"{name:<14} reconciled as: {' -> '.join(reconciler.outcomes[name])}")
    for result in ("success", "requeue_after", "requeue", "error"):
        labels = {"controller": "results", "result": result}
        count = registry.get_sample_value("controller_runtime_reconcile_total", labels)
        print(f"controller_runtime_reconcile_total{{result={result!r}}} = {count:g}")
    terminal = registry.get_sample_value(
        "controller_runtime_terminal_reconcile_errors_total", {"controller": "results"}
    )
    print(f"controller_runtime_terminal_reconcile_errors_total = {terminal:g}")


if __name__ == "__main__":
    asyncio.run(main())
