"""Medians, the machine, the table, the chart, the README section and the RATIO lines.

Throughput ratios are pyctrl's objects/s over the peer's (> 1: pyctrl is faster), while the Items
are created (``*_throughput``) and on a backlog (``*_backlog_throughput``); each figure is the median
over the runs (runs that failed are left out and counted; a failed backlog phase leaves out only
the backlog figures of its run).
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import re
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._peers import PEERS
from benchmarks._runs import Run

__all__ = [
    "cost_ratio",
    "cost_table",
    "machine",
    "ratios",
    "summarize",
    "table",
    "write_chart",
    "write_cost_chart",
    "write_readme",
]

_BEGIN, _END = "<!-- results:begin -->", "<!-- results:end -->"


def _cmd(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "n/a"


def machine() -> dict[str, str]:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in ln
        ),
        "unknown",
    )
    mem = next((ln.split()[1] for ln in _cmd("free", "-h").splitlines() if ln.startswith("Mem:")), "n/a")
    return {
        "cpus": str(os.cpu_count()),
        "cpu_model": cpu,
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "go": _cmd("go", "env", "GOVERSION") or "n/a",
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def _median(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def summarize(runs: Sequence[Run]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{peer: {str(n): {field: median, "runs": k, "failed": f}}}``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        out.setdefault(run.peer, {}).setdefault(str(run.n), {})
    for peer, by_n in out.items():
        for n, cell in by_n.items():
            mine = [r for r in runs if r.peer == peer and str(r.n) == n]
            ok = [r for r in mine if r.error is None]
            cell["runs"], cell["failed"] = len(ok), len(mine) - len(ok)
            for field in (
                "seconds",
                "objects_per_s",
                "cpu_seconds",
                "rss_start_mib",
                "rss_after_mib",
                "startup_seconds",
                "startup_cpu_seconds",
            ):
                cell[field] = _median([getattr(r, field) for r in ok])
            cell["rss_idle_mib"] = _median([r.rss_idle_mib for r in ok])
            cell["create_seconds"] = _median([r.create_seconds for r in ok])
            cell["drain_seconds"] = _median(
                [
                    r.seconds - r.create_seconds
                    for r in ok
                    if r.seconds is not None and r.create_seconds is not None
                ]
            )
            backlog = [r for r in mine if r.backlog_objects_per_s is not None]
            if backlog or any(r.backlog_error for r in mine):
                cell["backlog_runs"], cell["backlog_failed"] = (
                    len(backlog),
                    sum(bool(r.backlog_error) for r in mine),
                )
                for field in (
                    "backlog_seconds",
                    "backlog_objects_per_s",
                    "backlog_startup_seconds",
                    "backlog_cpu_seconds",
                    "backlog_startup_cpu_seconds",
                    "backlog_cpu_per_object_us",
                    "backlog_rss_mib",
                ):
                    cell[field] = _median([getattr(r, field) for r in backlog])
    return out


def _get(summary: dict[str, Any], peer: str, n: int, field: str) -> float | None:
    value = summary.get(peer, {}).get(str(n), {}).get(field)
    return None if value is None else float(value)


def _largest_common(summary: dict[str, Any], peers: Sequence[str], field: str) -> int | None:
    """The largest object count at which every one of ``peers`` has ``field``."""
    sizes = [
        int(size)
        for size in summary.get(peers[0], {})
        if all(_get(summary, peer, int(size), field) for peer in peers)
    ]
    return max(sizes, default=None)


def cost_ratio(summary: dict[str, Any], mine: str, theirs: str) -> float | None:
    """``mine``'s CPU per object over ``theirs``, at the largest count both were measured at."""
    field = "backlog_cpu_per_object_us"
    size = _largest_common(summary, [mine, theirs], field)
    if size is None:
        return None
    return float(_get(summary, mine, size, field) or 0) / float(_get(summary, theirs, size, field) or 1)


def ratios(
    summary: dict[str, Any], n: int, micro: dict[str, float], *, medium: int, large: int
) -> dict[str, float | None]:
    def over(peer: str, field: str = "objects_per_s") -> float | None:
        mine, theirs = _get(summary, "pyctrl", n, field), _get(summary, peer, n, field)
        return mine / theirs if mine and theirs else None

    out: dict[str, float | None] = {
        "pyctrl_vs_kopf_throughput": over("kopf"),
        "pyctrl_vs_controller_runtime_throughput": over("controller_runtime"),
        "pyctrl_vs_raw_throughput": over("raw"),
    }
    out.update(micro)
    # after the others, so the lines that were there before keep their places
    for peer in ("kopf", "controller_runtime", "raw"):
        out[f"pyctrl_vs_{peer}_backlog_throughput"] = over(peer, "backlog_objects_per_s")
    # the cost per object (start-up excluded), at the largest count measured for both; n's RSS idle
    # and start-up; pyctrl's CPU per object at the large count over the medium one
    out["cpu_per_object_vs_raw"] = cost_ratio(summary, "pyctrl", "raw")
    out["cpu_per_object_vs_controller_runtime"] = cost_ratio(summary, "pyctrl", "controller_runtime")
    out["idle_rss_vs_raw"] = over("raw", "rss_idle_mib")
    out["startup_vs_raw"] = over("raw", "startup_seconds")
    grown = _get(summary, "pyctrl", large, "backlog_cpu_per_object_us")
    base = _get(summary, "pyctrl", medium, "backlog_cpu_per_object_us")
    out["cpu_per_object_growth_10k_to_100k"] = grown / base if grown and base else None
    out["kopf_cpu_per_object_vs_pyctrl"] = cost_ratio(summary, "kopf", "pyctrl")
    return out


