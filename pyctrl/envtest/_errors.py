"""envtest's exceptions."""

from __future__ import annotations

__all__ = ["AlreadyRunning", "EnvtestError", "NodeError"]


class EnvtestError(RuntimeError):
    """A control-plane component failed to start or stop, or a test convenience got bad input."""


class AlreadyRunning(EnvtestError):
    """``start`` was called on a state directory whose control plane is running."""


class NodeError(EnvtestError):
    """A node name the environment does not have, stopping a stopped node or starting a running one."""
