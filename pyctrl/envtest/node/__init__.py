"""The local node: kubelet (and volume provisioner) for one Node, with Pods' containers run as local
processes — so a StatefulSet of Redis really serves traffic in envtest. envtest runs one such
process per node (``Environment(nodes=N)``).

Started by ``pyctrl.envtest.Environment`` (and ``python -m pyctrl.envtest start``) unless
``local_node=False``; standalone: ``python -m pyctrl.envtest.node --kubeconfig K --state-dir D``.
It talks to the apiserver through kubernetes-asyncio, never through ``pyctrl.client``.

Modules (each mirrors a kubelet piece and states its guarantees):
``agent`` (start/stop order, Pod dispatch), ``nodestatus`` (Node, Lease), ``provisioner``
(PersistentVolumes for claims), ``pod`` (one Pod's life, status writes), ``container`` (restarts,
back-off, probes, hooks), ``runtime`` + ``sandbox`` (processes, mount namespaces), ``volumes``,
``envvars`` (env and ``$(VAR)``), ``images`` (image -> executable), ``probes``, ``status`` (phase
and conditions), ``addresses`` (loopback Pod IPs), ``kube`` (apiserver access, list+watch),
``server`` (the kubelet API), ``logs`` (log instances). What is and is not supported: ``docs/local-node.md``.
"""

from pyctrl.envtest.node.agent import NodeAgent, NodeConfig
from pyctrl.envtest.node.pod import LOG_DIR_ANNOTATION

__all__ = ["LOG_DIR_ANNOTATION", "NodeAgent", "NodeConfig"]
