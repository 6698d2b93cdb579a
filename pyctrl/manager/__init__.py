"""The manager (controller-runtime ``pkg/manager``): see :mod:`pyctrl.manager.manager`."""

from pyctrl.manager.manager import Manager, ManagerError, Runnable

__all__ = ["Manager", "ManagerError", "Runnable"]