def _measured_sizes(summary: dict[str, Any], key: str) -> list[int]:
    """The object counts with a CPU-per-object figure for ``key``, ascending."""
    field = "backlog_cpu_per_object_us"
    return sorted(int(s) for s in summary.get(key, {}) if _get(summary, key, int(s), field))


def _rss_per_object(summary: dict[str, Any], key: str, size: int, n: int) -> float | None:
    """KiB of RSS per object holding ``size`` of them, over the RSS on an empty namespace (at ``n``)."""
    rss, empty = _get(summary, key, size, "backlog_rss_mib"), _get(summary, key, n, "rss_start_mib")
    return (rss - empty) * 1024 / size if rss is not None and empty is not None else None


def cost_table(summary: dict[str, Any], n: int) -> str:
    """The per-object figures of every program at every object count (backlog phases)."""
    head = [
        "implementation",
        "objects",
        "CPU µs per object",
        "start-up + initial list: CPU s",
        "initial sync s",
        "RSS holding them",
        "RSS per object",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, peer in PEERS.items():
        for size in _measured_sizes(summary, key):
            per = _get(summary, key, size, "backlog_cpu_per_object_us")
            rss = _get(summary, key, size, "backlog_rss_mib")
            row = [
                peer.label,
                f"{size:,}",
                _f(per, ".0f"),
                _f(_get(summary, key, size, "backlog_startup_cpu_seconds"), ".2f"),
                _f(_get(summary, key, size, "backlog_startup_seconds"), ".2f"),
                _f(rss, ".0f") + " MiB",
                _f(_rss_per_object(summary, key, size, n), ".2f") + " KiB",
            ]
            lines.append("| " + " | ".join(row) + " |")
    startup = ", ".join(
        f"{PEERS[key].label} {_f(_get(summary, key, n, 'startup_seconds'), '.2f')} s"
        f" / {_f(_get(summary, key, n, 'startup_cpu_seconds'), '.2f')} CPU s"
        for key in PEERS
        if key in summary
    )
    return "\n".join([*lines, "", f"Start-up (spawn to its first convergence, empty namespace): {startup}."])


def write_cost_chart(path: Path, summary: dict[str, Any], n: int) -> None:
    """CPU µs and RSS KiB per object against the object count, one line per program (log x)."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    fig, (cpu_ax, rss_ax) = plt.subplots(1, 2, figsize=(12, 4.6))
    for key, peer in PEERS.items():
        sizes = _measured_sizes(summary, key)
        if not sizes:
            continue
        cpu = [_get(summary, key, size, "backlog_cpu_per_object_us") for size in sizes]
        cpu_ax.plot(sizes, cpu, marker="o", label=peer.label)
        rss = [_rss_per_object(summary, key, size, n) for size in sizes]
        rss_ax.plot(sizes, [float("nan") if r is None else r for r in rss], marker="o", label=peer.label)
    for ax, title, unit in (
        (cpu_ax, "CPU per reconciled object (start-up excluded)", "CPU µs per object"),
        (rss_ax, "RSS per cached object (over the empty program's)", "KiB per object"),
    ):
        ax.set_xscale("log")
        ax.set_xlabel("objects (backlog)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _f(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def table(summary: dict[str, Any], n: int, big: int | None, backlog: bool = False) -> str:
    """The Markdown table of medians."""
    head = [
        "implementation",
        f"{n} objects: s",
        "objects/s",
        "of which creating",
        "after last create",
        "CPU s",
        "RSS at start",
        f"RSS after {n}",
        f"RSS idle, {n}",
    ]
    if backlog:
        head += ["backlog: s", "backlog: objects/s", "backlog: start-up s", "backlog: CPU s"]
    if big:
        head += [f"{big} objects: objects/s", f"RSS after {big}", f"RSS idle, {big}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, peer in PEERS.items():
        if key not in summary:
            continue
        row = [
            peer.label,
            _f(_get(summary, key, n, "seconds"), ".2f"),
            _f(_get(summary, key, n, "objects_per_s"), ".0f"),
            _f(_get(summary, key, n, "create_seconds"), ".2f"),
            _f(_get(summary, key, n, "drain_seconds"), ".2f"),
            _f(_get(summary, key, n, "cpu_seconds"), ".2f"),
            _f(_get(summary, key, n, "rss_start_mib"), ".0f") + " MiB",
            _f(_get(summary, key, n, "rss_after_mib"), ".0f") + " MiB",
            _f(_get(summary, key, n, "rss_idle_mib"), ".0f") + " MiB",
        ]
        if backlog:
            row += [
                _f(_get(summary, key, n, "backlog_seconds"), ".2f"),
                _f(_get(summary, key, n, "backlog_objects_per_s"), ".0f"),
                _f(_get(summary, key, n, "backlog_startup_seconds"), ".2f"),
                _f(_get(summary, key, n, "backlog_cpu_seconds"), ".2f"),
            ]
        if big:
            row += [
                _f(_get(summary, key, big, "objects_per_s"), ".0f"),
                _f(_get(summary, key, big, "rss_after_mib"), ".0f") + " MiB",
                _f(_get(summary, key, big, "rss_idle_mib"), ".0f") + " MiB",
            ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def write_chart(path: Path, summary: dict[str, Any], runs: Sequence[Run], n: int, big: int | None) -> None:
    """Throughput (median bar, each run a dot), CPU and RSS, side by side; matplotlib's Agg backend."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    keys = [k for k in PEERS if k in summary]
    short = {"controller_runtime": "controller-\nruntime (Go)", "raw": "raw\nasyncio loop"}
    labels = [short.get(k, PEERS[k].label) for k in keys]
    fig, (ax1, ax3, ax2) = plt.subplots(1, 3, figsize=(17, 5.4), width_ratios=[1, 0.9, 1.3])
    modes = [("while creating", "objects_per_s", "#3b75af")]
    if any(_get(summary, k, n, "backlog_objects_per_s") for k in keys):
        modes.append(("backlog", "backlog_objects_per_s", "#d9a23b"))
    width = 0.8 / len(modes)
    for j, (mode, field, color) in enumerate(modes):
        xs = [i + (j - (len(modes) - 1) / 2) * width for i in range(len(keys))]
        medians = [_get(summary, k, n, field) or 0.0 for k in keys]
        bars = ax1.bar(xs, medians, width, color=color, label=mode)
        for x, k in zip(xs, keys, strict=True):
            points = [getattr(r, field) for r in runs if r.peer == k and r.n == n and getattr(r, field)]
            ax1.scatter([x] * len(points), points, color="black", s=10, zorder=3)
        ax1.bar_label(bars, labels=[f"{m:.0f}" for m in medians], padding=3, fontsize=8)
    ax1.set_xticks(range(len(keys)), labels)
    ax1.set_ylabel("objects/s (median; dots: runs)")
    ax1.legend(fontsize=8)
    ax1.set_title(f"Reconcile throughput, {n} Items")
    cpu = [_get(summary, k, n, "cpu_seconds") or 0.0 for k in keys]
    cpu_bars = ax3.bar(range(len(keys)), cpu, color=["#3b75af", "#ef8636", "#519e3e", "#8d69b8"][: len(keys)])
    ax3.bar_label(cpu_bars, labels=[f"{c:.2f}" for c in cpu], padding=3)
    ax3.set_xticks(range(len(keys)), labels)
    ax3.set_ylabel("CPU seconds of the controller process (median)")
    ax3.set_title(f"CPU used for {n} Items (lower is better)")
    series = [
        ("at start", "rss_start_mib", n),
        (f"after {n}", "rss_after_mib", n),
        (f"idle, {n}", "rss_idle_mib", n),
    ]
    if big:
        series += [(f"after {big}", "rss_after_mib", big), (f"idle, {big}", "rss_idle_mib", big)]
    width = 0.8 / len(series)
    for j, (name, field, size) in enumerate(series):
        values = [_get(summary, k, size, field) or 0.0 for k in keys]
        ax2.bar(
            [i + (j - (len(series) - 1) / 2) * width for i in range(len(keys))], values, width, label=name
        )
    ax2.set_xticks(range(len(keys)), labels)
    ax2.set_ylabel("RSS, MiB (median)")
    ax2.set_title("Memory (resident set size of the controller process)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_readme(readme: Path, section: str) -> None:
    """Replace the text between the results markers of ``readme`` with ``section``."""
    text = readme.read_text() if readme.is_file() else f"{_BEGIN}\n{_END}\n"
    pattern = re.compile(re.escape(_BEGIN) + ".*?" + re.escape(_END), re.S)
    readme.write_text(pattern.sub(lambda _: f"{_BEGIN}\n{section.strip()}\n{_END}", text, count=1))


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
