"""One container of a Pod over time: start, probe, restart with back-off, stop (kubelet
``kuberuntime_container`` + ``prober`` workers + the crash-loop ``Backoff``).

Guarantees:
- ``status()`` is the container's ``containerStatuses`` entry: state waiting / running /
  terminated (exitCode, reason Completed / Error / StartError, startedAt, finishedAt), lastState,
  restartCount, ready, started, containerID ``pyctrl://<pid>``;
- when the process exits the container is NotReady and the Pod status is written (``flush_status``)
  before anything else happens, so readers see the exit within a second;
- restartPolicy Always restarts after any exit, OnFailure after a non-zero one, Never never; the
  delays follow the kubelet: the first restart at once, then ``initial``, doubling up to ``maximum``
  (state waiting ``CrashLoopBackOff`` meanwhile), reset after a quiet ``2 * maximum``;
- probes: startup first (liveness and readiness start once it succeeded); readiness decides
  ``ready`` (without one, ready = started); a failing liveness or startup probe stops the container
  (SIGTERM, its grace period, SIGKILL) and the restart policy applies;
- an unmapped image leaves the container waiting (``ImageNotMapped``) until the Pod goes away; a
  missing ConfigMap/Secret is ``CreateContainerConfigError`` and any other failure to create the
  container ``CreateContainerError``, both retried every 2 s;
- a terminated state carries the termination message: what the container wrote to its
  ``terminationMessagePath`` (a per-start file the pod bind-mounts there), or with
  ``FallbackToLogsOnError`` after a failure the tail of its log;
- each started instance is recorded in the log's instance index (``logs.py``), so the kubelet API
  serves the current and the previous instance's output;
- ``stop(grace, pre_stop=True)`` runs the preStop hook (bounded by ``grace``), then SIGTERM, and
  SIGKILL at the end of the grace period; no restart happens after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from functools import partial
from typing import Any, Protocol

from pyctrl.envtest.node import logs
from pyctrl.envtest.node.envvars import ContainerConfigError, expand, static_env
from pyctrl.envtest.node.identity import Credentials
from pyctrl.envtest.node.images import ImageNotMapped, StartError
from pyctrl.envtest.node.probes import ProbeContext, ProbeResult, ProbeSpec, ProbeTracker, check, run_handler
from pyctrl.envtest.node.runtime import ContainerProcess, Launch, exec_in, spawn_in, start_container
from pyctrl.envtest.node.status import now_rfc3339
from pyctrl.envtest.node.wake import set_or_timeout

__all__ = ["Backoff", "Container", "ContainerHost"]

log = logging.getLogger(__name__)


class ContainerHost(Protocol):
    """What a container needs from its Pod."""

    pod_ip: str

    async def launch_for(self, spec: Mapping[str, Any]) -> Launch: ...
    def status_changed(self) -> None: ...
    async def flush_status(self) -> None: ...
    def grace_period(self) -> float: ...


class Backoff:
    """Crash-loop back-off of one container (kubelet ``flowcontrol.Backoff``)."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial, self.maximum = initial, maximum
        self._next: float | None = None
        self._last = 0.0

    def delay(self, now: float) -> float:
        """Seconds to wait before restarting after an exit at ``now`` (monotonic seconds)."""
        if self._next is None or now - self._last > 2 * self.maximum:
            delay, self._next = 0.0, self.initial
        else:
            delay, self._next = self._next, min(self._next * 2, self.maximum)
        self._last = now
        return delay


