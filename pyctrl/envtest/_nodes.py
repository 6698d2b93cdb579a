"""The local nodes of an envtest control plane: names, zones, command lines, and power loss.

controller-runtime's envtest runs no node; these play the machines of a small cluster, each a
``pyctrl.envtest.node`` process (kubelet) with its own loopback range, Lease and kubelet API.

Guarantees:
- ``node_names(1, base)`` is ``[base]`` (``local-node``, the name every single-node test knows);
  ``node_names(n, base)`` for n > 1 is ``base-1`` .. ``base-n``; fewer than one node is a
  ``ValueError`` (``local_node=False`` runs none);
- node *i* (from 0) is in zone ``ZONES[i % 3]`` (``zone-a``, ``zone-b``, ``zone-c``), region
  ``local``;
- ``power_off`` is a power loss: SIGKILL to the node process and, at once, to every process whose
  root lies in the node's Pod directories — its containers, whatever they forked, exec probes — so
  nothing of the node runs on and nothing gets to write a last status; it returns once they are
  all gone (or raises ``RuntimeError`` naming the survivors).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from pyctrl.envtest._process import ManagedProcess

__all__ = ["ZONES", "node_args", "node_names", "node_processes", "power_off"]

ZONES = ("zone-a", "zone-b", "zone-c")


def node_names(count: int, base: str) -> list[str]:
    if count < 1:
        raise ValueError(f"nodes must be at least 1, got {count} (local_node=False runs no node)")
    return [base] if count == 1 else [f"{base}-{i}" for i in range(1, count + 1)]


def node_args(kubeconfig: Path, state_dir: Path, name: str, index: int) -> list[str]:
    """The node process for node ``name`` (``index`` in the environment's list)."""
    return [
        sys.executable,
        "-m",
        "pyctrl.envtest.node",
        f"--kubeconfig={kubeconfig}",
        f"--state-dir={state_dir / 'nodes' / name}",
        f"--node-name={name}",
        f"--zone={ZONES[index % len(ZONES)]}",
        f"--volumes-dir={state_dir / 'volumes'}",
        f"--cluster-pki-dir={state_dir / 'pki'}",
    ]


def node_processes(node_dir: Path) -> list[int]:
    """Pids of the processes whose root is inside ``node_dir/pods`` (the node's containers)."""
    prefix = str(node_dir / "pods") + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            root = os.readlink(entry / "root")
        except OSError:  # gone, a zombie, or not ours to look at
            continue
        if root.startswith(prefix):
            found.append(int(entry.name))
    return found


def power_off(proc: ManagedProcess, node_dir: Path, timeout: float = 10.0) -> None:
    """SIGKILL the node and every process of its containers; return once all are gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while True:
        left = node_processes(node_dir)
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not left and not proc.alive():
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"node {proc.name}: processes {left or [proc.pid]} survived SIGKILL")
        time.sleep(0.02)  # SIGKILL is asynchronous: look again until the kernel has them gone
    proc.stop(grace=0)  # reaps it
