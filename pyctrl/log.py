"""Structured logging (controller-runtime ``pkg/log`` on logr, here on the stdlib ``logging``).

``get_logger(name, **values)`` returns a ``Logger`` whose calls take key/value pairs::

    log = get_logger("pyctrl.controller", controller="redis")
    log.info("Reconcile done", namespace="ns", name="a", duration_s=0.01)

The pairs travel in the record (``record.kv``); ``TextFormatter`` renders ``msg k=v ...`` and
``JsonFormatter`` one JSON object per line. ``setup_logging(format="text"|"json", level=...)``
installs one of them on the root logger. Secrets must never be passed as values.

``from_context()`` is controller-runtime's ``log.FromContext``: inside a reconcile it returns the
controller's logger bound to controller, namespace, name, reconcile_id and trigger, so the
reconciler's own lines carry them too; elsewhere it returns the ``pyctrl`` logger.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from typing import Any

__all__ = [
    "JsonFormatter",
    "Logger",
    "TextFormatter",
    "bind_to_context",
    "from_context",
    "get_logger",
    "setup_logging",
]


class Logger:
    """A logger carrying bound key/values; ``with_values`` returns a child with more."""

    __slots__ = ("_logger", "_values")

    def __init__(self, logger: logging.Logger, values: dict[str, Any]) -> None:
        self._logger = logger
        self._values = values

    def with_values(self, **values: Any) -> Logger:
        return Logger(self._logger, {**self._values, **values})

    def _log(self, level: int, msg: str, exc_info: Any, kv: dict[str, Any]) -> None:
        if self._logger.isEnabledFor(level):
            self._logger.log(
                level, msg, exc_info=exc_info, extra={"kv": {**self._values, **kv}}, stacklevel=3
            )

    def debug(self, msg: str, **kv: Any) -> None:
        self._log(logging.DEBUG, msg, None, kv)

    def info(self, msg: str, **kv: Any) -> None:
        self._log(logging.INFO, msg, None, kv)

    def warning(self, msg: str, **kv: Any) -> None:
        self._log(logging.WARNING, msg, None, kv)

    def error(self, msg: str, *, exc_info: Any = None, **kv: Any) -> None:
        self._log(logging.ERROR, msg, exc_info, kv)

    def is_enabled_for(self, level: int) -> bool:
        return self._logger.isEnabledFor(level)


def get_logger(name: str, **values: Any) -> Logger:
    return Logger(logging.getLogger(name), values)


_current: ContextVar[Logger | None] = ContextVar("pyctrl_logger", default=None)


def from_context() -> Logger:
    """The logger of the running reconcile (with its key/values), else the ``pyctrl`` logger."""
    return _current.get() or get_logger("pyctrl")


class bind_to_context:  # a function to its callers: ``with bind_to_context(log):``
    """Make ``logger`` what ``from_context()`` returns within the block (and tasks it creates).

    A class rather than a ``contextlib.contextmanager`` generator: it runs once per reconcile.
    """

    __slots__ = ("_logger", "_token")

    def __init__(self, logger: Logger) -> None:
        self._logger = logger

    def __enter__(self) -> Logger:
        self._token = _current.set(self._logger)
        return self._logger

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def _kv(record: logging.LogRecord) -> dict[str, Any]:
    kv = getattr(record, "kv", None)
    return kv if isinstance(kv, dict) else {}


class TextFormatter(logging.Formatter):
    """``2026-01-01T00:00:00 INFO logger msg k=v k2="v 2"``."""

    def format(self, record: logging.LogRecord) -> str:
        pairs = " ".join(f"{k}={_text(v)}" for k, v in _kv(record).items())
        line = f"{self.formatTime(record)} {record.levelname} {record.name} {record.getMessage()}"
        if pairs:
            line += " " + pairs
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text(value: Any) -> str:
    s = str(value)
    return json.dumps(s) if (not s or any(c.isspace() or c == '"' for c in s)) else s


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the key/values, and ``error`` traces."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": self.formatTime(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(_kv(record))
        if record.exc_info:
            doc["stacktrace"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def setup_logging(format: str = "text", level: int | str = logging.INFO) -> None:
    """Install a text or JSON handler on the root logger (replacing existing handlers)."""
    if format not in ("text", "json"):
        raise ValueError(f"log format must be 'text' or 'json', got {format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
