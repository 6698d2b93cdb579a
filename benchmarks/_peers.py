"""The four programs compared, and how each is launched.

Every program gets the same command line (``--kubeconfig``, ``--namespace``, ``--concurrency``,
``--mark``);
the Python ones run with this interpreter from the repository root, the Go one is built first by
``peers/controller-runtime/build.sh`` (through the Go module proxy, into the cache directory).
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PEERS", "REPO", "Peer", "build_controller_runtime"]

REPO = Path(__file__).resolve().parent.parent
_BUILD = REPO / "benchmarks" / "peers" / "controller-runtime" / "build.sh"


@dataclass(frozen=True)
class Peer:
    key: str
    label: str
    #: the command before the common arguments; ``None`` until built (controller-runtime)
    command: tuple[str, ...] | None

    def argv(self, kubeconfig: Path, namespace: str, concurrency: int, mark: str = "") -> list[str]:
        if self.command is None:
            raise RuntimeError(f"{self.label} is not built")
        args = ["--kubeconfig", str(kubeconfig), "--namespace", namespace, "--concurrency", str(concurrency)]
        return [*self.command, *args, "--mark", mark]


def _python(module: str) -> tuple[str, ...]:
    return (sys.executable, "-m", module)


PEERS = {
    "pyctrl": Peer("pyctrl", "pyctrl", _python("benchmarks.peers.pyctrl_impl")),
    "kopf": Peer("kopf", "kopf", _python("benchmarks.peers.kopf_impl")),
    "controller_runtime": Peer("controller_runtime", "controller-runtime (Go)", None),
    "raw": Peer("raw", "raw asyncio loop", _python("benchmarks.peers.raw_loop")),
}


def build_controller_runtime() -> tuple[Peer, str]:
    """Build (or find) the Go peer; the peer and how long its build took ("336 s, cold build cache")."""
    started = time.monotonic()
    done = subprocess.run([str(_BUILD)], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{_BUILD} failed (exit {done.returncode}); its log is named above")
    binary = Path(done.stdout.strip().splitlines()[-1])
    recorded = binary.parent / "build-seconds"
    seconds, cache = [*recorded.read_text().split(), "", ""][:2] if recorded.is_file() else ["", ""]
    took = f"{seconds} s, {cache} build cache" if seconds else f"{time.monotonic() - started:.0f} s"
    peer = Peer("controller_runtime", "controller-runtime (Go)", (str(binary),))
    return peer, took
