"""pyctrl.log: key/value loggers, the text and JSON formatters, from_context."""

from __future__ import annotations

import json
import logging

import pytest

from pyctrl.log import JsonFormatter, TextFormatter, bind_to_context, from_context, get_logger, setup_logging


def record_of(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    assert caplog.records, "nothing was logged"
    return caplog.records[-1]


def test_bound_values_and_call_values_travel_in_the_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="t.kv")
    log = get_logger("t.kv", controller="redis").with_values(namespace="ns")
    log.info("Reconcile done", name="a", duration_s=0.5)
    rec = record_of(caplog)
    assert rec.kv == {"controller": "redis", "namespace": "ns", "name": "a", "duration_s": 0.5}  # type: ignore[attr-defined]
    assert rec.funcName == "test_bound_values_and_call_values_travel_in_the_record"  # caller, not log.py


def test_text_formatter_renders_key_values_and_quotes_spaces(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="t.text")
    get_logger("t.text", controller="c").info("Hello", trigger="update Pod ns/a", empty="")
    line = TextFormatter().format(record_of(caplog))
    assert line.endswith('INFO t.text Hello controller=c trigger="update Pod ns/a" empty=""')


def test_json_formatter_writes_one_object_per_line_with_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="t.json")
    try:
        raise ValueError("bad value")
    except ValueError as exc:
        get_logger("t.json", controller="c").error("Reconciler error", exc_info=exc, name="a")
    line = JsonFormatter().format(record_of(caplog))
    assert "\n" not in line
    doc = json.loads(line)
    assert (doc["level"], doc["logger"], doc["msg"]) == ("error", "t.json", "Reconciler error")
    assert (doc["controller"], doc["name"]) == ("c", "a")
    assert "ValueError: bad value" in doc["stacktrace"]


def test_text_formatter_appends_the_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="t.tb")
    try:
        raise KeyError("k")
    except KeyError as exc:
        get_logger("t.tb").error("failed", exc_info=exc)
    text = TextFormatter().format(record_of(caplog))
    assert text.splitlines()[0].endswith("ERROR t.tb failed")
    assert "KeyError: 'k'" in text


def test_from_context_returns_the_bound_logger_inside_and_a_default_outside() -> None:
    bound = get_logger("t.ctx", reconcile_id="abc")
    assert from_context() is not bound
    with bind_to_context(bound):
        assert from_context() is bound
    assert from_context() is not bound


def test_setup_logging_installs_the_chosen_formatter_and_rejects_unknown_formats() -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        setup_logging("json", level="DEBUG")
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        assert root.level == logging.DEBUG
        setup_logging("text")
        assert isinstance(root.handlers[0].formatter, TextFormatter)
        with pytest.raises(ValueError, match="log format"):
            setup_logging("xml")
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
