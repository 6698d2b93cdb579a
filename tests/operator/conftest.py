"""Fixtures for the RedisCluster operator's end-to-end tests.

The operator runs in-process on the session's control plane and local node, authenticated as a
user bound to the *generated* ClusterRole only (charts/rediscluster-operator/files/role.yaml), so every
test also proves the operator needs no permission beyond it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rexc
import yaml

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.operator import Operator, OperatorOptions, build_operator
from pyctrl.client import load_kubeconfig
from pyctrl.envtest import Environment
from pyctrl.testing import eventually

ROLE = Path(__file__).resolve().parents[2] / "charts" / "rediscluster-operator" / "files" / "role.yaml"
OPERATOR_USER = "rediscluster-operator-e2e"


def grant_operator_role(env: Environment) -> Path:
    """A kubeconfig of ``env`` for a user holding only the generated ClusterRole."""
    role = yaml.safe_load_all(ROLE.read_text())
    for doc in role:
        if doc and doc.get("kind") == "ClusterRole":
            name = doc["metadata"]["name"]
            env.http.request(
                "PATCH",
                f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}?fieldManager=e2e&force=true",
                yaml.safe_dump(doc).encode(),
                content_type="application/apply-patch+yaml",
            )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": OPERATOR_USER},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "rediscluster-operator",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OPERATOR_USER}],
    }
    env.http.request(
        "PATCH",
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{OPERATOR_USER}?fieldManager=e2e&force=true",
        yaml.safe_dump(binding).encode(),
        content_type="application/apply-patch+yaml",
    )
    return env.add_user(OPERATOR_USER)


@pytest.fixture(scope="session")
def operator_kubeconfig(envtest: Environment) -> Path:
    """A kubeconfig for a user holding only the generated ClusterRole."""
    return grant_operator_role(envtest)


@dataclass
class RunningOperator:
    operator: Operator
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def shutdown(self) -> None:
        self.stop.set()
        try:
            await asyncio.wait_for(self.task, 40)
        except TimeoutError:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


OperatorFactory = Callable[..., Awaitable[RunningOperator]]


@pytest.fixture
async def start_operator(operator_kubeconfig: Path, namespace: str) -> AsyncIterator[OperatorFactory]:
    """Start (and on teardown stop) operator instances watching the test's namespace."""
    running: list[RunningOperator] = []

    async def start(**overrides: Any) -> RunningOperator:
        config = await load_kubeconfig(operator_kubeconfig)
        options = OperatorOptions(
            namespace=namespace,
            metrics_bind_address="127.0.0.1:0",
            health_probe_bind_address="127.0.0.1:0",
            **overrides,
        )
        op = build_operator(config, options)
        stop = asyncio.Event()
        task = asyncio.create_task(op.manager.start(stop))
        handle = RunningOperator(op, stop, task)
        running.append(handle)
        await eventually(
            _started(op, task), within=30, what="the operator to be elected and synced", interval=0.2
        )
        return handle

    try:
        yield start
    finally:
        for handle in running:
            await handle.shutdown()