class Container:
    def __init__(
        self,
        spec: Mapping[str, Any],
        host: ContainerHost,
        *,
        restart_policy: str,
        backoff: Backoff,
        restart_count: int = 0,
    ) -> None:
        self.spec = spec
        self.restart_policy = restart_policy
        self.name: str = spec["name"]
        self.host = host
        self.backoff = backoff
        self.restart_count = restart_count
        self.state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: dict[str, Any] = {}
        self.ready = False
        self.started = False
        self.process: ContainerProcess | None = None
        self.image_id = ""
        self._env: dict[str, str] = {}
        self._user: Credentials | None = None  # the running instance's ids (exec, probes)
        self._stopping = asyncio.Event()
        self._probes: list[asyncio.Task[None]] = []
        self._live_kill: asyncio.Task[int] | None = None
        self._task: asyncio.Task[int | None] | None = None
        self._stop_grace = 0.0

    # -- status --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": self.image_id,
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self.process is not None and "waiting" not in self.state:
            status["containerID"] = f"pyctrl://{self.process.pid}"
        return status

    def running(self) -> bool:
        """True while an instance of the container runs."""
        return self.process is not None and self.process.returncode is None

    async def spawn(
        self, argv: list[str], *, stdin: bool, terminal: int | None = None
    ) -> asyncio.subprocess.Process:
        """Start ``argv`` in the running container with its environment (``kubectl exec``), on
        ``terminal`` (a pty) when given."""
        if self.process is None or not self.running():
            raise RuntimeError(f"container {self.name} is not running")
        env = dict(self._env, TERM=self._env.get("TERM", "xterm")) if terminal is not None else self._env
        return await spawn_in(
            self.process.pid, argv, env, stdin=stdin, merge_stderr=False, terminal=terminal, user=self._user
        )

    def _set(self, state: dict[str, Any], *, ready: bool | None = None) -> None:
        self.state = state
        if ready is not None:
            self.ready = ready
        self.host.status_changed()

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> int | None:
        """Run (and restart) until the policy says stop or ``stop`` is called; the last exit code."""
        code: int | None = None
        while not self._stopping.is_set():
            started_at = now_rfc3339()
            self.process = None
            try:
                launch = await self.host.launch_for(self.spec)
                self.image_id = f"local://{launch.executable}"
                offset = logs.log_size(launch.log_path)
                self.process = await start_container(launch)
                logs.begin_instance(launch.log_path, offset)
                if self._stopping.is_set():
                    await self.process.stop(self._stop_grace)
            except ImageNotMapped as exc:
                self._set({"waiting": {"reason": "ImageNotMapped", "message": str(exc)}})
                await self._stopping.wait()
                return None
            except ContainerConfigError as exc:
                await self._retry_creation("CreateContainerConfigError", str(exc))
                continue
            except StartError as exc:
                code = 128
                self.state = {
                    "terminated": {
                        "exitCode": 128,
                        "reason": "StartError",
                        "message": str(exc),
                        "startedAt": started_at,
                        "finishedAt": now_rfc3339(),
                    }
                }
            except Exception as exc:  # apiserver unreachable, disk full, ...: retried, never fatal
                log.exception("container %s could not be created", self.name)
                await self._retry_creation("CreateContainerError", f"{type(exc).__name__}: {exc}")
                continue
            else:
                self._env = launch.env
                self._user = launch.user
                code = await self._supervise(self.process, started_at)
                self._add_termination_message(launch, code)
            self.ready, self.started = False, False
            await self.host.flush_status()
            if self._stopping.is_set() or not self._should_restart(code):
                return code
            delay = self.backoff.delay(time.monotonic())
            self.last_state = self.state
            if delay > 0:
                message = f"back-off {delay:g}s restarting failed container={self.name}"
                self._set({"waiting": {"reason": "CrashLoopBackOff", "message": message}})
                if await set_or_timeout(self._stopping, delay):
                    return code
            self.restart_count += 1
        return code

    def _add_termination_message(self, launch: Launch, code: int) -> None:
        """The kubelet's termination message: the file the container wrote at its
        terminationMessagePath (at most 4096 bytes) or, with FallbackToLogsOnError after a failure,
        the last 80 lines (at most 2048 bytes) of this instance's log."""
        message = b""
        if launch.termination_log is not None:
            with contextlib.suppress(OSError):
                message = launch.termination_log.read_bytes()[:4096]
        fallback = self.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError"
        if not message.strip() and fallback and code != 0:
            start, end = logs.instance_range(launch.log_path, previous=False) or (0, None)
            own = logs.read_range(launch.log_path, start, end)  # this instance's output only
            message = b"\n".join(own.splitlines()[-80:])[-2048:]
        if message.strip():
            self.state["terminated"]["message"] = message.decode(errors="replace")

    async def _retry_creation(self, reason: str, message: str) -> None:
        self._set({"waiting": {"reason": reason, "message": message}})
        await set_or_timeout(self._stopping, 2.0)

    def _should_restart(self, code: int) -> bool:
        policy = self.restart_policy
        return policy == "Always" or (policy == "OnFailure" and code != 0)

    async def _supervise(self, process: ContainerProcess, started_at: str) -> int:
        log.info("container %s started (pid %d)", self.name, process.pid)
        startup = self.spec.get("startupProbe")
        self._set({"running": {"startedAt": started_at}}, ready=False)
        post_start = (self.spec.get("lifecycle") or {}).get("postStart")
        if post_start:
            outcome = await run_handler(post_start, self._probe_context(process), self.host.grace_period())
            if not outcome.ok:
                log.warning("container %s: postStart hook failed: %s", self.name, outcome.message)
                await process.stop(self.host.grace_period())
        if startup:
            self._probes.append(asyncio.create_task(self._probe("startup", startup, process)))
        else:
            self._on_started(process)
        try:
            code = await process.wait()
        finally:
            for task in self._probes:
                task.cancel()
            self._probes.clear()
        if self._live_kill is not None:
            await self._live_kill
            self._live_kill = None
        reason = "Completed" if code == 0 else "Error"
        self.state = {
            "terminated": {
                "exitCode": code,
                "reason": reason,
                "startedAt": started_at,
                "finishedAt": now_rfc3339(),
                "containerID": f"pyctrl://{process.pid}",
            }
        }
        log.info("container %s (pid %d) exited with %d", self.name, process.pid, code)
        return code

    def _on_started(self, process: ContainerProcess) -> None:
        self.started = True
        readiness, liveness = self.spec.get("readinessProbe"), self.spec.get("livenessProbe")
        if liveness:
            self._probes.append(asyncio.create_task(self._probe("liveness", liveness, process)))
        if readiness:
            self._probes.append(asyncio.create_task(self._probe("readiness", readiness, process)))
            self.host.status_changed()
        else:
            self._set(self.state, ready=True)

    def _probe_context(self, process: ContainerProcess) -> ProbeContext:
        ports = {p["name"]: int(p["containerPort"]) for p in self.spec.get("ports") or [] if p.get("name")}
        run = partial(exec_in, process.pid, env=self._env, user=self._user)
        static = static_env(self.spec)
        return ProbeContext(
            pod_ip=self.host.pod_ip,
            ports=ports,
            exec_fn=lambda argv, t: run([expand(a, static) for a in argv], seconds=t),
        )

    async def _probe(self, kind: str, probe: Mapping[str, Any], process: ContainerProcess) -> None:
        spec = ProbeSpec.parse(probe)
        tracker = ProbeTracker(spec, initial=(kind == "liveness"))
        ctx = self._probe_context(process)
        await asyncio.sleep(spec.initial_delay)
        while True:
            outcome: ProbeResult = await check(spec.handler, ctx, spec.timeout)
            changed = tracker.record(outcome)
            if kind == "readiness" and changed:
                self._set(self.state, ready=tracker.result)
            elif kind == "startup" and changed:
                self._on_started(process)
                return
            elif kind != "readiness" and tracker.failures >= spec.failure_threshold:
                log.info(
                    "container %s failed its %s probe (%s); killing it", self.name, kind, outcome.message
                )
                grace = float(probe.get("terminationGracePeriodSeconds") or self.host.grace_period())
                self._live_kill = asyncio.create_task(process.stop(grace))
                return
            await asyncio.sleep(spec.period)

    def start(self) -> asyncio.Task[int | None]:
        self._task = asyncio.create_task(self.run(), name=f"container {self.name}")
        return self._task

    async def stop(self, grace: float, *, pre_stop: bool = True) -> None:
        """Stop for good: preStop hook, SIGTERM, SIGKILL after ``grace`` seconds; wait for the end."""
        self._stop_grace = grace
        self._stopping.set()
        for task in self._probes:
            task.cancel()
        process = self.process
        if process is not None and process.returncode is None:
            deadline = time.monotonic() + grace
            hook = (self.spec.get("lifecycle") or {}).get("preStop")
            if pre_stop and hook:
                outcome = await run_handler(hook, self._probe_context(process), grace)
                if not outcome.ok:
                    log.warning("container %s: preStop hook failed: %s", self.name, outcome.message)
            await process.stop(max(deadline - time.monotonic(), 0.0))
        if self._task is not None:
            await self._task
