"""The manager (controller-runtime ``pkg/manager``): see :mod:`pyctrl.manager.manager`."""

from pyctrl.manager.manager import Manager, ManagerError, ManagerProtocol, Runnable, WebhookHost

__all__ = ["Manager", "ManagerError", "ManagerProtocol", "Runnable", "WebhookHost"]
