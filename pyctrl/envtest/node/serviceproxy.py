"""Service ClusterIPs that carry traffic: the local node's service proxy (kube-proxy, in the
userspace mode it had until v1.26: a listener per Service port relaying to an endpoint).

envtest's Service range is on loopback (``SERVICE_CIDR`` = 127.255.0.0/16, see
:mod:`pyctrl.envtest._components`), so a ClusterIP is an address a process can bind. Pod IPs are
loopback too, which EndpointSlices refuse ("may not be in the loopback range"): the endpoint
controllers are off and this proxy finds endpoints from the Pods themselves, as the endpoints
controller would. What reaches a ClusterIP this way includes the apiserver itself: an admission
webhook's ``clientConfig.service`` resolves to the Service's ClusterIP (kube-apiserver without
``--enable-aggregator-routing``, whose endpoint routing needs EndpointSlices), so a webhook served
by a Pod answers real admission requests.

Guarantees:
- for each TCP port of each Service with a ClusterIP and a selector, one listener on
  ``clusterIP:port`` on the machine; every node tries to bind it and retries every
  ``RETRY`` seconds while another holds it, so with several nodes one serves it and another takes
  over within seconds when that node is lost;
- each accepted connection is relayed to one Pod chosen at random among those Ready (condition
  ``Ready=True``), not terminating, with a Pod IP, in the Service's namespace and matching its
  selector — at the port's ``targetPort`` (a number, or the name of a container port of that Pod;
  the Service port when unset); bytes flow both ways, each direction's end is passed on
  (half-close), and either side closing ends the relay;
- with no Ready endpoint (or the endpoint refusing) the connection is closed at once, as
  kube-proxy rejects traffic to a Service without endpoints;
- listeners follow the Services: a new port or ClusterIP gets a listener, a removed one is closed
  (open relays finish);
- ``run`` returns only after every listener and relay is closed.

Not covered: UDP/SCTP, session affinity, NodePort/LoadBalancer/ExternalName, Services without a
selector (their endpoints would be EndpointSlices, which cannot hold loopback addresses), DNS
names (no cluster DNS: clients use the ClusterIP, e.g. from ``<NAME>_SERVICE_HOST``). Two
environments on one machine share the range: a ClusterIP:port already bound by another
environment's node is logged and retried, and a client dialing it would reach that environment.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import random
from typing import Any

from pyctrl.envtest.node.kube import Informer, Kube
from pyctrl.envtest.node.wake import set_or_timeout

__all__ = ["RETRY", "ServiceProxy"]

log = logging.getLogger(__name__)

#: Seconds between attempts to bind a listener another process holds.
RETRY = 3.0
_CHUNK = 64 * 1024

# (cluster IP, port) -> (namespace, service name, the port's spec)
Listen = tuple[str, int]
Target = tuple[str, str, dict[str, Any]]


def _is_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp") or not pod.get("status", {}).get("podIP"):
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _target_port(pod: dict[str, Any], port: dict[str, Any]) -> int | None:
    target = port.get("targetPort", port["port"])
    if isinstance(target, int):
        return target
    if target.isdigit():
        return int(target)
    for container in pod["spec"].get("containers", []):
        for declared in container.get("ports") or []:
            if declared.get("name") == target and declared.get("protocol", "TCP") == "TCP":
                return int(declared["containerPort"])
    return None


class ServiceProxy:
    """Serves every Service's ClusterIP ports (see the module docstring)."""

    def __init__(self, kube: Kube) -> None:
        self.services = Informer(kube, "/api/v1/services", self._changed)
        self.pods = Informer(kube, "/api/v1/pods", lambda old, new: None)
        self._servers: dict[Listen, asyncio.Server] = {}
        self._relays: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()

    def _changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self._wake.set()

    def wanted(self) -> dict[Listen, Target]:
        """The listeners the Services call for now."""
        out: dict[Listen, Target] = {}
        for svc in self.services.store.values():
            spec, meta = svc.get("spec", {}), svc["metadata"]
            ip = spec.get("clusterIP")
            routable = ip and ip != "None" and spec.get("type", "ClusterIP") == "ClusterIP"
            if not routable or not spec.get("selector"):
                continue
            for port in spec.get("ports") or []:
                if port.get("protocol", "TCP") == "TCP":
                    out[ip, int(port["port"])] = (meta["namespace"], meta["name"], port)
        return out

    def endpoint(self, target: Target) -> tuple[str, int] | None:
        """A Ready Pod's (IP, port) for ``target``, chosen at random; None when there is none."""
        namespace, name, port = target
        svc = next(
            (
                s
                for s in self.services.store.values()
                if s["metadata"]["namespace"] == namespace and s["metadata"]["name"] == name
            ),
            None,
        )
        if svc is None:
            return None
        selector: dict[str, str] = svc["spec"].get("selector") or {}
        candidates = []
        for pod in self.pods.store.values():
            labels = pod["metadata"].get("labels") or {}
            if pod["metadata"]["namespace"] != namespace or not _is_ready(pod):
                continue
            if all(labels.get(k) == v for k, v in selector.items()):
                number = _target_port(pod, port)
                if number is not None:
                    candidates.append((str(pod["status"]["podIP"]), number))
        return random.choice(candidates) if candidates else None

    async def run(self) -> None:
        """Watch Services and Pods and keep the listeners in line until cancelled."""
        watches = [asyncio.create_task(i.run(), name=f"proxy {i.path}") for i in (self.services, self.pods)]
        try:
            await asyncio.gather(self.services.synced.wait(), self.pods.synced.wait())
            while True:
                self._wake.clear()
                pending = await self._sync()
                await set_or_timeout(self._wake, RETRY if pending else None)
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
            await self.close()

    async def _sync(self) -> bool:
        """Open the wanted listeners, close the others; True while some could not be bound."""
        wanted = self.wanted()
        for key in [k for k in self._servers if k not in wanted]:
            self._servers.pop(key).close()
        pending = False
        for key, target in wanted.items():
            if key in self._servers:
                continue
            try:
                self._servers[key] = await asyncio.start_server(
                    functools.partial(self._accept, key), host=key[0], port=key[1]
                )
                log.info("service %s/%s: listening on %s:%d", target[0], target[1], *key)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    log.warning("service %s/%s: cannot listen on %s:%d: %s", target[0], target[1], *key, exc)
                pending = True  # held by another node (or environment): try again later
        return pending

    async def _accept(self, key: Listen, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            target = self.wanted().get(key)
            endpoint = self.endpoint(target) if target is not None else None
            if endpoint is None:
                log.info("%s:%d: no ready endpoint; connection closed", *key)
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*endpoint)
            except OSError as exc:
                log.info("%s:%d: endpoint %s:%d refused: %s", *key, *endpoint, exc)
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        finally:
            writer.close()
            self._relays.discard(task)

    async def close(self) -> None:
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()
        relays = list(self._relays)
        for task in relays:
            task.cancel()
        await asyncio.gather(*relays, return_exceptions=True)
        for server in servers:
            await server.wait_closed()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then pass the end on (half-close)."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()