def _started(op: Operator, task: asyncio.Task[None]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        if task.done():
            task.result()  # surface the failure
        return op.manager.elected.is_set() and op.manager.probe_port is not None

    return check


@pytest.fixture
async def operator(start_operator: OperatorFactory) -> RunningOperator:
    return await start_operator()


Pods = dict[str, dict[str, Any]]  # pod name -> the Pod as the apiserver returns it


def password_of(envtest: Environment, namespace: str, name: str) -> str | None:
    """The password clients of the RedisCluster ``name`` use, read from its Secret: the spec's
    ``auth.passwordSecret``, else the operator's generated ``<name>-auth`` (auth is on by default);
    None only with ``auth: {enabled: false}``. The one helper every test's Redis client gets its
    password from."""
    path = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{namespace}/redisclusters/{name}"
    auth = envtest.http.get(path)["spec"].get("auth") or {}
    if auth.get("enabled") is False:
        return None
    ref = auth.get("passwordSecret") or {"name": f"{name}-auth"}
    secret = envtest.http.get(f"/api/v1/namespaces/{namespace}/secrets/{ref['name']}")
    return base64.b64decode(secret["data"][ref.get("key", "password")]).decode()


class Cluster:
    """Test-side view of one RedisCluster: apiserver reads through the admin HTTP client, Redis
    through redis.asyncio to the pods' loopback IPs."""

    def __init__(self, envtest: Environment, namespace: str, name: str) -> None:
        self.envtest = envtest
        self.namespace = namespace
        self.name = name
        self.base = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{namespace}/redisclusters"

    def create(self, **spec: Any) -> dict[str, Any]:
        body = {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisCluster",
            "metadata": {"name": self.name},
        }
        body["spec"] = spec
        return dict(self.envtest.http.request("POST", self.base, body))

    def get(self) -> dict[str, Any]:
        return dict(self.envtest.http.get(f"{self.base}/{self.name}"))

    def status(self) -> dict[str, Any]:
        return dict(self.get().get("status") or {})

    def typed(self) -> RedisCluster:
        return RedisCluster.model_validate(self.get())

    def pods(self) -> dict[str, dict[str, Any]]:
        sel = f"app.kubernetes.io/instance%3D{self.name}"
        items = self.envtest.http.get(f"/api/v1/namespaces/{self.namespace}/pods?labelSelector={sel}")[
            "items"
        ]
        return {p["metadata"]["name"]: p for p in items}

    def pod_ip(self, pod: str) -> str:
        return str(self.pods()[pod]["status"]["podIP"])

    def password(self) -> str | None:
        """The password clients use: the spec's Secret, or the generated ``<name>-auth`` one (no
        ``auth``, the default, or ``auth: {}``); None only with ``auth: {enabled: false}``."""
        return password_of(self.envtest, self.namespace, self.name)

    async def redis(self, pod: str) -> aioredis.Redis:
        return _redis_at(self.pod_ip(pod), self.password())

    async def info(self, pod: str) -> dict[str, Any]:
        return await _replication_info(_redis_at(self.pod_ip(pod), self.password()))

    async def create_ready(self, replicas: int, *, within: float = 120, **spec: Any) -> dict[str, Any]:
        """Create this RedisCluster (``replicas`` and ``spec``), wait until it is Running with every
        replica ready, and return its status."""
        self.create(replicas=replicas, **spec)
        what = f"{self.name} Running with {replicas} ready replicas"
        await eventually(lambda: self.ready(replicas), within=within, what=what, interval=0.2)
        return self.status()

    async def ready(self, replicas: int) -> bool:
        s = self.status()
        return s.get("phase") == "Running" and s.get("readyReplicas") == replicas

    async def roles(self, pods: Pods | None = None) -> dict[str, str]:
        """pod -> "master" / "slave" / "down" as Redis itself reports (of ``pods``, read when not given)."""
        pods = self.pods() if pods is None else pods
        password = self.password()
        out = {}
        for pod, p in pods.items():
            try:
                out[pod] = str((await _replication_info(_redis_at(p["status"]["podIP"], password)))["role"])
            except Exception:
                out[pod] = "down"
        return out


def _redis_at(ip: str, password: str | None) -> aioredis.Redis:
    return aioredis.Redis(
        host=ip,
        port=6379,
        password=password,
        socket_timeout=2,
        socket_connect_timeout=2,
        decode_responses=True,
    )


async def _replication_info(client: aioredis.Redis) -> dict[str, Any]:
    try:
        return dict(await client.info("replication"))
    finally:
        await client.aclose()


@pytest.fixture
def cluster_factory(envtest: Environment, namespace: str) -> Callable[[str], Cluster]:
    return lambda name: Cluster(envtest, namespace, name)


Acked = list[tuple[float, int, str]]  # (monotonic time, key number, master that acknowledged it)


async def write_continuously(c: Cluster, acked: Acked, stop: asyncio.Event) -> None:
    """Write increasing keys to whoever the recorded master is; keep (time, key, master) of those
    acknowledged by WAIT 1."""
    i = 0
    while not stop.is_set():
        try:
            master = c.status()["currentMaster"]
            client = await c.redis(master)
            try:
                while not stop.is_set():
                    await client.set(f"k{i}", i)
                    if await client.wait(1, 500) >= 1:
                        acked.append((time.monotonic(), i, master))
                    i += 1
            finally:
                await client.aclose()
        except Exception:
            await asyncio.sleep(0.05)  # backoff: master gone, retry against the next recorded one


async def lost_writes(c: Cluster, acked: Acked) -> list[int]:
    """The acknowledged keys the current master does not hold."""
    client = await c.redis(c.status()["currentMaster"])
    try:
        return [i for _, i, _ in acked if await client.get(f"k{i}") is None]
    finally:
        await client.aclose()


class PodSampler:
    """Samples a cluster's pods in the background for the length of an ``async with`` block.

    Every ``interval`` seconds ``fold`` gets the cluster's pods (it may be a coroutine function)
    and folds them into whatever it records. Leaving the block always stops the sampler: it
    finishes the fold under way within ``stop_within`` seconds or the block fails; a fold that
    raised fails the block with its error (unless the block itself already failed).
    """

    def __init__(
        self,
        c: Cluster,
        fold: Callable[[Pods], object],
        *,
        interval: float = 0.1,
        stop_within: float = 30,
    ) -> None:
        self.c, self.fold, self.interval, self.stop_within = c, fold, interval, stop_within
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        while not self._stop.is_set():
            folded = self.fold(self.c.pods())
            if inspect.isawaitable(folded):
                await folded
            with contextlib.suppress(TimeoutError):  # the sampling interval, cut short by a stop
                await asyncio.wait_for(self._stop.wait(), self.interval)

    async def __aenter__(self) -> PodSampler:
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._task is not None
        self._stop.set()
        done, _ = await asyncio.wait([self._task], timeout=self.stop_within)
        if not done:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if kind is None:
                raise AssertionError(f"the pod sampler did not stop within {self.stop_within}s")
        elif kind is None:
            self._task.result()  # a fold's failure fails the block
        else:
            self._task.exception()  # the block's own failure is the one reported


async def reply_or_error(client: aioredis.Redis, *command: Any) -> Any:
    """The reply to ``command`` on ``client`` (closed afterwards), or the exception Redis answered with."""
    try:
        return await client.execute_command(*command)  # type: ignore[no-untyped-call]
    except rexc.RedisError as exc:
        return exc
    finally:
        await client.aclose()


async def true(value: bool) -> bool:
    """An awaitable condition for ``eventually``."""
    return value
