"""The kubelet's HTTPS API on the local node (kubelet ``pkg/kubelet/server``), as the apiserver
uses it for ``kubectl logs`` and ``kubectl exec``.

Served on the node's own address (``127.<block>.0.1``) at port 10250 when that is free, else at a
free port; the Node advertises it in ``status.daemonEndpoints.kubeletEndpoint.Port`` and the
apiserver (``--kubelet-preferred-address-types=InternalIP``) dials it there.

Guarantees:
- TLS with a serving certificate for the node's address signed by the cluster CA (so the
  apiserver's ``--kubelet-certificate-authority`` verifies it); a client must present a
  certificate signed by that CA (``--client-ca-file`` semantics: CN is the user, O the groups);
- every request is authorized as the kubelet's ``--authorization-mode=Webhook`` does: a
  SubjectAccessReview for the user on ``nodes/proxy`` of this node (the subresource the kubelet
  maps these paths to; verb ``get`` for GET, ``create`` otherwise) — 403 when denied;
- ``GET /containerLogs/{namespace}/{pod}/{container}`` with ``follow``, ``previous``,
  ``tailLines`` and ``limitBytes`` answers the container's log (``logs.py``): the latest instance,
  or the one before with ``previous=true`` (400 when there is none, as the kubelet says);
  ``follow=true`` streams until the instance ends or the client goes away; ``timestamps``,
  ``sinceSeconds`` and ``sinceTime`` are refused with 400 (the node keeps no per-line times);
  404 for a Pod not on this node, 400 for a container not in the Pod;
- ``/exec/{namespace}/{pod}/{container}?command=...`` runs a command in the container over
  WebSocket (``streams.py``); 400 when the container is not running;
- ``GET /pods`` lists the Pods this node runs (a PodList), ``GET /healthz`` answers ``ok``;
- ``GET /metrics/resource`` answers the resource metrics of the node and its running containers
  (``resourcemetrics.py``), what metrics-server scrapes; as the kubelet does, it is authorized on
  the ``nodes/metrics`` subresource (``system:metrics-server``'s ClusterRole grants it), the other
  paths on ``nodes/proxy``;
- attach and port-forward answer 501 with why (see ``docs/local-node.md``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import NameOID

from pyctrl.envtest._certs import Pki
from pyctrl.envtest.node import logs, resourcemetrics
from pyctrl.envtest.node.kube import ApiError, Kube
from pyctrl.envtest.node.streams import ExecTarget, serve_exec

__all__ = ["KubeletServer", "PodView"]

log = logging.getLogger(__name__)

DEFAULT_PORT = 10250
_FOLLOW_POLL = 0.2  # seconds between two looks at a followed log file (the kubelet polls too)


class ContainerView(ExecTarget, Protocol):
    def running(self) -> bool: ...


class PodView(resourcemetrics.MeasuredPod, Protocol):
    """What the API needs from a Pod the node runs."""

    pod: dict[str, Any]
    pod_dir: Path

    def container(self, name: str) -> ContainerView | None: ...


Pods = Callable[[], list[PodView]]


class _HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _int_param(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise _HTTPError(400, f"{name}={raw!r} is not an integer") from None
    if value < 0:
        raise _HTTPError(400, f"{name} must be >= 0, got {value}")
    return value


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")


def _identity(request: web.Request) -> tuple[str, list[str]]:
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport else None
    der = ssl_object.getpeercert(binary_form=True) if ssl_object else None
    if not der:
        raise _HTTPError(401, "Unauthorized: no client certificate")
    subject = x509.load_der_x509_certificate(der).subject
    user = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    groups = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if not user:
        raise _HTTPError(401, "Unauthorized: the client certificate has no common name")
    return user[0], groups


class KubeletServer:
    def __init__(self, kube: Kube, node_name: str, ip: str, pods: Pods) -> None:
        self.kube, self.node_name, self.ip, self.pods = kube, node_name, ip, pods
        self.port = 0
        self._runner: web.AppRunner | None = None
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/pods", self._pods)
        app.router.add_get("/metrics/resource", self._resource_metrics)
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        app.router.add_route("*", "/exec/{namespace}/{pod}/{container}", self._exec)
        for prefix in ("attach", "portForward", "run"):
            app.router.add_route("*", f"/{prefix}/{{tail:.*}}", self._unsupported)
        self.app = app

    def ssl_context(self, pki: Pki, cert_dir: Path) -> ssl.SSLContext:
        """Issue the serving certificate for the node's address; require client certificates."""
        pki.issue_serving_cert(cert_dir, (self.ip, self.node_name))
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
        ctx.load_cert_chain(str(cert_dir / "tls.crt"), str(cert_dir / "tls.key"))
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    async def start(self, ctx: ssl.SSLContext) -> int:
        """Listen on the node's address (port 10250 if free); return the port."""
        ipaddress.IPv4Address(self.ip)  # a bad address fails here, not in the event loop
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        for port in (DEFAULT_PORT, 0):
            try:
                await web.TCPSite(self._runner, self.ip, port, ssl_context=ctx).start()
            except OSError as exc:
                if port == 0:
                    raise
                log.info("kubelet API: %s:%d is taken (%s); using a free port", self.ip, port, exc)
                continue
            self.port = int(self._runner.addresses[0][1])
            break
        log.info("kubelet API on https://%s:%d", self.ip, self.port)
        return self.port

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- authentication and authorization -----------------------------------------------------
    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            user, groups = _identity(request)
            await self._authorize(user, groups, request)
            response: web.StreamResponse = await handler(request)
            return response
        except _HTTPError as exc:
            return web.Response(status=exc.status, text=exc.message)

    async def _authorize(self, user: str, groups: list[str], request: web.Request) -> None:
        verb = "get" if request.method in ("GET", "HEAD") else "create"
        # kubelet server/auth.go: /metrics and below map to nodes/metrics, the rest to nodes/proxy.
        subresource = (
            "metrics" if request.path == "/metrics" or request.path.startswith("/metrics/") else "proxy"
        )
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": groups,
                "resourceAttributes": {
                    "verb": verb,
                    "resource": "nodes",
                    "subresource": subresource,
                    "name": self.node_name,
                },
            },
        }
        try:
            answer = await self.kube.request(
                "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review
            )
        except (ApiError, OSError, TimeoutError) as exc:
            raise _HTTPError(500, f"authorization check failed: {exc}") from exc
        if not answer.get("status", {}).get("allowed"):
            raise _HTTPError(
                403,
                f"Forbidden (user={user}, verb={verb}, resource=nodes, subresource={subresource}, "
                f"name={self.node_name})",
            )

    # -- handlers -------------------------------------------------------------------------------
    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _pods(self, request: web.Request) -> web.Response:
        items = [view.pod for view in self.pods()]
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def _resource_metrics(self, request: web.Request) -> web.Response:
        page = await asyncio.to_thread(resourcemetrics.render, self.pods())
        return web.Response(body=page, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    def _find(self, namespace: str, name: str) -> PodView | None:
        for view in self.pods():
            meta = view.pod["metadata"]
            if meta["namespace"] == namespace and meta["name"] == name:
                return view
        return None

    async def _unsupported(self, request: web.Request) -> web.Response:
        return web.Response(
            status=501,
            text=f"{request.path.split('/')[1]} is not supported by the local node (see docs/local-node.md)",
        )

    def _container(self, request: web.Request) -> tuple[PodView, ContainerView]:
        namespace, pod_name = request.match_info["namespace"], request.match_info["pod"]
        name = request.match_info["container"]
        pod = self._find(namespace, pod_name)
        if pod is None:
            raise _HTTPError(
                404, f'pod "{pod_name}" in namespace "{namespace}" not found on {self.node_name}'
            )
        container = pod.container(name)
        if container is None:
            raise _HTTPError(400, f'container "{name}" in pod "{pod_name}" is not valid')
        return pod, container

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        _, container = self._container(request)
        if not container.running():
            raise _HTTPError(400, f'container "{container.name}" is not running')
        return await serve_exec(request, container)

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        for unsupported in ("timestamps", "sinceSeconds", "sinceTime"):
            if request.query.get(unsupported) not in (None, "", "false"):
                raise _HTTPError(400, f"{unsupported} is not supported by the local node's logs")
        tail, limit = _int_param(request, "tailLines"), _int_param(request, "limitBytes")
        previous, follow = _flag(request, "previous"), _flag(request, "follow")
        pod, container = self._container(request)
        name, pod_name = container.name, request.match_info["pod"]
        path = pod.pod_dir / f"{name}.log"
        span = logs.instance_range(path, previous=previous)
        if span is None:
            which = "previous terminated" if previous else "started"
            raise _HTTPError(400, f'{which} container "{name}" in pod "{pod_name}" not found')
        start, end = span
        raw = logs.read_range(path, start, end)
        data = logs.select(raw, tail_lines=tail, limit_bytes=limit)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(data)
        if follow and not previous and limit is None:
            await self._follow(response, path, start + len(raw), container)
        await response.write_eof()
        return response

    async def _follow(
        self, response: web.StreamResponse, path: Path, offset: int, container: ContainerView
    ) -> None:
        """Stream what the instance writes after ``offset`` until it ends (or a new one starts)."""
        instances = logs.instance_count(path)
        while True:
            chunk = logs.read_range(path, offset, None)
            if chunk:
                offset += len(chunk)
                try:
                    await response.write(chunk)
                except (ConnectionError, RuntimeError):
                    return
                continue
            if not container.running() or logs.instance_count(path) != instances:
                return
            await asyncio.sleep(_FOLLOW_POLL)
