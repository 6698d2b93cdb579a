"""The two systems the failover benchmark compares, each on three redis-server pods of the local node.

- :class:`OperatorSystem`: a RedisCluster of 3 managed by the operator (its own process); clients
  find the master as the operator publishes it, the pod labelled ``redis.pyctrl.dev/role=master``
  (what the ``<name>-master`` Service selects);
- :class:`SentinelSystem`: three plain pods (the same image, the same redis.conf settings as the
  operator's pods, one master and two replicas) watched by three Sentinel processes
  (``redis-server sentinel.conf --sentinel``, quorum 2, the same down-after-milliseconds,
  ``parallel-syncs`` 2 so both replicas re-attach at once, ``failover-timeout`` 10 s); clients
  find the master through redis-py's ``Sentinel``. Following Redis' advice for persistence off
  (an empty restarted master would wipe its replicas), these pods do not restart
  (``restartPolicy: Never``): after a run a dead pod is created again as a replica (a new
  address; the Sentinels keep the old one as a down replica).

Both answer the same questions: which pod is master (``discover``), when the system *decided*
to fail over (operator: a new ``masterEpoch`` in status; Sentinel: ``+odown``), whether it is
steady again, and how to put a faulted pod back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff

from benchmarks import _procs
from pyctrl.client.errors import NotFound
from pyctrl.client.rest import Transport
from pyctrl.envtest._process import free_port

__all__ = ["OperatorSystem", "SentinelSystem", "System", "SystemError_", "redis_client"]

NS = "default"
PORT = 6379
_JSON = "application/json"
_MERGE = "application/merge-patch+json"


class SystemError_(RuntimeError):
    """A system cannot be set up or never recovered (reported, the benchmark goes on)."""


def redis_client(ip: str, timeout: float = 0.5) -> aioredis.Redis:
    """One attempt per command (redis-py would retry a timed-out command 3 times by default, which
    would hide how soon the writer notices a hung master)."""
    return aioredis.Redis(
        host=ip,
        port=PORT,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


async def redis_info(ip: str, section: str = "replication") -> dict[str, Any]:
    client = redis_client(ip)
    try:
        return dict(await client.info(section))
    finally:
        await client.aclose()


class System(Protocol):
    name: str
    pods: dict[str, str]  # pod name -> IP

    async def setup(self) -> None: ...
    async def discover(self) -> str | None: ...
    async def master(self) -> str: ...
    async def decided(self, since: float) -> float | None: ...
    async def steady(self) -> bool: ...
    async def restore(self, victim: str) -> None: ...
    async def close(self) -> None: ...


async def _pods(t: Transport, selector: str) -> list[dict[str, Any]]:
    doc = await t.request_json("GET", f"/api/v1/namespaces/{NS}/pods", params={"labelSelector": selector})
    return list(doc.get("items") or [])


class OperatorSystem:
    """A 3-pod RedisCluster named ``name`` (the operator process is run by the caller)."""

    def __init__(
        self, t: Transport, down_after_ms: int, name: str = "opbench", image: str | None = None
    ) -> None:
        self.t, self.down_after_ms, self.cluster = t, down_after_ms, name
        self.image = image  # the RedisCluster's spec.image (None: the operator's default)
        self.name = "operator"
        self.base = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{NS}/redisclusters"
        self.pods: dict[str, str] = {}
        self._epoch = 0

    async def status(self) -> dict[str, Any]:
        return dict((await self.t.request_json("GET", f"{self.base}/{self.cluster}")).get("status") or {})

    async def setup(self) -> None:
        # explicitly open, as the Sentinel pods it is compared with (auth is on by default)
        spec: dict[str, Any] = {
            "replicas": 3,
            "downAfterMilliseconds": self.down_after_ms,
            "auth": {"enabled": False},
        }
        if self.image is not None:
            spec["image"] = self.image
        body = {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisCluster",
            "metadata": {"name": self.cluster},
            "spec": spec,
        }
        await self.t.request("POST", self.base, body=orjson.dumps(body), content_type=_JSON)
        await until(self.steady, 240, f"{self.cluster} Running")
        items = await _pods(self.t, f"app.kubernetes.io/instance={self.cluster}")
        self.pods = {p["metadata"]["name"]: p["status"]["podIP"] for p in items}  # stable across restarts

    async def discover(self) -> str | None:
        """The pod the operator labels master (one, with an IP), as the master Service would."""
        items = await _pods(self.t, f"app.kubernetes.io/instance={self.cluster},redis.pyctrl.dev/role=master")
        named = [p["metadata"]["name"] for p in items if (p.get("status") or {}).get("podIP")]
        return named[0] if len(named) == 1 else None

    async def master(self) -> str:
        status = await self.status()
        self._epoch = int(status.get("masterEpoch", 0))
        return str(status["currentMaster"])

    async def decided(self, since: float) -> float | None:
        status = await self.status()
        return time.monotonic() if int(status.get("masterEpoch", 0)) > self._epoch else None

    async def steady(self) -> bool:
        s = await self.status()
        return s.get("phase") == "Running" and s.get("readyReplicas") == 3

    async def restore(self, victim: str) -> None:
        """Nothing to do: the pod restarts in place and the operator demotes it."""

    async def close(self) -> None:
        with contextlib.suppress(NotFound):
            await self.t.request("DELETE", f"{self.base}/{self.cluster}")


def _sentinel_pod(name: str, replica_of: str | None) -> dict[str, Any]:
    start = (
        f'exec redis-server --port {PORT} --bind "$POD_IP" --replica-announce-ip "$POD_IP" '
        "--protected-mode no --replica-read-only yes --replica-serve-stale-data yes "
        "--repl-diskless-sync-delay 0 --appendonly no --save ''"
    )
    if replica_of:
        start += f" --replicaof {replica_of} {PORT}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "sentinel-bench"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "redis",
                    "image": "redis:7.2",
                    "command": ["sh", "-c", start],
                    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                }
            ],
        },
    }


class SentinelSystem:
    """Three pods and three Sentinels monitoring them as ``bench`` (see the module docstring)."""

    MASTER_NAME = "bench"

    def __init__(self, t: Transport, down_after_ms: int, workdir: Path, root: Path) -> None:
        self.t, self.down_after_ms, self.workdir, self.root = t, down_after_ms, workdir, root
        self.name = "sentinel"
        self.pods: dict[str, str] = {}
        self.sentinels: list[tuple[str, int]] = []
        self._children: list[_procs.Child] = []
        self._client: Sentinel | None = None
        self._odown: float | None = None
        self._listeners: list[asyncio.Task[None]] = []

    # -- set-up -----------------------------------------------------------------------------------
    async def _create_pod(self, name: str, replica_of: str | None) -> str:
        body = orjson.dumps(_sentinel_pod(name, replica_of))
        await self.t.request("POST", f"/api/v1/namespaces/{NS}/pods", body=body, content_type=_JSON)

        async def answering() -> str | None:
            pod = await self.t.request_json("GET", f"/api/v1/namespaces/{NS}/pods/{name}")
            ip = (pod.get("status") or {}).get("podIP")
            if not ip:
                return None
            client = redis_client(ip)
            try:
                return ip if await client.ping() else None
            except Exception:
                return None
            finally:
                await client.aclose()

        return str(await until(answering, 120, f"pod {name} answering"))

    async def setup(self) -> None:
        master = await self._create_pod("sentinel-redis-0", None)
        self.pods["sentinel-redis-0"] = master
        for i in (1, 2):
            self.pods[f"sentinel-redis-{i}"] = await self._create_pod(f"sentinel-redis-{i}", master)
        self.workdir.mkdir(parents=True, exist_ok=True)
        for i in range(3):
            port = free_port(avoid={p for _, p in self.sentinels})
            conf = self.workdir / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.workdir}\n"
                f"sentinel monitor {self.MASTER_NAME} {master} {PORT} 2\n"
                f"sentinel down-after-milliseconds {self.MASTER_NAME} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.MASTER_NAME} 10000\n"
                f"sentinel parallel-syncs {self.MASTER_NAME} 2\n"
            )
            argv = ["redis-server", str(conf), "--sentinel"]
            self._children.append(
                _procs.start(f"sentinel-{i}", argv, self.workdir / f"sentinel-{i}.log", cwd=self.root)
            )
            self.sentinels.append(("127.0.0.1", port))
        self._client = Sentinel(self.sentinels, socket_timeout=0.3, socket_connect_timeout=0.3)  # type: ignore[no-untyped-call]
        try:
            await until(self._quorum_ok, 60, "the Sentinels to agree (SENTINEL CKQUORUM)")
            await until(self.steady, 60, "the Sentinels to see both replicas")
        except TimeoutError as exc:
            raise SystemError_(f"Sentinel quorum unreachable: {await self._ckquorum()}") from exc
        self._listeners = [asyncio.create_task(self._listen(host, port)) for host, port in self.sentinels]

    async def _ckquorum(self) -> str:
        try:
            return str(await _sentinel(*self.sentinels[0], "CKQUORUM", self.MASTER_NAME))
        except Exception as exc:
            return str(exc)

    async def _quorum_ok(self) -> bool:
        return (await self._ckquorum()).startswith("OK")

    async def _listen(self, host: str, port: int) -> None:
        """Note the first ``+odown`` any Sentinel announces (the failover decision)."""
        client = aioredis.Redis(host=host, port=port, decode_responses=True)
        pubsub = client.pubsub()
        try:
            await pubsub.subscribe("+odown")
            async for message in pubsub.listen():
                if message.get("type") == "message" and self._odown is None:
                    self._odown = time.monotonic()
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
            await client.aclose()

    # -- the questions --------------------------------------------------------------------------
    def _pod_of(self, ip: str) -> str | None:
        return next((pod for pod, pod_ip in self.pods.items() if pod_ip == ip), None)

    async def discover(self) -> str | None:
        assert self._client is not None
        try:
            ip, _ = await self._client.discover_master(self.MASTER_NAME)
        except Exception:
            return None
        return self._pod_of(str(ip))

    async def master(self) -> str:
        self._odown = None
        found = await self.discover()
        if found is None:
            raise SystemError_("no Sentinel names a master")
        return found

    async def decided(self, since: float) -> float | None:
        return self._odown

    async def steady(self) -> bool:
        """Every Sentinel names the same master, which answers as master with 2 online replicas."""
        assert self._client is not None
        answers = set()
        for host, port in self.sentinels:
            try:
                answers.add(tuple(await _sentinel(host, port, "GET-MASTER-ADDR-BY-NAME", self.MASTER_NAME)))
                replicas = await _sentinel(host, port, "REPLICAS", self.MASTER_NAME)
            except Exception:
                return False
            up = [r for r in replicas if "s_down" not in _fields(r).get("flags", "")]
            if len(up) < 2:
                return False
        if len(answers) != 1:
            return False
        ((ip, _),) = answers
        try:
            info = await redis_info(str(ip))
        except Exception:
            return False
        return info.get("role") == "master" and int(info.get("connected_slaves", 0)) == 2

    async def restore(self, victim: str) -> None:
        """A pod that exited (restartPolicy Never) is created again, as a replica of the master.

        Its old address stays in the Sentinels' lists as a down replica, which is harmless; no
        ``SENTINEL RESET`` (a reset while a failover finishes left one Sentinel watching the dead
        master for good: the "unconditional Sentinel resets" failure of REFERENCE)."""
        pod = await self.t.request_json("GET", f"/api/v1/namespaces/{NS}/pods/{victim}")
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            return  # still running (a resumed hang): Sentinel converts it to a replica itself
        await self.t.request(
            "DELETE", f"/api/v1/namespaces/{NS}/pods/{victim}", params={"gracePeriodSeconds": 0}
        )

        async def gone() -> bool:
            try:
                await self.t.request("GET", f"/api/v1/namespaces/{NS}/pods/{victim}")
            except NotFound:
                return True
            return False

        await until(gone, 60, f"pod {victim} deleted")
        master = await self.discover()
        if master is None:
            raise SystemError_("no master to re-attach the restarted pod to")
        self.pods[victim] = await self._create_pod(victim, self.pods[master])

    async def close(self) -> None:
        for task in self._listeners:
            task.cancel()
        await asyncio.gather(*self._listeners, return_exceptions=True)
        for child in self._children:
            child.stop(grace=5)
        for pod in self.pods:
            with contextlib.suppress(NotFound):
                await self.t.request(
                    "DELETE", f"/api/v1/namespaces/{NS}/pods/{pod}", params={"gracePeriodSeconds": 0}
                )


async def _sentinel(host: str, port: int, *args: str) -> Any:
    """``SENTINEL <args>`` on one Sentinel (decoded replies)."""
    client = aioredis.Redis(host=host, port=port, socket_timeout=1, decode_responses=True)
    try:
        return await client.execute_command("SENTINEL", *args)  # type: ignore[no-untyped-call]
    finally:
        await client.aclose()


def _fields(reply: Any) -> dict[str, str]:
    """A SENTINEL REPLICAS entry: a flat [key, value, ...] list (or a dict under RESP3)."""
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    return {str(reply[i]): str(reply[i + 1]) for i in range(0, len(reply) - 1, 2)}


async def until(check: Any, within: float, what: str) -> Any:
    """Poll the async ``check`` until it returns something truthy (returned); TimeoutError after."""
    deadline = time.monotonic() + within
    while True:
        try:
            result = await check()
        except Exception:  # not there yet (a pod starting, a Sentinel not answering)
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {within:.0f} s waiting for {what}")
        await asyncio.sleep(0.05)  # poll interval, bounded by the deadline above
