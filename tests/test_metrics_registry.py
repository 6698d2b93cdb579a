"""pyctrl.metrics: the shared registry and ``once``."""

from __future__ import annotations

import threading

from pyctrl.metrics import once


def test_once_makes_the_value_on_first_use_only_even_from_many_threads() -> None:
    calls: list[int] = []
    start = threading.Barrier(8)

    @once
    def families() -> object:
        calls.append(1)
        return object()

    assert calls == []  # nothing registered until a component uses it
    got: list[object] = []

    def use() -> None:
        start.wait()
        got.append(families())

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]
    assert len({id(g) for g in got}) == 1
