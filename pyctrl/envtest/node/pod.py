"""One Pod on the local node, from binding to removal (kubelet ``pod_workers`` + ``SyncPod`` +
``status_manager``).

Guarantees:
- the Pod gets one loopback address for its whole life (``status.podIP``/``podIPs``; hostIP the
  node's own address), released when the Pod is removed; a ``hostNetwork`` Pod gets the hostIP;
- volumes are set up before any container starts; while one is not ready (unbound claim, missing
  ConfigMap) containers wait in ``ContainerCreating`` with the reason, and setup is retried on
  every claim/volume event and every 2 s;
- init containers run one after another to success before the main containers start together;
- status is written through ``pods/status`` (JSON merge patch) whenever it changes, coalesced, and
  at once when a container exits;
- on ``deletionTimestamp``: every container gets its preStop hook, SIGTERM and, after the grace
  period (``metadata.deletionGracePeriodSeconds``), SIGKILL; the final status is written and the
  Pod is deleted with grace period 0 (uid precondition). A Pod removed behind the node's back
  (force deletion) is stopped within 2 s;
- configMap, secret, downwardAPI and projected volumes are mounted read-only, whatever the
  volumeMount says (like the kubelet), and brought up to date every ``VOLUME_REFRESH_SECONDS``
  while the Pod runs (an atomic swap of all the volume's files, see ``volumes``);
- every container of a Pod not on the host network sees the kubelet's managed ``/etc/hosts``
  (unless it mounts that path itself): localhost, the Pod's IP with its hostname — and, with
  ``spec.subdomain``, its ``<hostname>.<subdomain>.<namespace>.svc.cluster.local`` name, as a
  StatefulSet's Pods have — and ``spec.hostAliases``; the node has no cluster DNS, so this is how a
  Pod resolves its own stable name (written once per Pod, like the kubelet's);
- each container logs to ``<state dir>/pods/<namespace>_<name>_<uid>/<container>.log`` (appended
  across restarts, kept after the Pod is gone); the Pod carries that directory in the annotation
  ``pyctrl.dev/log-dir``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pyctrl.envtest.node.addresses import AddressPool
from pyctrl.envtest.node.container import Backoff, Container
from pyctrl.envtest.node.envvars import ContainerConfigError, PodFacts, build_env, decode_data, expand
from pyctrl.envtest.node.identity import credentials_for, home_for
from pyctrl.envtest.node.images import (
    DEFAULT_PATH,
    ImageMap,
    image_paths_under,
    resolve_argv,
    verify_run_as_non_root,
)
from pyctrl.envtest.node.kube import ApiError, Kube
from pyctrl.envtest.node.runtime import Launch, Mount
from pyctrl.envtest.node.status import KUBELET_CONDITIONS, now_rfc3339, pod_status
from pyctrl.envtest.node.volumes import (
    VolumeContext,
    VolumeNotReady,
    prepare_volumes,
    refresh_volumes,
    remove_pod_volumes,
)
from pyctrl.envtest.node.wake import set_or_timeout

__all__ = ["CLUSTER_DOMAIN", "LOG_DIR_ANNOTATION", "NodeContext", "PodWorker"]

#: the kubelet's ``clusterDomain`` (the real-node environment's too): Pods' names end in it
CLUSTER_DOMAIN = "cluster.local"
ETC_HOSTS = "/etc/hosts"

log = logging.getLogger(__name__)

LOG_DIR_ANNOTATION = "pyctrl.dev/log-dir"
#: how often a running Pod's configMap/secret/downwardAPI volumes are brought up to date (the
#: kubelet does it on its periodic sync, about a minute; shorter here so tests see a change soon)
VOLUME_REFRESH_SECONDS = 2.0


@dataclass
class NodeContext:
    """What every Pod worker shares."""

    kube: Kube
    node_name: str
    state_dir: Path
    image_map: ImageMap
    addresses: AddressPool  # its node_ip is the Pods' hostIP
    claim_path: Callable[[str, str], str | None]
    capacity: Mapping[str, str]
    backoff_initial: float = 10.0
    backoff_max: float = 300.0


def _sub_path(volume: str, sub: str) -> str:
    """``volume/sub``, created as a directory when missing (the kubelet does the same)."""
    path = os.path.join(volume, sub)
    if not os.path.exists(path):
        os.makedirs(path, exist_ok=True)
    return path


def _owned(status: Mapping[str, Any]) -> tuple[Any, ...]:
    """The parts of a Pod status only the kubelet writes: phase and its conditions' statuses."""
    conditions = sorted(
        (c.get("type"), c.get("status"))
        for c in status.get("conditions") or []
        if c.get("type") in KUBELET_CONDITIONS
    )
    return status.get("phase"), tuple(conditions)


