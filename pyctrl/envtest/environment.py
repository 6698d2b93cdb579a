"""A real local control plane for tests (controller-runtime ``pkg/envtest.Environment``).

``Environment.start()`` runs etcd, kube-apiserver (RBAC authorization on), kube-controller-manager
(all default controllers: statefulset, garbage collector, namespace, PV binder, PVC protection,
service accounts, disruption, node lifecycle, ...), kube-scheduler (which binds every Pod) and,
unless turned off, ``nodes`` local nodes that run Pods as local processes
(``pyctrl.envtest.node``), all on loopback, and returns once each is ready.

Guarantees:
- ``start`` returns only when ``/readyz`` passes, the controller manager and the scheduler are
  healthy, every node is Ready (and not tainted unreachable) and the given CRDs are Established;
  a failed start stops what it started and raises ``EnvtestError`` naming the component and its
  log file, with the log's last lines;
- ``stop`` stops every process it started (the nodes together first, etcd last) and returns once
  they are gone; an attached environment (the default) also dies with the Python process that
  started it;
- ``stop_node`` is a power loss (``_nodes.power_off``), ``start_node`` a reboot; a name the
  environment does not have, stopping a stopped node or starting a running one raise ``NodeError``
  and change nothing;
- a state directory records pids, ports and node names (``state.json``), so ``attach`` (the CLI)
  sees what a test started and vice versa: ``start`` on a directory whose control plane still runs
  raises ``AlreadyRunning``; one left by a killed run is recovered (survivors are stopped,
  certificates and etcd data reused);
- a preferred port that is taken is replaced by a free one.

``metrics_server=True`` also runs metrics-server behind the APIService ``v1beta1.metrics.k8s.io``
(``_metricsserver``): ``start`` then returns once that APIService is Available, and ``kubectl
top`` / HorizontalPodAutoscalers get the local nodes' resource metrics (a new Pod's within about
20 s). ``start_metrics_server`` / ``stop_metrics_server`` add or remove it on a running
environment (stopping removes the APIService first, so API discovery stays complete).

``runtime="kubelet"`` runs real nodes instead (``pyctrl.envtest.realnode``): the upstream kubelet
with containerd and runc, kube-proxy and CoreDNS, each node in its own namespaces; kube-apiserver
then listens on the host's address on the environment's bridge (not loopback), which the admin
kubeconfig names. See docs/real-node.md.

Differences from controller-runtime: envtest there runs no controller manager, no scheduler and no
node; here they run so StatefulSets create Pods, garbage collection works and Pods really run.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyctrl.envtest._binaries import bin_dir as find_bin_dir
from pyctrl.envtest._certs import Pki
from pyctrl.envtest._components import (
    SERVICE_CIDR,
    apiserver_args,
    controller_manager_args,
    etcd_args,
    etcd_healthy,
    insecure_ok,
    scheduler_args,
)
from pyctrl.envtest._conveniences import ClusterConveniences
from pyctrl.envtest._errors import AlreadyRunning, EnvtestError, NodeError
from pyctrl.envtest._http import AdminHTTP, ApiError, poll_until
from pyctrl.envtest._kubeconfig import write_kubeconfig
from pyctrl.envtest._metricsserver import (
    API_SERVICE,
    NAMESPACE,
    SERVICE,
    USER,
    MetricsServerError,
    api_service,
    endpoint_slice,
    metrics_server_args,
    metrics_server_bin,
    rbac_objects,
    service,
)
from pyctrl.envtest._nodes import node_args, node_names, power_off
from pyctrl.envtest._process import ManagedProcess, free_port, pid_alive, port_free, start_process
from pyctrl.envtest.realnode.addons import coredns_image, coredns_objects
from pyctrl.envtest.realnode.node import RealNodeError, RealNodes

__all__ = ["AlreadyRunning", "Environment", "EnvtestError", "NodeError"]

_CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
_NODE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
RUNTIMES = ("local", "kubelet")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n  | " + "\n  | ".join(text) if text else ""


class Environment(ClusterConveniences):
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler (+ local nodes) in
    ``state_dir``.

    ``state_dir`` defaults to a new temporary directory, removed by ``stop``. ``attached=False``
    (used by ``python -m pyctrl.envtest start``) lets the processes outlive this Python process.
    ``nodes`` local nodes run (default 1, named ``local-node``; more are ``local-node-1`` ..
    ``local-node-N`` over zones zone-a/b/c): ``node_names`` lists them, ``stop_node`` /
    ``start_node`` power one off and on again. ``runtime="kubelet"``: real nodes (kubelet,
    containerd, kube-proxy; named ``real-node`` / ``real-node-N``) and CoreDNS.
    ``metrics_server=True``: metrics-server and the metrics.k8s.io APIService (``kubectl top``).
    """

    def __init__(
        self,
        *,
        state_dir: Path | str | None = None,
        crd_directory_paths: Sequence[Path | str] = (),
        local_node: bool = True,
        nodes: int = 1,
        node_name: str | None = None,
        api_port: int | None = None,
        attached: bool = True,
        start_timeout: float = 90.0,
        runtime: str = "local",
        metrics_server: bool = False,
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
        self.runtime = runtime
        node_name = node_name or ("real-node" if runtime == "kubelet" else "local-node")
        self.node_names: list[str] = node_names(nodes, node_name) if local_node else []
        self._owns_dir = state_dir is None
        self.state_dir = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="pyctrl-envtest-"))
        self.crd_directory_paths = [Path(p) for p in crd_directory_paths]
        self.local_node = local_node
        self.metrics_server = metrics_server
        self.node_name = node_name
        self.attached = attached
        self.start_timeout = start_timeout
        self._preferred_api_port = api_port
        self.pki = Pki(self.state_dir / "pki")
        self.kubeconfig_path = self.state_dir / "kubeconfig"
        self.state_file = self.state_dir / "state.json"
        self.log_dir = self.state_dir / "logs"
        self.processes: dict[str, ManagedProcess] = {}
        self.ports: dict[str, int] = {}
        self.bin_dir: Path | None = None
        self._http: AdminHTTP | None = None
        self.api_host = "127.0.0.1"
        self.real: RealNodes | None = None
        if runtime == "kubelet":
            self.start_timeout = max(start_timeout, 300.0)  # the first start imports images

    # -- endpoints -----------------------------------------------------------------------------
    @property
    def server_url(self) -> str:
        return f"https://{self.api_host}:{self.ports['apiserver']}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['etcd']}"

    @property
    def http(self) -> AdminHTTP:
        """Synchronous admin access (for envtest itself and simple test set-up)."""
        if self._http is None:
            raise EnvtestError("environment not started")
        return self._http

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.processes.items()}

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> Environment:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._recover_stale()
        self.bin_dir = find_bin_dir()
        if self.attached:
            atexit.register(self.stop)
        try:
            extra_hosts: tuple[str, ...] = ()
            if self.runtime == "kubelet":
                self.real = RealNodes(self.state_dir, self.pki)
                try:
                    plan = self.real.prepare()
                except (RealNodeError, OSError) as exc:
                    raise EnvtestError(f"real nodes: {exc}") from exc
                self.api_host = plan.host_ip
                extra_hosts = self.real.apiserver_hosts()
            self.pki.ensure(extra_hosts)
            self._start_etcd()
            self._http = None
            self.start_apiserver()
            self._write_admin_kubeconfig()
            self._start_controller_manager()
            self._start_scheduler()
            self._start_nodes(self.node_names)
            self._save_state()
            if self.real is not None and self.node_names:
                self._start_cluster_dns()
            if self.crd_directory_paths:
                self.install_crds(self.crd_directory_paths)
            if self.metrics_server:
                self.start_metrics_server()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process (reverse start order); remove the state dir if envtest made it."""
        if self.attached:
            atexit.unregister(self.stop)
        errors = []
        metrics = self.processes.pop("metrics-server", None)
        if metrics is not None:  # first: it scrapes the nodes and answers for the apiserver
            try:
                metrics.stop(grace=10.0)
            except RuntimeError as exc:
                errors.append(str(exc))
        nodes = [self.processes.pop(n) for n in self.node_names if n in self.processes]
        if self.real is not None:  # real nodes: powered off (their PID namespaces die at once)
            for node in nodes:
                try:
                    self.real.power_off(node, self.node_names.index(node.name) + 1)
                except RuntimeError as exc:
                    errors.append(str(exc))
            nodes = []
        for node in nodes:  # all at once: each stops its Pods (SIGTERM, 5 s grace, SIGKILL)
            node.terminate()
        control_plane = [self.processes.pop(n) for n in reversed(_CONTROL_PLANE) if n in self.processes]
        for proc in [*nodes, *control_plane]:
            try:
                proc.stop(grace=30.0 if proc in nodes else 10.0)
            except RuntimeError as exc:
                errors.append(str(exc))
        if self.real is not None:
            try:
                self.real.teardown()
            except RuntimeError as exc:
                errors.append(str(exc))
        self.state_file.unlink(missing_ok=True)
        if self._owns_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        if errors:
            raise EnvtestError("; ".join(errors))

    def __enter__(self) -> Environment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @classmethod
    def attach(cls, state_dir: Path | str) -> Environment:
        """An ``Environment`` for a control plane started detached in ``state_dir``."""
        env = cls(state_dir=state_dir, attached=False)
        state = env._load_state()
        env.node_names = state.get("nodes", env.node_names)
        env.real = _recorded_real_nodes(env.state_dir, env.pki, state)
        if env.real is not None:
            env.runtime = "kubelet"
        if env.ports:
            env._connect()
        return env

    def running(self) -> bool:
        """True when every recorded process is alive."""
        return bool(self.processes) and all(p.alive() for p in self.processes.values())

    # -- components ----------------------------------------------------------------------------
    def _bin(self, name: str) -> str:
        assert self.bin_dir is not None
        return str(self.bin_dir / name)

    def _launch(self, name: str, argv: list[str]) -> ManagedProcess:
        log = self.log_dir / f"{name}.log"
        fds = self.real.lock_fds if self.real is not None else ()
        try:
            proc = start_process(name, argv, log, attached=self.attached, pass_fds=fds)
        except RuntimeError as exc:
            raise EnvtestError(str(exc)) from exc
        self.processes[name] = proc
        return proc

    def _wait(self, proc: ManagedProcess, what: str, check: Any) -> None:
        def ready() -> bool:
            if not proc.alive():
                raise EnvtestError(
                    f"{proc.name} exited with code {proc.exit_code()} while waiting for {what}; "
                    f"log: {proc.log_path}{_tail(proc.log_path)}"
                )
            return bool(check())

        try:
            poll_until(what, ready, self.start_timeout, on_timeout=lambda: f"; log: {proc.log_path}")
        except TimeoutError as exc:
            raise EnvtestError(f"{proc.name}: {exc}{_tail(proc.log_path)}") from exc

    def _start_etcd(self) -> None:
        used: set[int] = set()
        etcd = self.ports.get("etcd")
        self.ports["etcd"] = free_port(etcd, avoid=used)
        used.add(self.ports["etcd"])
        self.ports["etcd_peer"] = free_port(self.ports.get("etcd_peer"), avoid=used)
        peer = f"http://127.0.0.1:{self.ports['etcd_peer']}"
        proc = self._launch("etcd", etcd_args(self._bin("etcd"), self.state_dir, self.etcd_url, peer))
        self._wait(proc, "etcd /health", lambda: etcd_healthy(self.etcd_url))

    def start_apiserver(self) -> None:
        """Start kube-apiserver (again) and wait for ``/readyz``; keeps its port across restarts."""
        previous = self.ports.get("apiserver")
        if previous is not None:  # a restart: give the old listener a moment to go away
            with contextlib.suppress(TimeoutError):
                poll_until(f"port {previous} to be free", lambda: port_free(previous, self.api_host), 10)
        avoid = {v for k, v in self.ports.items() if k != "apiserver"}
        self.ports["apiserver"] = free_port(previous or self._preferred_api_port, self.api_host, avoid=avoid)
        if previous is not None and self.ports["apiserver"] != previous:
            self._write_admin_kubeconfig()  # clients (the node, tests) re-read it
            for user in (self.state_dir / "users").glob("*.kubeconfig"):
                text = user.read_text().replace(
                    f"{self.api_host}:{previous}", f"{self.api_host}:{self.ports['apiserver']}"
                )
                user.write_text(text)
        plan = self.real.plan if self.real is not None else None
        args = apiserver_args(
            self._bin("kube-apiserver"), self.state_dir, self.pki, self.etcd_url, self.ports["apiserver"],
            host=self.api_host,
            service_cidr=SERVICE_CIDR if plan is None else plan.service_cidr,
            real_nodes=plan is not None,
        )  # fmt: skip
        proc = self._launch("kube-apiserver", args)
        self._connect()
        self._wait(proc, "kube-apiserver /readyz", self._apiserver_ready)
        if self.state_file.exists():  # a restart: record the new pid, or stop would miss it
            self._save_state()

    def _admin_cert(self) -> tuple[Path, Path]:
        """The (cert, key) of the ``admin`` user in ``system:masters`` (issued once per state dir)."""
        return self.pki.client_cert("admin", ("system:masters",))

    def _write_admin_kubeconfig(self) -> None:
        cert, key = self._admin_cert()
        write_kubeconfig(
            self.kubeconfig_path,
            server=self.server_url,
            ca=self.pki.ca_cert,
            cert=cert,
            key=key,
            user="admin",
        )

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only (etcd and the rest keep running); see ``start_apiserver``."""
        proc = self.processes.pop("kube-apiserver", None)
        if proc is not None:
            proc.stop()
        if self.state_file.exists():
            self._save_state()

    def _connect(self) -> None:
        cert, key = self._admin_cert()
        self._http = AdminHTTP(self.server_url, self.pki.ca_cert, cert, key)

    def _apiserver_ready(self) -> bool:
        try:
            return bool(self.http.request("GET", "/readyz", timeout=2) == "ok")
        except (ApiError, OSError):
            return False

    def _start_controller_manager(self) -> None:
        self.ports["controller_manager"] = free_port(avoid=set(self.ports.values()))
        port = self.ports["controller_manager"]
        plan = self.real.plan if self.real is not None else None
        args = controller_manager_args(
            self._bin("kube-controller-manager"), self.state_dir, self.pki, self.kubeconfig_path, port,
            service_cidr=SERVICE_CIDR if plan is None else plan.service_cidr,
            real_nodes=plan is not None,
        )  # fmt: skip
        proc = self._launch("kube-controller-manager", args)
        url = f"https://127.0.0.1:{self.ports['controller_manager']}/healthz"
        self._wait(proc, "kube-controller-manager /healthz", lambda: insecure_ok(url))

    def _start_scheduler(self) -> None:
        self.ports["scheduler"] = free_port(avoid=set(self.ports.values()))
        port = self.ports["scheduler"]
        args = scheduler_args(self._bin("kube-scheduler"), self.state_dir, self.kubeconfig_path, port)
        proc = self._launch("kube-scheduler", args)
        url = f"https://127.0.0.1:{port}/healthz"
        self._wait(proc, "kube-scheduler /healthz", lambda: insecure_ok(url))

    def _start_nodes(self, names: Sequence[str]) -> None:
        """Launch the nodes together; return once each has registered anew (a new boot ID: the
        Node of a stopped one may still look Ready) and is Ready and untainted by the node
        lifecycle controller (a restarted node's unreachable taint is gone)."""
        if self.real is not None:
            self._start_real_nodes(names)
            return
        if names and importlib.util.find_spec("pyctrl.envtest.node") is None:
            raise EnvtestError(
                "the local node (pyctrl.envtest.node) is not installed; start with local_node=False "
                "(PYCTRL_ENVTEST_LOCAL_NODE=0 for the pytest fixture, --no-local-node for the CLI)"
            )
        booted = {name: self._boot_id(name) for name in names}
        launched = []
        for name in names:
            args = node_args(self.kubeconfig_path, self.state_dir, name, self.node_names.index(name))
            launched.append(self._launch(name, args))
        for proc in launched:
            ready = functools.partial(self._node_ready, proc.name, booted[proc.name])
            self._wait(proc, f"node {proc.name} Ready", ready)

    def _start_real_nodes(self, names: Sequence[str]) -> None:
        """Real nodes: each started, given its eth0, then waited for together."""
        assert self.real is not None
        try:
            self.real.ensure_assets()
        except RealNodeError as exc:
            raise EnvtestError(f"real nodes: {exc}") from exc
        booted = {name: self._boot_id(name) for name in names}
        launched = []
        for name in names:
            index = self.node_names.index(name) + 1
            argv = self.real.node_argv(name, index, self.node_names, self.server_url)
            proc = self._launch(name, argv)
            launched.append(proc)
            try:
                self.real.attach(proc, index)
            except RealNodeError as exc:
                raise EnvtestError(f"{exc}{_tail(proc.log_path)}") from exc
        self._route_services()
        for proc in launched:
            ready = functools.partial(self._node_ready, proc.name, booted[proc.name])
            self._wait(proc, f"node {proc.name} Ready", ready)

    def _route_services(self) -> None:
        assert self.real is not None
        self.real.route_services(
            [self.node_names.index(n) + 1 for n in self.node_names if n in self.processes]
        )

    def _start_cluster_dns(self) -> None:
        """CoreDNS (``realnode.addons``), returning once its Deployment has a Ready Pod."""
        assert self.real is not None
        assert self.real.plan is not None
        for path, obj in coredns_objects(self.real.plan, coredns_image()):
            try:
                self.http.request("POST", path, obj)
            except ApiError as exc:
                if exc.code != 409:  # a restarted environment: already there
                    raise

        def available() -> bool:
            dep = self.http.get("/apis/apps/v1/namespaces/kube-system/deployments/coredns")
            return bool((dep.get("status") or {}).get("readyReplicas"))

        poll_until("CoreDNS Ready", available, self.start_timeout)

    def _get_node(self, name: str) -> dict[str, Any] | None:
        try:
            node: dict[str, Any] = self.http.get(f"/api/v1/nodes/{name}")
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return node

    def _boot_id(self, name: str) -> str | None:
        node = self._get_node(name)
        return None if node is None else (node.get("status") or {}).get("nodeInfo", {}).get("bootID")

    def _node_ready(self, name: str, old_boot_id: str | None) -> bool:
        node = self._get_node(name)
        if node is None or (node.get("status") or {}).get("nodeInfo", {}).get("bootID") == old_boot_id:
            return False
        conditions = (node.get("status") or {}).get("conditions") or []
        taints = (node.get("spec") or {}).get("taints") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and not any(
            t.get("key") in _NODE_TAINTS for t in taints
        )

    # -- metrics-server ------------------------------------------------------------------------
    def _apply(self, collection: str, obj: dict[str, Any]) -> Any:
        """Server-side apply ``obj`` (field manager ``envtest``) into ``collection``."""
        path = f"{collection}/{obj['metadata']['name']}?fieldManager=envtest&force=true"
        return self.http.request("PATCH", path, obj, content_type="application/apply-patch+yaml")

    def start_metrics_server(self) -> None:
        """Run metrics-server and register its APIService (see ``_metricsserver``); returns once
        the APIService is Available. Builds the binary first when it is missing (progress on
        stderr)."""
        if "metrics-server" in self.processes:
            raise EnvtestError("metrics-server is already running in this environment")
        if self.real is not None:
            raise EnvtestError(
                "metrics-server runs with local nodes only: it listens on its Service's ClusterIP, "
                "which is a loopback address only there (real nodes: see docs/guide/autoscaling.md)"
            )
        try:
            binary = metrics_server_bin()
        except MetricsServerError as exc:
            raise EnvtestError(str(exc)) from exc
        self.metrics_server = True
        for collection, obj in rbac_objects():
            self._apply(collection, obj)
        port = free_port(self.ports.get("metrics_server"), avoid=set(self.ports.values()))
        svc = self._apply(f"/api/v1/namespaces/{NAMESPACE}/services", service(port))
        host = svc["spec"]["clusterIP"]
        if not port_free(port, host):  # another environment's ClusterIP:port (a shared range)
            port = free_port(host=host, avoid=set(self.ports.values()))
            svc = self._apply(f"/api/v1/namespaces/{NAMESPACE}/services", service(port))
        self.ports["metrics_server"] = port
        self._apply(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices", endpoint_slice(port))
        cert_dir = self.state_dir / "pki" / "metrics-server"
        self.pki.issue_serving_cert(cert_dir, (f"{SERVICE}.{NAMESPACE}.svc", host))
        kubeconfig = self.add_user(USER)
        args = metrics_server_args(
            binary, kubeconfig=kubeconfig, ca=self.pki.ca_cert, cert_dir=cert_dir, host=host, port=port
        )
        proc = self._launch("metrics-server", args)
        self._save_state()
        self._wait(proc, "metrics-server /livez", lambda: insecure_ok(f"https://{host}:{port}/livez"))
        self._apply(
            "/apis/apiregistration.k8s.io/v1/apiservices", api_service(port, self.pki.ca_cert.read_bytes())
        )
        self._wait(proc, f"APIService {API_SERVICE} Available", self._metrics_api_available)

    def _metrics_api_available(self) -> bool:
        found = self.http.get(f"/apis/apiregistration.k8s.io/v1/apiservices/{API_SERVICE}")
        conditions = (found.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)

    def stop_metrics_server(self) -> None:
        """Remove the APIService (so discovery does not report an unavailable group), then stop
        metrics-server. Nothing to do when it is not running."""
        proc = self.processes.pop("metrics-server", None)
        if proc is None:
            return
        self.metrics_server = False
        try:
            self.http.request("DELETE", f"/apis/apiregistration.k8s.io/v1/apiservices/{API_SERVICE}")
        except ApiError as exc:
            if exc.code != 404:
                raise
        try:
            proc.stop(grace=10.0)
        except RuntimeError as exc:
            raise EnvtestError(str(exc)) from exc
        finally:
            self._save_state()

    # -- nodes ---------------------------------------------------------------------------------
    def node_dir(self, name: str) -> Path:
        """Node ``name``'s state: its Pods' directories (logs) under ``pods/``."""
        self._known_node(name)
        return self.state_dir / "nodes" / name

    def _known_node(self, name: str) -> None:
        if name not in self.node_names:
            known = ", ".join(self.node_names) or "none (started with local_node=False)"
            raise NodeError(f"no node {name!r} in this environment; its nodes: {known}")

    def stop_node(self, name: str) -> None:
        """Power node ``name`` off: its process and every container on it SIGKILLed at once, no
        graceful shutdown. Its Lease stops being renewed; kube-controller-manager marks it NotReady
        after ``--node-monitor-grace-period`` and taints it, as in a real cluster."""
        self._known_node(name)
        proc = self.processes.get(name)
        if proc is None:
            raise NodeError(f"node {name!r} is already stopped")
        try:
            if self.real is not None:
                self.real.power_off(proc, self.node_names.index(name) + 1)
            else:
                power_off(proc, self.node_dir(name))
        except RuntimeError as exc:
            raise EnvtestError(str(exc)) from exc
        del self.processes[name]
        if self.real is not None:
            self._route_services()
        self._save_state()

    def start_node(self, name: str) -> None:
        """Boot node ``name`` again after ``stop_node``: its old containers are gone; it finds the
        Pods still bound to it and runs them anew, as a kubelet does after a reboot. Returns once
        the node is Ready and its unreachable taint removed."""
        self._known_node(name)
        if name in self.processes:
            raise NodeError(f"node {name!r} is already running (pid {self.processes[name].pid})")
        try:
            self._start_nodes([name])
        finally:
            self._save_state()

    # -- state file ----------------------------------------------------------------------------
    def _save_state(self) -> None:
        state = {
            "runtime": self.runtime,
            "api_host": self.api_host,
            "slot": None if self.real is None or self.real.plan is None else self.real.plan.slot,
            "ports": self.ports,
            "bin_dir": str(self.bin_dir),
            "nodes": self.node_names,
            "processes": [
                {"name": p.name, "argv": p.argv, "pid": p.pid, "log": str(p.log_path)}
                for p in self.processes.values()
            ],
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)

    def _load_state(self) -> dict[str, Any]:
        """Ports, binaries and processes from the state file; the whole state (``{}`` if none)."""
        try:
            state: dict[str, Any] = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise EnvtestError(f"{self.state_file} is corrupt: {exc}") from exc
        self.ports = {k: int(v) for k, v in state.get("ports", {}).items()}
        self.api_host = state.get("api_host", self.api_host)
        self.bin_dir = Path(state["bin_dir"]) if state.get("bin_dir") else None
        for p in state.get("processes", []):
            self.processes[p["name"]] = ManagedProcess(p["name"], p["argv"], Path(p["log"]), int(p["pid"]))
        return state

    def _recover_stale(self) -> None:
        """Refuse a running control plane; stop the survivors of a killed one (and remove what its
        real nodes left on the host, unless another environment holds that slot by now)."""
        state = self._load_state()
        if not self.processes:
            return
        if self.running():
            raise AlreadyRunning(
                f"a control plane is already running in {self.state_dir} "
                f"(pids {sorted(self.pids().values())}); kubeconfig: {self.kubeconfig_path}"
            )
        for proc in reversed(list(self.processes.values())):
            if pid_alive(proc.pid, proc.argv[0]):
                proc.stop()
        self.processes.clear()
        stale = _recorded_real_nodes(self.state_dir, self.pki, state)
        if stale is not None:
            stale.recover(len(state.get("nodes", [])))
        self.state_file.unlink(missing_ok=True)


def _recorded_real_nodes(state_dir: Path, pki: Pki, state: dict[str, Any]) -> RealNodes | None:
    """The real nodes a state file records (``runtime: kubelet``), or None."""
    if state.get("runtime") != "kubelet" or state.get("slot") is None:
        return None
    return RealNodes(state_dir, pki, slot=int(state["slot"]))
