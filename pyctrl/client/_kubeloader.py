"""kubernetes-asyncio's kubeconfig and in-cluster loaders, without importing its generated client.

Serves :mod:`pyctrl.client.config` (client-go ``tools/clientcmd`` and ``rest.InClusterConfig``
are kubernetes-asyncio's ``config.kube_config`` and ``config.incluster_config``; pyctrl uses
them as they are and re-implements none of their kubeconfig handling).

Why: ``kubernetes_asyncio/__init__.py`` and ``kubernetes_asyncio/client/__init__.py`` import every
generated API and model (about 930 modules: 34 MiB of RSS and 0.2-0.45 CPU s on the benchmark
machine), although the loaders need only ``client.configuration``, ``client.exceptions``,
``client.rest`` and ``client.api_client`` (whose ``import kubernetes_asyncio.client.models`` binds
the package without using it until it deserializes). :func:`loaders` therefore creates those three
packages from their own specs (``importlib.util.find_spec`` / ``module_from_spec``, as the
importlib documentation's ``import_module`` recipe does) and *defers* running their
``__init__``: each gets a module ``__getattr__`` (PEP 562) that runs the real ``__init__`` into
the same module object the first time a name it has not bound yet is asked for, so
``kubernetes_asyncio.client.CoreV1Api`` or ``from kubernetes_asyncio.client import V1Pod`` later
in the process work as if the package had been imported normally (same module objects, same
classes). Submodules are imported normally, which binds them on their package; ``ApiClient`` and
``Configuration`` are bound on ``kubernetes_asyncio.client`` ahead of its ``__init__`` (which binds
the same two names from the same modules) because ``config.kube_config`` imports them from there.

A package already in :data:`sys.modules` (imported in full by the program, or by another loader)
is used as it is.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

__all__ = ["Loaders", "loaders"]

#: The packages whose ``__init__`` imports the generated client, outermost first.
_DEFERRED = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")

_lock = threading.Lock()


@dataclass(frozen=True)
class Loaders:
    """The kubernetes-asyncio pieces :mod:`pyctrl.client.config` calls."""

    Configuration: Any
    ConfigException: type[Exception]
    kube_config: ModuleType
    incluster_config: ModuleType


def _defer_init(name: str) -> None:
    """Put package ``name`` in :data:`sys.modules` with its ``__init__`` run on first need."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)  # the parent is in sys.modules: no __init__ runs here
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an importable package", name=name)
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)
    init_lock = threading.RLock()

    def __getattr__(attr: str) -> object:
        with init_lock:
            if module.__dict__.get("__getattr__") is __getattr__:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


@functools.cache
def loaders() -> Loaders:
    """Import the loaders (once per process) and return them."""
    with _lock:
        for name in _DEFERRED:
            _defer_init(name)
        client = sys.modules["kubernetes_asyncio.client"]
        configuration = importlib.import_module("kubernetes_asyncio.client.configuration")
        importlib.import_module("kubernetes_asyncio.client.rest")  # api_client imports it by name
        api_client = importlib.import_module("kubernetes_asyncio.client.api_client")
        if "Configuration" not in client.__dict__:  # the two names client/__init__.py binds
            vars(client).update(Configuration=configuration.Configuration, ApiClient=api_client.ApiClient)
        return Loaders(
            Configuration=configuration.Configuration,
            ConfigException=importlib.import_module(
                "kubernetes_asyncio.config.config_exception"
            ).ConfigException,
            kube_config=importlib.import_module("kubernetes_asyncio.config.kube_config"),
            incluster_config=importlib.import_module("kubernetes_asyncio.config.incluster_config"),
        )
