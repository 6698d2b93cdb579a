"""envtest: a real local Kubernetes control plane for tests.

Mirrors controller-runtime ``pkg/envtest``: ``Environment`` starts etcd, kube-apiserver and
kube-controller-manager built from the official Kubernetes Go modules (``tools/controlplane``),
plus a local node that runs Pods as local processes (``pyctrl.envtest.node``). Pytest fixtures live
in ``pyctrl.envtest.pytest_plugin``; the command line is ``python -m pyctrl.envtest``.
``Environment.install_webhooks`` points admission webhook configurations at a local webhook
server (controller-runtime's ``WebhookInstallOptions``).
"""

from pyctrl.envtest._binaries import BINARIES, BinariesError, bin_dir
from pyctrl.envtest._http import poll_until
from pyctrl.envtest._webhooks import WebhookInstallOptions
from pyctrl.envtest.environment import AlreadyRunning, Environment, EnvtestError, NodeError

__all__ = [
    "BINARIES",
    "AlreadyRunning",
    "BinariesError",
    "Environment",
    "EnvtestError",
    "NodeError",
    "WebhookInstallOptions",
    "bin_dir",
    "poll_until",
]
