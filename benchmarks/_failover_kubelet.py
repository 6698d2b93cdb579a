"""``--runtime kubelet``: the operator's crash failover and a Pod's start on real nodes against the
local node, in one run (the local node is the baseline).

For each runtime in turn — ``local`` (the default envtest node, Pods as processes) then
``kubelet`` (``Environment(runtime="kubelet", nodes=2)``: the upstream kubelet, containerd and
runc, real images) — on a control plane of its own:

- *pod start*: ``--kills`` Pods of the Redis image (no probe), each timed from its creation to its
  ``Ready`` condition as the apiserver reports it (polled every 50 ms), then deleted;
- *crash*: the operator (its own process, this checkout's code) and a 3-pod RedisCluster with the
  same ``--down-after-ms``; ``--kills`` runs of :func:`benchmarks._failover_run.one_run` with the
  crash fault (``SHUTDOWN NOSAVE`` of the master). On a real node the kubelet restarts the exited
  container at once, empty: the operator fails it over as a master restarted empty (or as down
  when the restart takes longer than down-after), exactly as on the local node.

Printed: one line per run, the medians per runtime, ``RATIO failover_first_write_kubelet_vs_local``
(median first acknowledged write after the crash, real nodes over local node; the aim is at most
1.2) and ``RATIO pod_start_kubelet_vs_local``. Never asserted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from benchmarks._failover_run import Outcome, one_run
from benchmarks._failover_systems import NS, OperatorSystem, SystemError_, until
from examples.rediscluster_demo.harness import ROOT, operator_process
from pyctrl.client import load_kubeconfig
from pyctrl.client.errors import NotFound
from pyctrl.client.rest import Transport
from pyctrl.envtest import Environment

if TYPE_CHECKING:
    import argparse

__all__ = ["RUNTIMES", "kubelet_runs", "report_kubelet"]

RUNTIMES = ("local", "kubelet")
#: the Redis image of each runtime: the local node maps ``redis*`` to redis-server; the real
#: nodes run scripts/node-images.sh's image
IMAGES = {"local": "redis:7.2", "kubelet": "localhost/pyctrl/redis:7"}
#: the ``fault`` of the pod-start rows
POD_START = "pod_start"


def _pod(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "redis",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 999,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                }
            ],
        },
    }


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def pod_start(t: Transport, image: str, runtime: str) -> Outcome:
    """One Pod of ``image``: creation to Ready (as ``promoted_s``, the row's one figure)."""
    name = f"start-{uuid.uuid4().hex[:6]}"
    path = f"/api/v1/namespaces/{NS}/pods"
    started = time.monotonic()
    await t.request("POST", path, body=orjson.dumps(_pod(name, image)), content_type="application/json")
    try:

        async def ready() -> bool:
            return _ready(await t.request_json("GET", f"{path}/{name}"))

        await until(ready, 180, f"Pod {name} Ready")
        took = time.monotonic() - started
    finally:
        with contextlib.suppress(NotFound):
            await t.request("DELETE", f"{path}/{name}")
    return Outcome(f"pod/{runtime}", POD_START, None, took, None, 0.0, 0, 0)


def _environment(runtime: str) -> Environment:
    if runtime == "kubelet":
        return Environment(crd_directory_paths=[ROOT / "crds"], runtime="kubelet", nodes=2)
    return Environment(crd_directory_paths=[ROOT / "crds"])


async def kubelet_runs(args: argparse.Namespace) -> list[Outcome]:
    """Both runtimes, one after the other, each on its own control plane (module docstring)."""
    outcomes: list[Outcome] = []
    for runtime in RUNTIMES:
        print(f"\nruntime {runtime}: starting its control plane", flush=True)
        with _environment(runtime) as env:
            t = Transport(await load_kubeconfig(env.kubeconfig_path))
            try:
                for k in range(args.kills):
                    o = await pod_start(t, IMAGES[runtime], runtime)
                    outcomes.append(o)
                    print(f"run {k + 1} {runtime:8} pod start {o.promoted_s:.2f}s", flush=True)
                with operator_process(env, env.log_dir / "operator.log"):
                    system = OperatorSystem(t, args.down_after_ms, image=IMAGES[runtime])
                    try:
                        await system.setup()
                        for k in range(args.kills):
                            try:
                                o = await one_run(system, "crash")
                            except (SystemError_, TimeoutError) as exc:
                                o = Outcome(system.name, "crash", None, None, None, 0.0, 0, 0, note=str(exc))
                            o = dataclasses.replace(o, system=f"operator/{runtime}")
                            outcomes.append(o)
                            print(
                                f"run {k + 1} {runtime:8} crash: first acknowledged write "
                                f"{_s(o.first_write_s)}, longest pause {o.longest_pause_s:.2f}s, "
                                f"lost {o.lost}/{o.acked}" + (f"  [{o.note}]" if o.note else ""),
                                flush=True,
                            )
                    finally:
                        await system.close()
            finally:
                await t.close()
    return outcomes


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def report_kubelet(outcomes: list[Outcome], down_after_ms: int) -> None:
    """The medians per runtime and the two RATIO lines (real nodes over the local node)."""
    print(f"\nreal nodes vs the local node, downAfterMilliseconds={down_after_ms}, medians:")
    print(f"{'runtime':8} {'pod start':>10} {'first write':>12} {'longest pause':>14} {'lost writes':>12}")
    figures: dict[str, tuple[float | None, float | None]] = {}
    for runtime in RUNTIMES:
        starts = [o.promoted_s for o in outcomes if o.system == f"pod/{runtime}"]
        crashes = [o for o in outcomes if o.system == f"operator/{runtime}" and not o.note]
        first = _median([o.first_write_s for o in crashes])
        pause = _median([o.longest_pause_s for o in crashes])
        lost = sum(o.lost for o in crashes)
        acked = sum(o.acked for o in crashes)
        figures[runtime] = (_median(starts), first)
        print(f"{runtime:8} {_s(_median(starts)):>10} {_s(first):>12} {_s(pause):>14} {lost:>5}/{acked:<6}")
    (local_start, local_first), (real_start, real_first) = figures["local"], figures["kubelet"]
    if local_first and real_first is not None:
        print(f"RATIO failover_first_write_kubelet_vs_local {real_first / local_first:.2f}")
    if local_start and real_start is not None:
        print(f"RATIO pod_start_kubelet_vs_local {real_start / local_start:.2f}")
