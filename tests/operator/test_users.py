"""ACL users end to end (issue 17, test 5): real control plane, local node, real redis-server pods.

One cluster with two users and the default user disabled: each user may run what its rules allow
and is refused the rest, the operator's own user cannot read keys, refused rules and a missing
Secret change nothing, a rule change reaches the pods without a restart, and no password is in
any argv or object.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rexc

from examples.rediscluster.api import RedisCluster
from pyctrl import Request
from pyctrl.testing import assert_idempotent, eventually
from tests.operator.conftest import Cluster, RunningOperator, reply_or_error, true

pytestmark = pytest.mark.controlplane

PASSWORDS = {"app": "app-Pa55-word-1", "reader": "reader-Pa55-word-2"}


def _client(c: Cluster, pod: str, user: str | None, password: str | None) -> aioredis.Redis:
    return aioredis.Redis(
        host=c.pod_ip(pod),
        port=6379,
        username=user,
        password=password,
        socket_timeout=2,
        socket_connect_timeout=2,
        decode_responses=True,
    )


async def _run(c: Cluster, pod: str, user: str | None, password: str | None, *command: Any) -> Any:
    """The reply to ``command``, or the exception Redis answered with."""
    return await reply_or_error(_client(c, pod, user, password), *command)


def _message(c: Cluster) -> str:
    ready: dict[str, Any] = next((x for x in c.status().get("conditions", []) if x["type"] == "Ready"), {})
    return str(ready.get("message", "")) if ready.get("reason") == "InvalidSpec" else ""


def _patch(c: Cluster, users: list[dict[str, Any]]) -> None:
    c.envtest.http.request(
        "PATCH", f"{c.base}/{c.name}", {"spec": {"users": users}}, content_type="application/merge-patch+json"
    )


async def test_each_user_is_allowed_its_rules_only_and_the_operator_reads_no_key(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("acl")
    secrets = f"/api/v1/namespaces/{c.namespace}/secrets"
    for name, password in PASSWORDS.items():
        data = {"password": base64.b64encode(password.encode()).decode()}
        c.envtest.http.request("POST", secrets, {"metadata": {"name": f"{name}-pw"}, "data": data})
    spec_users = [
        {"name": "app", "passwordSecret": {"name": "app-pw"}, "rules": "~app:* +get +set"},
        {"name": "reader", "passwordSecret": {"name": "reader-pw"}, "rules": "~* +@read"},
    ]
    await c.create_ready(2, users=spec_users, disableDefaultUser=True)
    master = c.status()["currentMaster"]
    replica = next(p for p in c.pods() if p != master)
    app, reader = ("app", PASSWORDS["app"]), ("reader", PASSWORDS["reader"])

    async def users_loaded() -> bool:
        return await _run(c, master, *app, "SET", "app:1", "v") is True  # redis-py reads +OK as True

    await eventually(users_loaded, within=60, what="the spec's users loaded on the master", interval=0.3)
    assert isinstance(await _run(c, master, *app, "SET", "other:1", "v"), rexc.NoPermissionError)
    assert isinstance(await _run(c, master, *app, "CONFIG", "GET", "port"), rexc.NoPermissionError)
    assert isinstance(await _run(c, master, *reader, "SET", "app:2", "v"), rexc.NoPermissionError)
    await eventually(
        lambda: _replicated(c, replica, reader), within=60, what="app:1 on the replica", interval=0.3
    )
    # the default user is off, and the operator's own user runs admin commands but reads no key
    anonymous = await _run(c, master, None, None, "GET", "app:1")
    assert isinstance(anonymous, rexc.AuthenticationError | rexc.ResponseError), anonymous
    acl_secret = c.envtest.http.get(f"{secrets}/acl-acl")["data"]
    operator_pw = base64.b64decode(acl_secret["operator-password"]).decode()
    assert isinstance(
        await _run(c, master, "pyctrl-operator", operator_pw, "GET", "app:1"), rexc.NoPermissionError
    )
    assert isinstance(
        await _run(c, master, "pyctrl-operator", operator_pw, "KEYS", "*"), rexc.NoPermissionError
    )
    assert (await _run(c, master, "pyctrl-operator", operator_pw, "INFO", "replication"))["role"] == "master"
    restarts = {n: p["status"]["containerStatuses"][0]["restartCount"] for n, p in c.pods().items()}

    # refused rules, then a user whose Secret is missing: reported naming the field, nothing applied
    _patch(c, [spec_users[0], {**spec_users[1], "rules": "~* +@read +nosuchcommand"}])
    await eventually(
        lambda: true(_message(c).startswith("spec.users[1].rules: Redis refused them")),
        within=60,
        what="the refused rules reported",
        interval=0.2,
    )
    assert c.envtest.http.get(f"{secrets}/acl-acl")["data"] == acl_secret
    missing = {"name": "ghost", "passwordSecret": {"name": "nope"}, "rules": "+ping"}
    _patch(c, [*spec_users, missing])
    await eventually(
        lambda: true("spec.users[2].passwordSecret: Secret 'nope' not found" in _message(c)),
        within=60,
        what="the missing Secret reported",
        interval=0.2,
    )
    assert c.envtest.http.get(f"{secrets}/acl-acl")["data"] == acl_secret
    assert await _run(c, master, *reader, "GET", "app:1") == "v"  # still serving the old users

    # a valid change reaches every pod without a restart
    _patch(c, [spec_users[0], {**spec_users[1], "rules": "~* +@read +set"}])

    async def reader_may_set() -> bool:
        on_master = await _run(c, master, *reader, "SET", "app:3", "v")
        on_replica = await _run(c, replica, *reader, "SET", "app:3", "v")  # allowed, but a replica
        return on_master is True and isinstance(on_replica, rexc.ReadOnlyError)

    await eventually(reader_may_set, within=60, what="the new rules loaded on every pod", interval=0.3)
    await eventually(lambda: c.ready(2), within=60, what="Running and converged", interval=0.2)
    assert {n: p["status"]["containerStatuses"][0]["restartCount"] for n, p in c.pods().items()} == restarts
    await _converged_costs_no_write(operator, c)

    # no password in any process's argv or in the objects the operator writes
    visible = json.dumps(
        [
            c.get(),
            c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/configmaps"),
            c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events"),
            c.envtest.http.get(f"/apis/apps/v1/namespaces/{c.namespace}/statefulsets"),
            c.pods(),
        ]
    )
    argv = _every_cmdline()
    for password in [*PASSWORDS.values(), operator_pw]:
        assert password not in visible
        assert not [line for line in argv if password.encode() in line]


async def _converged_costs_no_write(operator: RunningOperator, c: Cluster) -> None:
    """Reconciling the converged cluster writes nothing (the ACL Secret is applied only on a change)."""
    mgr = operator.operator.manager
    rv = c.get()["metadata"]["resourceVersion"]

    async def cache_caught_up() -> bool:
        cached = await mgr.client.get(RedisCluster, c.name, namespace=c.namespace)
        return bool(cached.metadata.resource_version == rv)

    await eventually(cache_caught_up, within=60, what="the cache to hold the converged object", interval=0.2)
    await assert_idempotent(operator.operator.reconciler, Request(c.namespace, c.name), mgr.client, n=3)


def _every_cmdline() -> list[bytes]:
    """The argv of every process on the machine (the operator, redis-server, probes, shells)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.append((entry / "cmdline").read_bytes())
            except OSError:
                continue
    assert len(out) > 10
    return out


async def _replicated(c: Cluster, replica: str, reader: tuple[str, str]) -> bool:
    return bool(await _run(c, replica, *reader, "GET", "app:1") == "v")
