"""The local node's service proxy on the real control plane: a Service's ClusterIP (on loopback)
relays to a Ready Pod it selects, at a named targetPort; a Service without a Ready endpoint
refuses; a deleted Service stops listening."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from pyctrl.envtest import Environment
from pyctrl.envtest._components import SERVICE_CIDR
from pyctrl.testing import eventually
from tests.node.helpers import redis_cli

pytestmark = pytest.mark.controlplane


async def answer(ip: str, port: int) -> bytes:
    """What a PING gets through ``ip:port`` (b"" when the connection is closed unanswered)."""
    reader, writer = await asyncio.open_connection(ip, port)
    try:
        writer.write(b"PING\r\n")
        await writer.drain()
        return await asyncio.wait_for(reader.read(100), 10)
    finally:
        writer.close()


async def test_a_cluster_ip_relays_to_a_ready_pod_at_its_named_port_and_follows_the_service(
    envtest: Environment, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}"
    pod = {
        "metadata": {"name": "cache-0", "labels": {"app": "cache"}},
        "spec": {
            "containers": [
                {
                    "name": "redis",
                    "image": "redis:7",
                    "args": ["redis-server", "--bind", "$(POD_IP)", "--port", "7001", "--save", ""],
                    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "ports": [{"name": "redis", "containerPort": 7001}],
                    "readinessProbe": {"tcpSocket": {"port": "redis"}, "periodSeconds": 1},
                }
            ]
        },
    }
    service = {
        "metadata": {"name": "cache"},
        "spec": {"selector": {"app": "cache"}, "ports": [{"port": 6379, "targetPort": "redis"}]},
    }
    idle = {  # selects nothing: no endpoint
        "metadata": {"name": "idle"},
        "spec": {"selector": {"app": "nobody"}, "ports": [{"port": 6380}]},
    }
    envtest.http.request("POST", f"{base}/pods", pod)
    ip = envtest.http.request("POST", f"{base}/services", service)["spec"]["clusterIP"]
    idle_ip = envtest.http.request("POST", f"{base}/services", idle)["spec"]["clusterIP"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(SERVICE_CIDR)

    async def pong() -> bool:
        try:
            return await answer(ip, 6379) == b"+PONG\r\n"
        except OSError:
            return False  # not listening yet, or the Pod not Ready yet

    await eventually(pong, within=60, what="PONG through the ClusterIP", interval=0.3)
    pod_ip = envtest.http.get(f"{base}/pods/cache-0")["status"]["podIP"]
    assert await redis_cli(pod_ip, "-p", "7001", "SET", "k", "v") == "OK"
    reader, writer = await asyncio.open_connection(ip, 6379)  # the same server behind the ClusterIP
    writer.write(b"GET k\r\n")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(100), 10) == b"$1\r\nv\r\n"
    writer.close()

    async def refused() -> bool:
        try:
            return await answer(idle_ip, 6380) == b""
        except OSError:
            return False  # not listening yet

    await eventually(refused, within=30, what="the endpoint-less Service closing at once", interval=0.3)

    envtest.http.request("DELETE", f"{base}/services/cache")

    async def closed() -> bool:
        try:
            await answer(ip, 6379)
        except ConnectionRefusedError:
            return True
        return False

    await eventually(closed, within=30, what="the deleted Service's listener closed", interval=0.3)
