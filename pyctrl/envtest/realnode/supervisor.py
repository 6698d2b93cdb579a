"""What runs as PID 1 of a real node: the machine's "init", inside the node's own PID, network and
mount namespaces (``unshare --pid --fork --mount-proc --net --mount --propagation private``).

In order it: makes its mount namespace a private copy of the host's with its own tmpfs ``/run``
(containerd's state and sockets, the CNI's address store) and with files bind-mounted over the
host-wide sysctls the kubelet would set (``vm.overcommit_memory``, ``kernel.panic``...) and over
``/proc/sys/kernel/random/boot_id`` (a boot ID of its own, so a restarted node is seen as
rebooted); binds the node's own directories over the fixed paths the kubelet writes
(``/var/log/containers``, ``/var/lib/cni``); waits for ``eth0`` (the host puts a veth there) and
gives it the node's address and routes; starts containerd, imports the node's images into its
``k8s.io`` namespace, then starts the kubelet and kube-proxy; reaps every orphan (containerd's
shims are re-parented here).

Guarantees: if containerd, the kubelet or kube-proxy exits, or on SIGTERM/SIGINT, it exits; as
PID 1 of the node's PID namespace its exit makes the kernel SIGKILL every process of the node
(shims and containers included), and its namespaces (network, mount: every mount, the Pods'
network namespaces) go with them. A failed step exits 1 naming it.

Its configuration is one JSON file (``NodeSpec``), written by ``pyctrl.envtest.realnode.node``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["HOST_SYSCTLS", "docker_name", "main"]

#: What the kubelet sets at start (``setupKernelTunables``) that is not per network namespace.
HOST_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


def _say(message: str) -> None:
    print(f"node supervisor: {message}", file=sys.stderr, flush=True)


def _fail(step: str, detail: str) -> NoReturn:
    _say(f"error: step {step!r} failed: {detail}")
    sys.exit(1)


def _run(step: str, *argv: str) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        _fail(step, f"{' '.join(argv)}: {proc.stderr.strip() or proc.stdout.strip() or proc.returncode}")
    return proc.stdout


def _bind_file(content: str, target: str, store: Path) -> None:
    source = store / target.strip("/").replace("/", "_")
    source.write_text(content)
    _run(f"mask {target}", "mount", "--bind", str(source), target)


def _mounts(spec: dict[str, Any]) -> None:
    _run("mount --make-rshared /", "mount", "--make-rshared", "/")
    _run("tmpfs /run", "mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
    store = Path("/run/pyctrl-masks")
    store.mkdir()
    for name in HOST_SYSCTLS:
        path = f"/proc/sys/{name}"
        if os.path.exists(path):
            _bind_file(Path(path).read_text(), path, store)
    _bind_file(spec["boot_id"] + "\n", "/proc/sys/kernel/random/boot_id", store)
    if os.path.exists("/etc/machine-id"):  # the Node's machineID, one per node
        _bind_file(spec["machine_id"] + "\n", "/etc/machine-id", store)
    for source, target in spec["binds"]:
        Path(source).mkdir(parents=True, exist_ok=True)
        Path(target).mkdir(parents=True, exist_ok=True)
        _run(f"bind {target}", "mount", "--bind", source, target)


def _network(spec: dict[str, Any], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while subprocess.run(["ip", "link", "show", "eth0"], capture_output=True, check=False).returncode != 0:
        if time.monotonic() > deadline:
            _fail("wait for eth0", f"the host gave no eth0 within {timeout:.0f} s")
        time.sleep(0.1)  # the host creates the veth once it has seen this process start
    _run("lo up", "ip", "link", "set", "lo", "up")
    _run("eth0 address", "ip", "addr", "add", f"{spec['node_ip']}/{spec['prefix']}", "dev", "eth0")
    _run("eth0 up", "ip", "link", "set", "eth0", "up")
    for cidr, via in spec["routes"]:
        _run(f"route {cidr}", "ip", "route", "add", cidr, "via", via, "dev", "eth0")
    for knob, value in (("net/ipv4/ip_forward", "1"), ("net/bridge/bridge-nf-call-iptables", "1")):
        path = Path("/proc/sys") / knob
        if path.exists():  # this network namespace's own
            path.write_text(value)


class _Children:
    """The node's daemons; reaps them and every orphan re-parented to PID 1."""

    def __init__(self, log_dir: Path, env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.env = env
        self.daemons: dict[int, str] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )
        self.daemons[proc.pid] = name
        _say(f"started {name} (pid {proc.pid} in the node)")
        return proc

    def reap(self) -> str | None:
        """Reap what has exited; the name of a daemon among them, if any."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid == 0:
                return None
            name = self.daemons.pop(pid, None)
            if name is not None:
                _say(f"{name} exited ({_describe(status)})")
                return name


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"code {os.waitstatus_to_exitcode(status)}"


def _wait_socket(path: str, children: _Children, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if children.reap() is not None:
            _fail("start containerd", f"it exited; see {children.log_dir / 'containerd.log'}")
        if time.monotonic() > deadline:
            _fail("start containerd", f"no socket {path} within {timeout:.0f} s")
        time.sleep(0.1)


def docker_name(name: str) -> str:
    """``name`` as the kubelet asks for it: Docker's normalization (``pyctrl/x:1`` is
    ``docker.io/pyctrl/x:1``, ``redis:7`` is ``docker.io/library/redis:7``)."""
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return name
    return f"docker.io/{name}" if rest else f"docker.io/library/{name}"


def _import_images(spec: dict[str, Any], children: _Children) -> None:
    ctr = ["ctr", "--address", spec["containerd_socket"], "-n", "k8s.io", "images"]
    for archive in spec["images"]:
        start = time.monotonic()
        _run(f"import {archive}", *ctr, "import", archive)
        _say(f"imported {Path(archive).name} in {time.monotonic() - start:.1f}s")
        children.reap()
    # An archive named by a short reference (buildah's "pyctrl/rediscluster-operator:0.1.0") gets
    # the full name too, under which the CRI looks it up.
    for name in _run("list images", *ctr, "ls", "-q").split():
        if not name.startswith("sha256:") and docker_name(name) != name:
            _run(f"tag {name}", *ctr, "tag", "--force", name, docker_name(name))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pyctrl.envtest.realnode SPEC.json", file=sys.stderr)
        return 2
    spec: dict[str, Any] = json.loads(Path(args[0]).read_text())
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _say(f"node {spec['name']}: pid {os.getpid()} in its PID namespace")
    _mounts(spec)
    _network(spec)
    log_dir = Path(spec["log_dir"])
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
    children = _Children(log_dir, env)
    children.start("containerd", spec["containerd"])
    _wait_socket(spec["containerd_socket"], children)
    _import_images(spec, children)
    children.start("kubelet", spec["kubelet"])
    children.start("kube-proxy", spec["kube_proxy"])
    _say("running")
    while not stopping:
        dead = children.reap()
        if dead is not None:
            _say(f"{dead} is gone: the node stops (see {log_dir / (dead + '.log')})")
            return 1
        time.sleep(0.2)  # a signal ends the sleep early; orphans are reaped on the next round
    _say("stopping: the kernel ends every process of the node with this one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
