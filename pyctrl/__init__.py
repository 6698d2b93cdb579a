"""pyctrl: an asyncio re-implementation of Kubernetes controller-runtime.

Mirrors ``sigs.k8s.io/controller-runtime`` (and the client-go pieces it stands on) with the same
names in snake_case. This module is the documented facade (controller-runtime's ``alias.go``):
the names most operators need. Sub-packages, one concept each:

- ``pyctrl.workqueue``      -- client-go ``util/workqueue`` (dedup, delaying, rate limiting, priority)
- ``pyctrl.client``         -- ``pkg/client``: typed objects, the apiserver client, split and fake clients
- ``pyctrl.cache``          -- ``pkg/cache`` + client-go ``tools/cache``: reflector, store, informers
- ``pyctrl.reconcile``      -- ``pkg/reconcile``: Request, Result, TerminalError
- ``pyctrl.event``, ``pyctrl.predicate``, ``pyctrl.handler``, ``pyctrl.source`` -- the event plumbing
- ``pyctrl.controller``     -- ``pkg/internal/controller``: workers and result handling
- ``pyctrl.builder``        -- ``pkg/builder``: ControllerBuilder, WebhookBuilder
- ``pyctrl.webhook``        -- ``pkg/webhook``: the HTTPS webhook server, admission and conversion handlers
- ``pyctrl.conversion``     -- ``pkg/conversion``: Hub and Convertible versions of a kind
- ``pyctrl.manager``        -- ``pkg/manager``: runnables, servers, leader election
- ``pyctrl.leaderelection`` -- client-go ``tools/leaderelection`` (Lease lock)
- ``pyctrl.sharding``       -- no controller-runtime counterpart: a controller's objects over replicas
- ``pyctrl.recorder``       -- client-go ``tools/record``: Events with correlation
- ``pyctrl.controllerutil`` -- ``pkg/controller/controllerutil``
- ``pyctrl.healthz``, ``pyctrl.metrics``, ``pyctrl.log`` -- probes, the metrics registry, logging
- ``pyctrl.crdgen``, ``pyctrl.rbacgen`` -- controller-tools' CRD and RBAC generation
- ``pyctrl.envtest``        -- ``pkg/envtest``: a real local control plane (and node) for tests
- ``pyctrl.testing``        -- ``assert_idempotent``: zero writes once a reconciler has converged

Errors, one tree per package boundary (each package raises its own or the client's)::

    pyctrl.client.errors.KubernetesError   every client and cache failure: its tree is in
                                           ``pyctrl.client.errors`` (ApiError → NotFound, Conflict…)
    pyctrl.envtest                         its tree is in ``pyctrl.envtest._errors``; apiserver
                                           answers there are the client's ApiError classes
    ControllerError                        a controller misconfigured or unable to start
    └── BuilderError                       the builder used wrongly (reported by ``complete``)
    ManagerError (RuntimeError)            the manager misused, or a runnable failed
    LeaderElectionLost (RuntimeError)      the Lease could not be renewed in time
    TerminalError                          a reconcile failure not to be retried
    AlreadyOwnedError                      controllerutil: a different controller owns the object
    ConversionError (ValueError)           versions of a kind that cannot be converted
    WebhookError (RuntimeError)            the webhook server cannot serve
    ShutDown                               the workqueue was shut down

The names here (and the sub-packages as attributes, ``pyctrl.client``) are imported when first
read (:mod:`pyctrl._lazy`): ``import pyctrl.client.errors`` does not load the manager.
"""

import typing as _typing

from pyctrl import _lazy

if _typing.TYPE_CHECKING:
    from pyctrl.builder import BuilderError, ControllerBuilder, WebhookBuilder
    from pyctrl.client import ApiClient, Config, load_config
    from pyctrl.controller import Controller, ControllerError
    from pyctrl.log import get_logger, setup_logging
    from pyctrl.manager import Manager, ManagerError, Runnable
    from pyctrl.reconcile import Reconciler, Request, Result, TerminalError
else:
    __getattr__, __dir__ = _lazy.attributes(
        __name__,
        {
            "pyctrl.builder": ("BuilderError", "ControllerBuilder", "WebhookBuilder"),
            "pyctrl.client": ("ApiClient", "Config", "load_config"),
            "pyctrl.controller": ("Controller", "ControllerError"),
            "pyctrl.log": ("get_logger", "setup_logging"),
            "pyctrl.manager": ("Manager", "ManagerError", "Runnable"),
            "pyctrl.reconcile": ("Reconciler", "Request", "Result", "TerminalError"),
        },
        # the sub-packages the eager facade's imports bound on it
        submodules=(
            "builder",
            "cache",
            "client",
            "controller",
            "conversion",
            "event",
            "handler",
            "healthz",
            "leaderelection",
            "log",
            "manager",
            "metrics",
            "predicate",
            "reconcile",
            "recorder",
            "source",
            "trace",
            "webhook",
            "workqueue",
        ),
    )

__version__ = "0.1.0"

__all__ = [
    "ApiClient",
    "BuilderError",
    "Config",
    "Controller",
    "ControllerBuilder",
    "ControllerError",
    "Manager",
    "ManagerError",
    "Reconciler",
    "Request",
    "Result",
    "Runnable",
    "TerminalError",
    "WebhookBuilder",
    "get_logger",
    "load_config",
    "setup_logging",
]
