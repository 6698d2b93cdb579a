"""pyctrl.client.rest: which failures are retried, and how long the client waits."""

from __future__ import annotations

import pytest

from pyctrl.client import Config, Conflict, NotFound, ServiceUnavailable, TooManyRequests, TransportError
from pyctrl.client.errors import ApiError
from pyctrl.client.rest import Transport, _Refused


def transport(retries: int = 4) -> Transport:
    return Transport(Config(host="http://127.0.0.1:1", retries=retries))


def status(reason: str, code: int) -> dict[str, object]:
    return {"kind": "Status", "reason": reason, "code": code, "message": reason}


@pytest.mark.parametrize(
    "exc",
    [
        TransportError("reset"),
        ServiceUnavailable(status("ServiceUnavailable", 503)),
        TooManyRequests(status("TooManyRequests", 429)),
    ],
)
def test_reads_are_retried_on_transient_failures(exc: Exception) -> None:
    delay = transport()._retry_delay("GET", exc, 0)
    assert delay is not None
    assert 0 < delay <= 5


@pytest.mark.parametrize("exc", [NotFound(status("NotFound", 404)), Conflict(status("Conflict", 409))])
def test_definitive_answers_are_not_retried(exc: ApiError) -> None:
    assert transport()._retry_delay("GET", exc, 0) is None


def test_writes_are_retried_only_when_the_server_certainly_did_not_act() -> None:
    t = transport()
    assert t._retry_delay("POST", TransportError("reset mid-request"), 0) is None
    assert t._retry_delay("POST", ServiceUnavailable(status("ServiceUnavailable", 503)), 0) is None
    assert t._retry_delay("POST", _Refused("refused"), 0) is not None
    throttled = TooManyRequests(status("TooManyRequests", 429), retry_after=2)
    assert t._retry_delay("POST", throttled, 0) == 2


def test_backoff_grows_and_retries_stop_after_the_configured_count() -> None:
    t = transport(retries=3)
    first = [t._retry_delay("GET", TransportError("x"), 0) for _ in range(50)]
    third = [t._retry_delay("GET", TransportError("x"), 2) for _ in range(50)]
    assert max(d for d in first if d is not None) <= min(d for d in third if d is not None)
    assert t._retry_delay("GET", TransportError("x"), 3) is None
