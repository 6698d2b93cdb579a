"""Controllers (controller-runtime ``pkg/controller``): see :mod:`pyctrl.controller.controller`."""

from pyctrl.controller.controller import Controller, ControllerError

__all__ = ["Controller", "ControllerError"]
