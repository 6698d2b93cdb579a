"""The address plan of one environment's real nodes, and the machine-wide claim of its slot.

Every environment with ``runtime="kubelet"`` claims a *slot* ``s`` (0 .. ``SLOTS - 1``) and uses
only ``10.<200 + s>.0.0/16``, split as kind splits its ranges:

- ``10.B.<i>.0/24``: node *i*'s Pods (its CNI bridge ``cni0`` is ``10.B.<i>.1``);
- ``10.B.0.0/17``: the cluster's Pod range (kube-proxy's ``clusterCIDR``);
- ``10.B.128.0/24``: the link network, a bridge ``pyctrlbr<s>`` in the host's network namespace;
  the host (where kube-apiserver listens) is ``10.B.128.1``, node *i* (from 1)
  ``10.B.128.<1 + i>`` on a veth whose other end is ``eth0`` in the node's own network namespace.
  It lies outside the Pod range, so kube-proxy masquerades what the host sends to a ClusterIP
  (the reply comes back through the same node, which undoes its DNAT);
- ``10.B.192.0/20``: the Service range (``kubernetes`` at ``.192.1``, cluster DNS at ``.192.10``).

The host routes each node's Pod range to that node, the Service range to a running node, and the
rest of the /16 nowhere (an ``unreachable`` route), so nothing of these ranges ever reaches the
machine's outside interface. The slot is held by an exclusive ``flock`` on
``<tmp>/pyctrl-real-nodes/slot-<s>.lock``, whose open file the environment hands to its
long-lived processes: it is free again once they are all gone, even after a SIGKILL.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["MAX_NODES", "SLOTS", "NetworkPlan", "SlotsExhausted", "claim_slot"]

SLOTS = 50
MAX_NODES = 120


class SlotsExhausted(RuntimeError):
    """Every slot is held by another environment on this machine."""


@dataclass(frozen=True)
class NetworkPlan:
    """The addresses of slot ``slot``; nodes are numbered from 1."""

    slot: int

    def __post_init__(self) -> None:
        if not 0 <= self.slot < SLOTS:
            raise ValueError(f"slot must be within 0..{SLOTS - 1}, got {self.slot}")

    @property
    def _b(self) -> str:
        return f"10.{200 + self.slot}"

    @property
    def supernet(self) -> str:
        return f"{self._b}.0.0/16"

    @property
    def bridge(self) -> str:
        return f"pyctrlbr{self.slot}"

    @property
    def link_cidr(self) -> str:
        return f"{self._b}.128.0/24"

    @property
    def host_ip(self) -> str:
        """Where kube-apiserver listens; the nodes' gateway to the host."""
        return f"{self._b}.128.1"

    @property
    def cluster_cidr(self) -> str:
        return f"{self._b}.0.0/17"

    @property
    def service_cidr(self) -> str:
        return f"{self._b}.192.0/20"

    @property
    def kubernetes_service_ip(self) -> str:
        return f"{self._b}.192.1"

    @property
    def dns_service_ip(self) -> str:
        return f"{self._b}.192.10"

    def _check(self, index: int) -> None:
        if not 1 <= index <= MAX_NODES:
            raise ValueError(f"node index must be within 1..{MAX_NODES}, got {index}")

    def node_ip(self, index: int) -> str:
        self._check(index)
        return f"{self._b}.128.{1 + index}"

    def pod_cidr(self, index: int) -> str:
        self._check(index)
        return f"{self._b}.{index}.0/24"

    def veth(self, index: int) -> str:
        """The host end of node ``index``'s veth (at most 15 characters)."""
        self._check(index)
        return f"pyctrl{self.slot}n{index}"

    def contains(self, address: str) -> bool:
        return ipaddress.ip_address(address) in ipaddress.ip_network(self.supernet)


def _lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / "pyctrl-real-nodes"


def claim_slot(lock_dir: Path | None = None, *, only: int | None = None) -> tuple[NetworkPlan, IO[str]]:
    """Lock the lowest free slot (or slot ``only``) for this process; keep (or hand on) the open
    file to hold it."""
    directory = lock_dir or _lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    for slot in range(SLOTS) if only is None else (only,):
        handle = (directory / f"slot-{slot}.lock").open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return NetworkPlan(slot), handle
    if only is not None:
        raise SlotsExhausted(f"real-node slot {only} is held by another environment")
    raise SlotsExhausted(f"all {SLOTS} real-node slots (10.200-249.0.0/16) are held by other environments")


def slot_lock_path(slot: int, lock_dir: Path | None = None) -> Path:
    return (lock_dir or _lock_dir()) / f"slot-{slot}.lock"
