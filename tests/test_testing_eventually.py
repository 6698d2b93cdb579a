"""pyctrl.testing.eventually: a deadline-bounded poll of a sync or async check."""

from __future__ import annotations

import pytest

from pyctrl.testing import eventually


async def test_returns_the_first_truthy_value_of_a_sync_check() -> None:
    values = iter([0, None, "", {"ready": True}])
    assert await eventually(lambda: next(values), within=5, interval=0) == {"ready": True}


async def test_awaits_an_async_check() -> None:
    calls = 0

    async def check() -> int:
        nonlocal calls
        calls += 1
        return calls if calls >= 3 else 0

    assert await eventually(check, within=5, interval=0) == 3


async def test_times_out_naming_what_and_the_last_value() -> None:
    with pytest.raises(AssertionError) as info:
        await eventually(lambda: [], within=0.05, what="a non-empty list", interval=0.01)
    assert str(info.value) == "timed out after 0.05s waiting for a non-empty list; last: []"


async def test_the_default_what() -> None:
    with pytest.raises(AssertionError, match="waiting for the condition; last: False"):
        await eventually(lambda: False, within=0.05)


async def test_an_exception_is_not_yet_and_the_last_one_is_reported() -> None:
    calls = 0

    def check() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise LookupError(f"not there yet ({calls})")
        return "there"

    assert await eventually(check, within=5, interval=0) == "there"

    async def always_failing() -> bool:
        raise LookupError("still missing")

    with pytest.raises(AssertionError, match=r"last: LookupError\('still missing'\)"):
        await eventually(always_failing, within=0.05, what="it", interval=0.01)