class PodWorker:
    def __init__(self, ctx: NodeContext, pod: dict[str, Any]) -> None:
        self.ctx, self.pod = ctx, pod
        meta = pod["metadata"]
        self.uid, self.namespace, self.name = meta["uid"], meta["namespace"], meta["name"]
        self.pod_dir = ctx.state_dir / "pods" / f"{self.namespace}_{self.name}_{self.uid}"
        self.pod_ip = ""
        self.start_time = pod.get("status", {}).get("startTime") or now_rfc3339()
        self.volume_paths: dict[str, str] = {}
        self.sandbox_ready = False
        self.terminating = False
        self.removed = False
        self._wake = asyncio.Event()
        self._dirty = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._written: dict[str, Any] | None = None
        policy = pod["spec"].get("restartPolicy", "Always")
        old = {s["name"]: s for s in pod.get("status", {}).get("containerStatuses") or []}

        def make(spec: Mapping[str, Any], restart_policy: str) -> Container:
            previous = old.get(spec["name"], {})
            state = previous.get("state", {})
            ran = bool("running" in state or "terminated" in state or previous.get("lastState"))
            count = previous.get("restartCount", 0) + 1 if ran else 0
            backoff = Backoff(ctx.backoff_initial, ctx.backoff_max)
            return Container(spec, self, restart_policy=restart_policy, backoff=backoff, restart_count=count)

        self.init_containers = [
            make(c, "Never" if policy == "Never" else "OnFailure")
            for c in pod["spec"].get("initContainers") or []
        ]
        self.containers = [make(c, policy) for c in pod["spec"].get("containers", [])]

    # -- events from the agent -----------------------------------------------------------------
    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        if self._written is not None and _owned(pod.get("status", {})) != _owned(self._written):
            # Someone else changed what the kubelet owns (the node lifecycle controller marks the
            # Pods of an unreachable node NotReady): write the node's view again, as the kubelet's
            # status manager does.
            self._written = None
            self._dirty.set()
        self._wake.set()

    def remove(self) -> None:
        self.removed = True
        self._wake.set()

    def poke(self) -> None:
        self._wake.set()

    @property
    def measured(self) -> list[Container]:
        """Every container of the Pod, init containers first (the resource metrics' subjects)."""
        return self.init_containers + self.containers

    def container(self, name: str) -> Container | None:
        return next((c for c in self.init_containers + self.containers if c.name == name), None)

    @property
    def deleting(self) -> bool:
        return self.removed or bool(self.pod["metadata"].get("deletionTimestamp"))

    async def _wait(self, done: Callable[[], bool], retry: float | None = None) -> None:
        while not done():
            self._wake.clear()
            await set_or_timeout(self._wake, retry)
            if retry is not None:
                return

    # -- ContainerHost -------------------------------------------------------------------------
    def status_changed(self) -> None:
        self._dirty.set()

    async def flush_status(self) -> None:
        await self._write_status()

    def grace_period(self) -> float:
        return float(self.pod["spec"].get("terminationGracePeriodSeconds", 30))

    async def launch_for(self, spec: Mapping[str, Any]) -> Launch:
        server = urlsplit(self.ctx.kube.host)
        port = str(server.port or 443)
        hostname = (self.pod["spec"].get("hostname") or self.name)[:63]
        image = self.ctx.image_map.config_for(str(spec.get("image", "")))
        base = {
            "PATH": DEFAULT_PATH,
            "HOSTNAME": hostname,
            "HOME": home_for(_run_as_user(self.pod["spec"], spec)),
            "KUBERNETES_SERVICE_HOST": server.hostname or "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": port,
            "KUBERNETES_SERVICE_PORT_HTTPS": port,
            **dict(image.env),  # the image's ENV; the container's env overrides it
        }
        facts = PodFacts(self.pod, self.pod_ip, self.ctx.addresses.node_ip, self.ctx.capacity)
        env = await build_env(spec, facts, self._lookup, base)
        expanded = dict(
            spec,
            command=[expand(str(c), env) for c in spec.get("command") or []],
            args=[expand(str(a), env) for a in spec.get("args") or []],
        )
        executable, argv = resolve_argv(image, expanded, env)
        security = {**(self.pod["spec"].get("securityContext") or {}), **(spec.get("securityContext") or {})}
        verify_run_as_non_root(security, f"{self.namespace}/{self.name}", str(spec["name"]))
        try:
            user = credentials_for(self.pod["spec"], spec)
        except ValueError as exc:
            raise ContainerConfigError(str(exc)) from None
        api_data = {
            v["name"]
            for v in self.pod["spec"].get("volumes") or []
            if {"configMap", "secret", "downwardAPI", "projected"} & set(v)
        }
        mounts = []
        for vm in spec.get("volumeMounts") or []:
            source = self.volume_paths[vm["name"]]
            sub = vm.get("subPath") or expand(vm.get("subPathExpr", ""), env)
            if sub:
                source = _sub_path(source, sub)
            readonly = bool(vm.get("readOnly")) or vm["name"] in api_data  # as the kubelet does
            mounts.append(Mount(source, vm["mountPath"], readonly))
        # the image's own files stay visible above a volume mounted over one of their parents
        for path in image_paths_under(image, executable, [m.target for m in mounts]):
            mounts.append(Mount(path, path, True))
        name = spec["name"]
        termination_log = self.pod_dir / f"{name}.termination-log"
        termination_log.parent.mkdir(parents=True, exist_ok=True)
        termination_log.write_bytes(b"")  # each start begins with no message
        termination_log.chmod(0o666)  # the kubelet's mode: writable whatever user the container is
        mounts.append(
            Mount(str(termination_log), spec.get("terminationMessagePath") or "/dev/termination-log")
        )
        if not self.pod["spec"].get("hostNetwork") and all(m.target != ETC_HOSTS for m in mounts):
            mounts.append(Mount(str(self._managed_hosts(hostname)), ETC_HOSTS))
        return Launch(
            executable=executable,
            argv=argv,
            env=env,
            log_path=self.pod_dir / f"{name}.log",
            root=self.pod_dir / "rootfs",
            spec_path=self.pod_dir / f".{name}.sandbox.json",
            mounts=mounts,
            workdir=spec.get("workingDir"),
            hostname=hostname,
            termination_log=termination_log,
            read_only_root=bool(security.get("readOnlyRootFilesystem")),
            no_new_privs=security.get("allowPrivilegeEscalation") is False,
            user=user,
        )

    def _managed_hosts(self, hostname: str) -> Path:
        """The Pod's ``/etc/hosts`` (kubelet ``managedHostsFileContent``), written once."""
        path = self.pod_dir / "etc-hosts"
        if path.exists():
            return path
        spec = self.pod["spec"]
        lines = [
            "# Kubernetes-managed hosts file.",
            "127.0.0.1\tlocalhost",
            "::1\tlocalhost ip6-localhost ip6-loopback",
            "fe00::0\tip6-localnet",
            "fe00::0\tip6-mcastprefix",
            "fe00::1\tip6-allnodes",
            "fe00::2\tip6-allrouters",
        ]
        if spec.get("subdomain"):
            fqdn = f"{hostname}.{spec['subdomain']}.{self.namespace}.svc.{CLUSTER_DOMAIN}"
            lines.append(f"{self.pod_ip}\t{fqdn}\t{hostname}")
        else:
            lines.append(f"{self.pod_ip}\t{hostname}")
        if aliases := spec.get("hostAliases"):
            lines += ["", "# Entries added by HostAliases."]
            lines += [f"{a['ip']}\t" + "\t".join(a.get("hostnames") or []) for a in aliases]
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o644)
        return path

    async def _lookup(self, kind: str, namespace: str, name: str) -> dict[str, bytes] | None:
        plural = "configmaps" if kind == "ConfigMap" else "secrets"
        try:
            obj = await self.ctx.kube.get(f"/api/v1/namespaces/{namespace}/{plural}/{name}")
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return decode_data(obj, kind)

    async def _request_token(
        self, namespace: str, sa: str, *, audience: str | None, expiration: int, pod: str, uid: str
    ) -> str:
        spec: dict[str, Any] = {
            "expirationSeconds": expiration,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid},
        }
        if audience:
            spec["audiences"] = [audience]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        answer = await self.ctx.kube.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token", body=body
        )
        return str(answer["status"]["token"])

    # -- status --------------------------------------------------------------------------------
    def _status(self) -> dict[str, Any]:
        current = self.pod.get("status", {})
        mine = (self._written or current).get("conditions") or []
        conditions = [c for c in current.get("conditions") or [] if c.get("type") not in KUBELET_CONDITIONS]
        conditions += [c for c in mine if c.get("type") in KUBELET_CONDITIONS]
        return pod_status(
            {"spec": self.pod["spec"], "status": {"conditions": conditions}},
            init_statuses=[c.status() for c in self.init_containers],
            statuses=[c.status() for c in self.containers],
            sandbox_ready=self.sandbox_ready,
            pod_ip=self.pod_ip or None,
            host_ip=self.ctx.addresses.node_ip,
            start_time=self.start_time,
            terminating=self.terminating,
        )

    async def _write_status(self) -> bool:
        """Write the current status if it changed; False when the write failed (retry later)."""
        if self.removed:
            return True
        async with self._write_lock:
            status = self._status()
            if status == self._written:
                return True
            path = f"/api/v1/namespaces/{self.namespace}/pods/{self.name}/status"
            try:
                await self.ctx.kube.patch(path, {"metadata": {"uid": self.uid}, "status": status})
                self._written = status
                return True
            except ApiError as exc:
                if exc.code in (404, 409, 422):  # gone, or replaced by a Pod of the same name
                    return True
                log.warning("pod %s/%s: writing status failed: %s", self.namespace, self.name, exc)
            except (OSError, TimeoutError) as exc:
                log.warning("pod %s/%s: writing status failed: %s", self.namespace, self.name, exc)
            self._dirty.set()
            return False

    async def _status_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            ok = await self._write_status()
            # Coalesce bursts (several containers changing at once); back off while writes fail.
            await asyncio.sleep(0.05 if ok else 1.0)

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> None:
        status_task = asyncio.create_task(self._status_loop())
        try:
            await self._run()
        finally:
            # Whatever ended the worker (an error included), no process of the Pod survives it.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.stop(2.0, pre_stop=False))
            status_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await status_task
            self.ctx.addresses.release(self.uid)

    async def _run(self) -> None:
        if self.pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            await self._wait(lambda: self.deleting)
            await self._delete()
            return
        old_ip = self.pod.get("status", {}).get("podIP")
        if self.pod["spec"].get("hostNetwork"):
            self.pod_ip = self.ctx.addresses.node_ip
        elif old_ip and self.ctx.addresses.reserve(self.uid, old_ip):
            self.pod_ip = old_ip
        else:
            self.pod_ip = self.ctx.addresses.allocate(self.uid)
        self.pod_dir.mkdir(parents=True, exist_ok=True)
        log.info(
            "pod %s/%s (%s): ip %s, dir %s", self.namespace, self.name, self.uid, self.pod_ip, self.pod_dir
        )
        await self._annotate()
        await self._setup_volumes()
        if not self.deleting:
            self.sandbox_ready = True
            await self._run_containers()
        await self._terminate()

    async def _annotate(self) -> None:
        if self.pod["metadata"].get("annotations", {}).get(LOG_DIR_ANNOTATION) == str(self.pod_dir):
            return
        body = {"metadata": {"uid": self.uid, "annotations": {LOG_DIR_ANNOTATION: str(self.pod_dir)}}}
        with contextlib.suppress(ApiError, OSError, TimeoutError):
            await self.ctx.kube.patch(f"/api/v1/namespaces/{self.namespace}/pods/{self.name}", body)

    def _volume_context(self) -> VolumeContext:
        return VolumeContext(
            facts=PodFacts(self.pod, self.pod_ip, self.ctx.addresses.node_ip, self.ctx.capacity),
            lookup=self._lookup,
            request_token=self._request_token,
            claim_path=self.ctx.claim_path,
        )

    async def _setup_volumes(self) -> None:
        ctx = self._volume_context()
        while not self.deleting:
            try:
                self.volume_paths = await prepare_volumes(self.pod, self.pod_dir, ctx)
                return
            except (VolumeNotReady, ApiError, OSError) as exc:
                message = f"volumes not ready: {exc}"
                for c in self.init_containers + self.containers:
                    c.state = {"waiting": {"reason": "ContainerCreating", "message": message}}
                self.status_changed()
                log.info("pod %s/%s: %s", self.namespace, self.name, message)
            await self._wait(lambda: self.deleting, retry=2.0)

    async def _run_containers(self) -> None:
        for init in self.init_containers:
            task = init.start()
            task.add_done_callback(lambda _: self._wake.set())
            await self._wait(lambda: self.deleting or task.done())  # noqa: B023 (awaited in this iteration)
            if self.deleting or task.result() != 0:
                await self._wait(lambda: self.deleting)
                return
        for container in self.containers:
            container.start()
        self.status_changed()
        loop = asyncio.get_running_loop()
        next_refresh = loop.time() + VOLUME_REFRESH_SECONDS
        while not self.deleting:
            await self._wait(lambda: self.deleting, retry=max(0.0, next_refresh - loop.time()))
            if not self.deleting and loop.time() >= next_refresh:
                await self._refresh_volumes()
                next_refresh = loop.time() + VOLUME_REFRESH_SECONDS

    async def _refresh_volumes(self) -> None:
        try:
            changed = await refresh_volumes(self.pod, self.pod_dir, self._volume_context())
        except (ApiError, OSError, TimeoutError) as exc:  # the apiserver away: try again later
            log.debug("pod %s/%s: refreshing volumes failed: %s", self.namespace, self.name, exc)
            return
        if changed:
            log.info("pod %s/%s: volumes %s updated", self.namespace, self.name, ", ".join(changed))

    async def _terminate(self) -> None:
        meta = self.pod["metadata"]
        grace = float(meta.get("deletionGracePeriodSeconds", self.grace_period()))
        if self.removed:
            grace = min(grace, 2.0)
        log.info("pod %s/%s: stopping (grace %gs)", self.namespace, self.name, grace)
        self.terminating = True
        await self.stop(grace, pre_stop=True)
        await self._write_status()
        await self._delete()
        remove_pod_volumes(self.pod_dir)

    async def stop(self, grace: float, *, pre_stop: bool) -> None:
        """Stop every container (in parallel) and wait for them."""
        await asyncio.gather(
            *(c.stop(grace, pre_stop=pre_stop) for c in self.init_containers + self.containers)
        )

    async def _delete(self) -> None:
        """Delete the Pod object (grace 0, uid precondition), retrying until it is gone."""
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": self.uid},
        }
        delay = 0.5
        while not self.removed:
            try:
                await self.ctx.kube.request(
                    "DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{self.name}", body=body
                )
                log.info("pod %s/%s: deleted", self.namespace, self.name)
                return
            except ApiError as exc:
                if exc.code in (404, 409):  # gone already, or replaced by a Pod of the same name
                    return
                log.warning("pod %s/%s: delete failed: %s", self.namespace, self.name, exc)
            except (OSError, TimeoutError) as exc:
                log.warning("pod %s/%s: delete failed: %s", self.namespace, self.name, exc)
            await self._wait(lambda: self.removed, retry=delay)
            delay = min(delay * 2, 10.0)


def _run_as_user(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> int | None:
    value = (container.get("securityContext") or {}).get("runAsUser")
    if value is None:
        value = (pod_spec.get("securityContext") or {}).get("runAsUser")
    return value if isinstance(value, int) else None
