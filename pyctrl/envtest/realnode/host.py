"""The host's side of an environment's real nodes: its bridge and routes, the nodes' veths, and
the cgroups their kubelets make (cgroup v1, the ``cgroupfs`` driver).

Guarantees:
- ``setup_network`` leaves exactly: the bridge ``plan.bridge`` holding ``plan.host_ip``/24 and an
  ``unreachable`` route for the slot's /16 (so an address of the slot that no node has never goes
  out through the default route); a leftover of the slot from a killed run is removed first;
- ``attach_node`` gives a node's network namespace its ``eth0`` (a veth on the bridge) and routes
  its Pod range to it; ``route_services`` points the Service range at one running node (or
  nowhere); the host itself never forwards (``ip_forward`` is left as it is: the nodes reach one
  another on the bridge, and the host only talks to them);
- ``teardown_network`` removes the bridge, every veth of the slot and the routes; idempotent;
- ``remove_cgroups`` removes a node's cgroup tree bottom-up once its processes are gone.
Every failed ``ip`` command raises ``HostNetworkError`` with the command and its message.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

from pyctrl.envtest.realnode.plan import NetworkPlan

__all__ = [
    "CGROUP_ROOT",
    "HostNetworkError",
    "attach_node",
    "cgroup_name",
    "make_cgroup",
    "remove_cgroups",
    "route_services",
    "setup_network",
    "teardown_network",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")


class HostNetworkError(RuntimeError):
    """An ``ip`` command on the host failed."""


def _ip(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise HostNetworkError(f"ip {' '.join(args)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc.stdout


def _links(prefix: str) -> list[str]:
    names = []
    for line in _ip("-o", "link", "show").splitlines():
        name = line.split(":", 2)[1].strip().split("@", 1)[0]
        if name.startswith(prefix):
            names.append(name)
    return names


def setup_network(plan: NetworkPlan) -> None:
    teardown_network(plan)
    _ip("link", "add", plan.bridge, "type", "bridge")
    _ip("addr", "add", f"{plan.host_ip}/24", "dev", plan.bridge)
    _ip("link", "set", plan.bridge, "up")
    _ip("route", "add", "unreachable", plan.supernet)


def teardown_network(plan: NetworkPlan) -> None:
    for veth in _links(f"pyctrl{plan.slot}n"):
        _ip("link", "del", veth, check=False)
    _ip("link", "del", plan.bridge, check=False)  # takes the routes through it along
    _ip("route", "del", "unreachable", plan.supernet, check=False)


def attach_node(plan: NetworkPlan, index: int, pid: int) -> None:
    """``eth0`` in the network namespace of process ``pid`` (node ``index``), on the bridge."""
    veth = plan.veth(index)
    _ip("link", "del", veth, check=False)  # a dead node's, if its namespace lingered
    _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(pid))
    _ip("link", "set", veth, "master", plan.bridge, "up")
    _ip("route", "replace", plan.pod_cidr(index), "via", plan.node_ip(index), "dev", plan.bridge)


def route_services(plan: NetworkPlan, index: int | None) -> None:
    """The Service range through node ``index`` (kube-proxy there), or unrouted when None."""
    if index is None:
        _ip("route", "del", plan.service_cidr, check=False)
    else:
        _ip("route", "replace", plan.service_cidr, "via", plan.node_ip(index), "dev", plan.bridge)


def _hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies (``cpu``, ``memory``, ... and the ``name=systemd`` one)."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup":
                found.append(Path(fields[1]))
    return found


def cgroup_name(plan: NetworkPlan, index: int) -> str:
    """The kubelet's ``cgroupRoot`` for node ``index`` (one per node: they share the machine)."""
    return f"/pyctrl-s{plan.slot}-n{index}"


def make_cgroup(name: str) -> None:
    """Create ``name`` in every v1 hierarchy (the kubelet requires its cgroupRoot to exist)."""
    for hierarchy in _hierarchies():
        path = hierarchy / name.lstrip("/")
        path.mkdir(exist_ok=True)
        if (hierarchy / "cpuset.cpus").exists():  # a new cpuset starts empty: inherit the parent's
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if not (path / knob).read_text().strip():
                    (path / knob).write_text((hierarchy / knob).read_text())


def remove_cgroups(name: str, timeout: float = 10.0) -> list[str]:
    """Remove ``name``'s tree bottom-up in every hierarchy; return what is left after ``timeout``
    (a cgroup is busy until the kernel has released its last task)."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for hierarchy in _hierarchies():
            top = hierarchy / name.lstrip("/")
            if not top.is_dir():
                continue
            for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
                try:
                    os.rmdir(dirpath)
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(dirpath)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)  # tasks of killed processes are released asynchronously
