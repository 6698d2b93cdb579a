"""envtest's exceptions.

Hierarchy (envtest's own; requests to the apiserver reuse the client's tree)::

    RuntimeError
    ├── EnvtestError                 a component failed to start or stop, or bad input
    │   └── AlreadyRunning           ``start`` on a state directory whose control plane runs
    ├── BinariesError                (``_binaries``) the control-plane binaries cannot be built
    └── ObjectStoreError             (``objectstore``) versitygw cannot be built or started
    pyctrl.client.errors.ApiError    an apiserver failure answered to envtest's admin HTTP helper
                                     or to the local node (``NotFound``, ``Conflict``, ``Invalid``…)
    Exception (the local node's, kubelet-named, reported in Pod status rather than raised out)
    ├── node.envvars.ContainerConfigError   a referenced ConfigMap/Secret/key/field is missing
    ├── node.images.ImageNotMapped          no ``--image-map`` rule covers the image
    └── node.images.StartError              the executable to run does not exist
"""

from __future__ import annotations

__all__ = ["AlreadyRunning", "EnvtestError", "NodeError"]


class EnvtestError(RuntimeError):
    """A control-plane component failed to start or stop, or a test convenience got bad input."""


class AlreadyRunning(EnvtestError):
    """``start`` was called on a state directory whose control plane is running."""


class NodeError(EnvtestError):
    """A node name the environment does not have, stopping a stopped node or starting a running one."""
