"""The kubelet's resource metrics endpoint, ``GET /metrics/resource`` (kubelet
``pkg/kubelet/metrics/collectors/resource_metrics.go``), measured from ``/proc`` for the processes
the local node runs: what metrics-server scrapes for ``kubectl top`` and the
HorizontalPodAutoscaler's resource metrics.

Guarantees (the series and labels metrics-server's decoder reads, Prometheus text format, each
sample stamped with the time it was measured, in milliseconds, as the kubelet does):
- ``node_cpu_usage_seconds_total`` and ``node_memory_working_set_bytes``: the machine's (the local
  node's capacity is the machine's too): non-idle CPU time from ``/proc/stat``, and
  ``MemTotal - MemAvailable`` from ``/proc/meminfo``;
- per running container, labels ``container``, ``pod``, ``namespace``:
  ``container_cpu_usage_seconds_total`` (user + system time of its processes, plus what they
  reaped from exited children, so the counter does not go back when a child exits),
  ``container_memory_working_set_bytes`` (the sum of their resident set sizes) and
  ``container_start_time_seconds`` (when this instance started: a restart resets the rate
  metrics-server computes);
- per Pod with a running container, labels ``pod``, ``namespace``: ``pod_cpu_usage_seconds_total``
  and ``pod_memory_working_set_bytes``, the sums of its containers;
- ``resource_scrape_error`` 0 (1 when ``/proc`` could not be read for the node figures).

A container's processes are its main process (the container's pid, which leads its process group),
every descendant of it, and every process still in its process group (a daemon that double-forked
away from it). Commands run by ``kubectl exec`` or probes are not counted (the kubelet's cgroups
would count them): they run beside the container, not under it. Shared pages are counted once per
process that maps them (RSS, not PSS), which overstates a forked ``BGSAVE`` child briefly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["MeasuredContainer", "MeasuredPod", "ProcTable", "render"]

_CONTAINER = ["container", "pod", "namespace"]
_POD = ["pod", "namespace"]
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


class _Process(Protocol):
    pid: int


class MeasuredContainer(Protocol):
    """What the endpoint needs from a container: its name, state and process."""

    name: str
    state: dict[str, Any]

    @property
    def process(self) -> _Process | None: ...

    def running(self) -> bool: ...


class MeasuredPod(Protocol):
    pod: dict[str, Any]

    @property
    def measured(self) -> Iterable[MeasuredContainer]: ...


@dataclass(frozen=True)
class _Stat:
    ppid: int
    pgrp: int
    cpu_ticks: int  # utime + stime + cutime + cstime
    rss_pages: int


class ProcTable:
    """One reading of every process's ``/proc/<pid>/stat`` (processes that vanish meanwhile are
    skipped): the parent/child and group relations, CPU ticks and resident pages."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.stats: dict[int, _Stat] = {}
        self.children: dict[int, list[int]] = {}
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                raw = (entry / "stat").read_text()
            except OSError:
                continue
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            fields = raw[raw.rindex(")") + 2 :].split()
            pid = int(entry.name)
            stat = _Stat(
                ppid=int(fields[1]),
                pgrp=int(fields[2]),
                cpu_ticks=sum(int(f) for f in fields[11:15]),
                rss_pages=int(fields[21]),
            )
            self.stats[pid] = stat
            self.children.setdefault(stat.ppid, []).append(pid)

    def group_of(self, root: int) -> set[int]:
        """``root``, its descendants and the members of its process group."""
        found = {pid for pid, stat in self.stats.items() if stat.pgrp == root}
        todo = [root] if root in self.stats else []
        while todo:
            pid = todo.pop()
            found.add(pid)
            todo.extend(child for child in self.children.get(pid, ()) if child not in found)
        return found

    def usage(self, pids: Iterable[int]) -> tuple[float, int]:
        """(CPU seconds, resident bytes) of ``pids``."""
        stats = [self.stats[pid] for pid in pids if pid in self.stats]
        return sum(s.cpu_ticks for s in stats) / _TICKS, sum(s.rss_pages for s in stats) * _PAGE


def _node_usage() -> tuple[float, int]:
    """(non-idle CPU seconds, working set bytes) of the machine."""
    # cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest is in user)
    cpu = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    busy = cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6] + cpu[7]
    info: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0]) * 1024
    return busy / _TICKS, info["MemTotal"] - info["MemAvailable"]


def _started(container: MeasuredContainer) -> float | None:
    started = (container.state.get("running") or {}).get("startedAt")
    if not started:
        return None
    return datetime.fromisoformat(str(started).replace("Z", "+00:00")).timestamp()


class _Collector(Collector):
    def __init__(self, pods: Iterable[MeasuredPod], proc: Path) -> None:
        self.pods, self.proc = list(pods), proc

    def collect(self) -> Iterable[Metric]:
        node_cpu = CounterMetricFamily("node_cpu_usage_seconds", "Cumulative CPU time of the node")
        node_mem = GaugeMetricFamily("node_memory_working_set_bytes", "Working set of the node")
        scrape_error = GaugeMetricFamily("resource_scrape_error", "1 when the node figures failed")
        c_cpu = CounterMetricFamily("container_cpu_usage_seconds", "CPU time", labels=_CONTAINER)
        c_mem = GaugeMetricFamily("container_memory_working_set_bytes", "Working set", labels=_CONTAINER)
        c_start = GaugeMetricFamily("container_start_time_seconds", "Start time", labels=_CONTAINER)
        p_cpu = CounterMetricFamily("pod_cpu_usage_seconds", "CPU time of the pod", labels=_POD)
        p_mem = GaugeMetricFamily("pod_memory_working_set_bytes", "Working set of the pod", labels=_POD)
        now = time.time()
        try:
            cpu, memory = _node_usage()
        except (OSError, ValueError, IndexError, KeyError):
            scrape_error.add_metric([], 1)
        else:
            node_cpu.add_metric([], cpu, timestamp=now)
            node_mem.add_metric([], memory, timestamp=now)
            scrape_error.add_metric([], 0)
        table = ProcTable(self.proc)
        for view in self.pods:
            meta: Mapping[str, Any] = view.pod["metadata"]
            pod, namespace = str(meta["name"]), str(meta["namespace"])
            pod_cpu, pod_mem, any_running = 0.0, 0, False
            for container in view.measured:
                process, started = container.process, _started(container)
                if process is None or started is None or not container.running():
                    continue
                cpu, memory = table.usage(table.group_of(process.pid))
                values = [container.name, pod, namespace]
                c_cpu.add_metric(values, cpu, timestamp=now)
                c_mem.add_metric(values, memory, timestamp=now)
                c_start.add_metric(values, started, timestamp=now)
                pod_cpu, pod_mem, any_running = pod_cpu + cpu, pod_mem + memory, True
            if any_running:
                p_cpu.add_metric([pod, namespace], pod_cpu, timestamp=now)
                p_mem.add_metric([pod, namespace], pod_mem, timestamp=now)
        return [node_cpu, node_mem, c_cpu, c_mem, c_start, p_cpu, p_mem, scrape_error]


def render(pods: Iterable[MeasuredPod], proc: Path = Path("/proc")) -> bytes:
    """The ``/metrics/resource`` page for ``pods`` (blocking: reads ``/proc``; run it in a thread)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(pods, proc))
    return generate_latest(registry)
