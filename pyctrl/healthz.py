"""Health and readiness checks (controller-runtime ``pkg/healthz``).

A checker is a function (sync or async) that returns normally when healthy and raises an
exception saying why not. ``ping`` always passes. The probe server aggregates named checkers:
``/healthz`` and ``/readyz`` answer ``200 ok`` when every check passes and ``500`` listing the
failed ones otherwise; ``/readyz/<name>`` runs one check; ``?verbose`` lists each check.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias

__all__ = ["Checker", "ping", "run_checks"]

Checker: TypeAlias = Callable[[], None] | Callable[[], Awaitable[None]]


def ping() -> None:
    """Always healthy."""


async def run_checks(checks: dict[str, Checker], only: str | None = None) -> tuple[bool, list[str]]:
    """Run ``checks`` (or the one named ``only``); return (all passed, report lines)."""
    lines: list[str] = []
    ok = True
    for name, check in sorted(checks.items()):
        if only is not None and name != only:
            continue
        try:
            result = check()
            if inspect.isawaitable(result):
                await result
            lines.append(f"[+]{name} ok")
        except Exception as exc:
            ok = False
            lines.append(f"[-]{name} failed: {exc}")
    return ok, lines
