"""pyctrl.client.watch: parsing watch stream lines."""

from __future__ import annotations

import orjson
import pytest

from pyctrl.client import Expired, Gone, TransportError
from pyctrl.client.watch import parse_event


def test_a_watch_line_becomes_a_raw_event() -> None:
    line = orjson.dumps({"type": "MODIFIED", "object": {"metadata": {"name": "a", "resourceVersion": "9"}}})
    event = parse_event(line)
    assert event.type == "MODIFIED"
    assert event.object["metadata"]["resourceVersion"] == "9"


def test_bookmarks_pass_through_with_their_annotations() -> None:
    obj = {
        "kind": "ConfigMap",
        "metadata": {"resourceVersion": "12", "annotations": {"k8s.io/initial-events-end": "true"}},
    }
    event = parse_event(orjson.dumps({"type": "BOOKMARK", "object": obj}))
    assert event.type == "BOOKMARK"
    assert event.object["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"


def test_an_error_event_raises_the_error_of_its_status() -> None:
    status = {
        "kind": "Status",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
        "message": "too old resource version: 1 (200)",
    }
    with pytest.raises(Expired, match="too old") as info:
        parse_event(orjson.dumps({"type": "ERROR", "object": status}))
    assert isinstance(info.value, Gone)


@pytest.mark.parametrize("line", [b"not json", b'{"type": "ADDED"}', b'{"type": "EXPLODED", "object": {}}'])
def test_a_malformed_line_raises_transport_error(line: bytes) -> None:
    with pytest.raises(TransportError):
        parse_event(line)
