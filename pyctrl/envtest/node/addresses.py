"""Pod IP addresses on loopback (the local node's IPAM; mirrors the CNI ``host-local`` plugin).

Linux routes all of 127.0.0.0/8 to ``lo``, so a process can bind any 127.x.y.z address without
configuration; each Pod gets its own address there and its containers bind it (for example through
``status.podIP`` from the downward API).

Guarantees:
- the node's own address (its InternalIP, the Pods' hostIP, where its kubelet API listens) is
  ``127.<block>.0.1`` (``node_ip``): 127.0.0.1 for the first node on the machine;
- every address handed out lies in 127.0.0.0/8, in the node's range ``127.<block>.1.1`` upwards;
  addresses ending in .0 or .255 are never used, and the node's own address never;
- an address is held by one Pod (uid) at a time until ``release``; the same uid asks twice, it gets
  the same address;
- like host-local, allocation continues after the last address handed out (wrapping around), so a
  released address is not handed out again at once: a recreated Pod normally gets a new IP;
- ``claim_block`` gives each node process on the machine its own /16 (``127.0.x.y`` for the first,
  ``127.1.x.y`` for the next, ..., up to ``127.254.x.y``) through a lock file held while the process
  lives, so two environments running at once (parallel test sessions) never hand out the same
  address; ``127.255.0.0/16`` is left to the Services' ClusterIPs.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import tempfile
from pathlib import Path
from typing import IO

__all__ = ["SERVICE_BLOCK", "AddressPool", "AddressesExhausted", "claim_block"]

#: 127.255.0.0/16 holds the Services' ClusterIPs (envtest's ``SERVICE_CIDR``): no node claims it.
SERVICE_BLOCK = 255


class AddressesExhausted(RuntimeError):
    """Every address of the node's range is taken."""


class AddressPool:
    """Allocates the addresses ``127.<block>.1.1`` .. ``127.<block>.255.254`` to Pod uids."""

    def __init__(self, block: int = 0) -> None:
        if not 0 <= block <= 255:
            raise ValueError(f"block must be within 0..255, got {block}")
        self.block = block
        base = int(ipaddress.IPv4Address(f"127.{block}.0.0"))
        self._candidates = [
            base + (third << 8) + fourth for third in range(1, 256) for fourth in range(1, 255)
        ]
        self._by_uid: dict[str, int] = {}
        self._used: set[int] = set()
        self._next = 0

    @property
    def node_ip(self) -> str:
        """The node's own address: ``127.<block>.0.1``."""
        return f"127.{self.block}.0.1"

    def __contains__(self, address: str) -> bool:
        return self._index(address) is not None

    def allocate(self, uid: str) -> str:
        """The address of ``uid``: its current one, or the next free one after the last given."""
        if uid in self._by_uid:
            return str(ipaddress.IPv4Address(self._by_uid[uid]))
        total = len(self._candidates)
        for step in range(total):
            i = (self._next + step) % total
            value = self._candidates[i]
            if value not in self._used:
                self._next = (i + 1) % total
                self._take(uid, value)
                return str(ipaddress.IPv4Address(value))
        raise AddressesExhausted(f"no free address left in 127.{self.block}.0.0/16")

    def reserve(self, uid: str, address: str) -> bool:
        """Give ``address`` to ``uid`` (a Pod adopted after a node restart); False if not possible."""
        if self._index(address) is None:
            return False
        value = int(ipaddress.IPv4Address(address))
        if self._by_uid.get(uid) == value:
            return True
        if value in self._used or uid in self._by_uid:
            return False
        self._take(uid, value)
        self._next = max(self._next, self._candidates.index(value) + 1) % len(self._candidates)
        return True

    def release(self, uid: str) -> None:
        value = self._by_uid.pop(uid, None)
        if value is not None:
            self._used.discard(value)

    def in_use(self) -> dict[str, str]:
        return {uid: str(ipaddress.IPv4Address(v)) for uid, v in self._by_uid.items()}

    def _take(self, uid: str, value: int) -> None:
        self._by_uid[uid] = value
        self._used.add(value)

    def _index(self, address: str) -> int | None:
        try:
            ip = ipaddress.IPv4Address(address)
        except ValueError:
            return None
        octets = ip.packed
        if octets[0] != 127 or octets[1] != self.block or octets[2] == 0 or octets[3] in (0, 255):
            return None
        return (octets[2] - 1) * 254 + octets[3] - 1


def claim_block(lock_dir: Path | None = None) -> tuple[int, IO[str]]:
    """Lock the lowest free /16 of 127.0.0.0/8 for this process; keep the file open to hold it."""
    directory = lock_dir or Path(tempfile.gettempdir()) / "pyctrl-local-node-addresses"
    directory.mkdir(parents=True, exist_ok=True)
    for block in range(SERVICE_BLOCK):
        handle = (directory / f"127.{block}.lock").open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return block, handle
    raise AddressesExhausted(f"every 127.x.0.0/16 block (x < {SERVICE_BLOCK}) is held by another local node")
