"""envtest's exceptions."""

from __future__ import annotations

__all__ = ["AlreadyRunning", "EnvtestError"]


class EnvtestError(RuntimeError):
    """A control-plane component failed to start or stop, or a test convenience got bad input."""


class AlreadyRunning(EnvtestError):
    """``start`` was called on a state directory whose control plane is running."""
