"""The benchmarks that run as programs of their own (``python -m benchmarks.<name>``): the
workqueue and cache micro-benchmarks and the watch-stall scenario (its own control plane and the
client-go peer's build; about 5 minutes).

Each prints its own figures and ends with ``RATIO <name> <value>`` lines; their output is passed
through and the ratios collected, so ``make bench`` reports them with the peers' figures.
"""

from __future__ import annotations

import subprocess
import sys

from benchmarks._peers import REPO

__all__ = ["MICRO", "run_micro"]

MICRO = ("workqueue_bench", "cache_bench", "watch_stall_bench")


def run_micro(names: tuple[str, ...] = MICRO) -> tuple[dict[str, float], dict[str, str]]:
    """Run each benchmark; its RATIO values, and per benchmark its output (or why it did not run)."""
    ratios: dict[str, float] = {}
    outputs: dict[str, str] = {}
    for name in names:
        if not (REPO / "benchmarks" / f"{name}.py").is_file():
            outputs[name] = f"benchmarks/{name}.py not found: not run"
            print(f"bench: {outputs[name]}", flush=True)
            continue
        print(f"bench: running benchmarks/{name}.py", flush=True)
        with subprocess.Popen(
            [sys.executable, "-m", f"benchmarks.{name}"], cwd=REPO, stdout=subprocess.PIPE, text=True
        ) as proc:
            assert proc.stdout is not None
            lines = []
            for line in proc.stdout:  # passed through as it comes: these take minutes
                print(line, end="", flush=True)
                lines.append(line)
        outputs[name] = "".join(lines)
        if proc.returncode != 0:
            outputs[name] += f"\n(exit {proc.returncode})"
            print(f"bench: benchmarks/{name}.py failed (exit {proc.returncode})", flush=True)
        for line in lines:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "RATIO":
                try:
                    ratios[parts[1]] = float(parts[2])
                except ValueError:
                    continue
    return ratios, outputs
