"""``mode: cluster`` with ``spec.tls`` and ``spec.users`` end to end (issue 17's TLS and ACL users in
cluster mode): real control plane, local node, real redis-server pods.

One cluster goes through it all, so the few minutes it takes are spent once: TLS-only listeners
with the cluster bus over TLS (``tls-cluster yes``; ``redis-cli --tls --cacert -c`` follows the
slot map, plaintext is refused), each pod's redis_exporter sidecar scraping its node over TLS as
its ACL user (``redis_up 1``, ``cluster_state`` ok, its role), each user allowed its rules and
refused the rest, the operator's
own user running cluster commands but reading no key, a rotated certificate served without a
restart, a hung shard master failed over by Redis's election over the TLS bus, a resharding
3 -> 4 shards under acknowledged writes whose MIGRATEs run node to node over TLS as the operator's
ACL user (``AUTH2``) and lose no key, and a per-shard backup read over TLS as the replication
user. Then no password or private key is in any argv, ConfigMap,
status, Event, StatefulSet, pod or operator log line.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rexc
from cryptography import x509
from redis.asyncio.cluster import RedisCluster

from examples.rediscluster.shared.redis_admin import RedisAccess, RedisAdminError, tls_options
from pyctrl.testing import eventually
from tests._certs import CertAuthority, secret_data
from tests.operator.conftest import Cluster, RunningOperator, reply_or_error, true
from tests.operator.test_backup import Backups, create_claim
from tests.operator.test_cluster_mode import Writer, cluster_ready
from tests.operator.test_metrics_sidecar import assert_cluster_mode_sidecars_serve
from tests.operator.test_users import _every_cmdline

pytestmark = pytest.mark.controlplane

PASSWORDS = {"app": "app-Cl5-word-1", "reader": "reader-Cl5-word-2"}
#: what a cluster-aware client needs besides its data commands: the slot map and the command table
_CLIENT = "+@connection +cluster|slots +cluster|shards +command +wait"
USERS = [
    {"name": "app", "passwordSecret": {"name": "app-pw"}, "rules": f"~app:* +@read +@write {_CLIENT}"},
    {"name": "reader", "passwordSecret": {"name": "reader-pw"}, "rules": f"~* +@read {_CLIENT}"},
]
OPERATOR = "pyctrl-operator"


def _node(ip: str, ca: bytes, user: str | None, password: str | None) -> aioredis.Redis:
    return aioredis.Redis(
        host=ip,
        port=6379,
        username=user,
        password=password,
        socket_timeout=3,
        socket_connect_timeout=3,
        decode_responses=True,
        **tls_options(ca.decode()),
    )


def _cluster_client(ip: str, ca: bytes, user: str) -> RedisCluster:
    return RedisCluster(
        host=ip,
        port=6379,
        username=user,
        password=PASSWORDS[user],
        socket_timeout=3,
        decode_responses=True,
        **tls_options(ca.decode()),
    )


async def _run(ip: str, ca: bytes, user: str | None, password: str | None, *command: Any) -> Any:
    """The reply to ``command`` on the node at ``ip``, or the exception Redis answered with."""
    return await reply_or_error(_node(ip, ca, user, password), *command)


def _cli(
    ca_file: Path | None, ip: str, *args: str, user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """redis-cli (over TLS verified against ``ca_file`` when given); a user's password through
    REDISCLI_AUTH, never argv."""
    env = {**os.environ}
    login: list[str] = []
    if user is not None:
        env["REDISCLI_AUTH"] = PASSWORDS[user]
        login = ["--user", user]
    tls = ["--tls", "--cacert", str(ca_file)] if ca_file is not None else []
    return subprocess.run(
        ["redis-cli", *tls, *login, "-h", ip, "-p", "6379", *args],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
        env=env,
    )


def _restarts(c: Cluster) -> dict[str, tuple[str, int]]:
    return {
        name: (p["metadata"]["uid"], p["status"]["containerStatuses"][0]["restartCount"])
        for name, p in c.pods().items()
    }


@dataclass
class _Setup:
    c: Cluster
    ca: CertAuthority
    ca_file: Path
    operator_pw: str

    async def run(self, ip: str, user: str | None, password: str | None, *command: Any) -> Any:
        return await _run(ip, self.ca.pem, user, password, *command)

    async def as_operator(self, pod: str, *command: Any) -> Any:
        return await _run(self.c.pod_ip(pod), self.ca.pem, OPERATOR, self.operator_pw, *command)


# the resharding dominates (4096 slots); the whole test took 176 s at load 3-8, and 529 s at load
# 10-16 with the mover of before its pipelined slot groups
@pytest.mark.timeout(900)
async def test_a_tls_cluster_with_users_forms_rotates_fails_over_and_reshards_over_tls_losing_nothing(
    operator: RunningOperator,
    cluster_factory: Callable[[str], Cluster],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    ca = CertAuthority()
    c = cluster_factory("ctls")
    # the name each pod's exporter sidecar dials and verifies: its pod's stable name
    pods_names = (f"*.ctls-headless.{c.namespace}.svc.cluster.local",)
    first, second = ca.issue(hosts=pods_names), ca.issue(hosts=pods_names)
    secrets = f"/api/v1/namespaces/{c.namespace}/secrets"
    c.envtest.http.request(
        "POST", secrets, {"metadata": {"name": "ctls-tls"}, "data": secret_data(ca, first)}
    )
    for name, password in PASSWORDS.items():
        data = {"password": base64.b64encode(password.encode()).decode()}
        c.envtest.http.request("POST", secrets, {"metadata": {"name": f"{name}-pw"}, "data": data})
    c.create(
        mode="cluster",
        shards=3,
        replicasPerShard=1,
        downAfterMilliseconds=2000,
        tls={"secretName": "ctls-tls"},
        users=USERS,
        disableDefaultUser=True,
    )
    await eventually(
        lambda: cluster_ready(c, 3, idle=True), within=180, what="3 TLS shards Running", interval=0.5
    )
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.pem)
    acl = c.envtest.http.get(f"{secrets}/ctls-acl")["data"]
    setup = _Setup(c, ca, ca_file, base64.b64decode(acl["operator-password"]).decode())
    await _tls_only_with_the_bus_over_tls(setup)
    # the exporter sidecars scrape over TLS (chain and name verified) as their ACL user
    await assert_cluster_mode_sidecars_serve(c)
    await _users_allowed_their_rules_only(setup)

    # rotation: every node serves the new certificate, none restarted
    before = _restarts(c)
    rotated = {"metadata": {"name": "ctls-tls"}, "data": secret_data(ca, second)}
    c.envtest.http.request("PUT", f"{secrets}/ctls-tls", rotated)
    access = RedisAccess(tls_ca=ca.pem.decode())

    async def all_serve_the_new_one() -> bool:
        serials = []
        for p in c.pods().values():
            try:
                der = await access.at(p["status"]["podIP"], 6379).served_certificate()
            except RedisAdminError:
                return False
            serials.append(x509.load_der_x509_certificate(der).serial_number)
        return serials == [second.serial] * 6

    await eventually(all_serve_the_new_one, within=120, what="the rotated certificate served", interval=0.5)
    assert _restarts(c) == before

    await _failover_and_resharding_lose_nothing(setup)

    # a backup: each shard's RDB read over TLS as the replication user, its slots checked on its
    # master (CLUSTER NODES) over TLS too
    create_claim(c.envtest, c.namespace, "backups")
    backups = Backups(c.envtest, c.namespace)
    backups.create("ctls-backup", "ctls", {"pvc": {"claimName": "backups"}})
    done = await eventually(
        lambda: backups.finished("ctls-backup"), within=180, what="the backup finished", interval=0.5
    )
    assert done["phase"] == "Succeeded", done
    assert len(done["shards"]) == 4
    secrets_of = [
        *PASSWORDS.values(),
        setup.operator_pw,
        base64.b64decode(acl["replication-password"]).decode(),
    ]
    keys = [k.key_pem.decode().splitlines()[1] for k in (first, second)]
    _nothing_leaked(c, caplog, [*secrets_of, *keys])


async def _tls_only_with_the_bus_over_tls(s: _Setup) -> None:
    """redis-cli --tls --cacert -c follows the slot map; plaintext is refused; every node says
    cluster_state:ok with tls-cluster yes and port 0 (the bus can only be TLS)."""
    ip, other = s.c.pod_ip("ctls-0"), s.c.pod_ip("ctls-3")

    async def users_loaded() -> bool:
        out = _cli(s.ca_file, ip, "-c", "set", "app:cli", "via-redis-cli", user="app")
        return bool(out.stdout.strip() == "OK")

    await eventually(users_loaded, within=90, what="the spec's users loaded on every node", interval=0.5)
    assert _cli(s.ca_file, other, "-c", "get", "app:cli", user="reader").stdout.strip() == "via-redis-cli"
    assert "PONG" not in _cli(None, ip, "ping").stdout  # plaintext: nothing listens on it
    for pod in s.c.pods():
        info = str(await s.as_operator(pod, "CLUSTER", "INFO"))
        assert "cluster_state:ok" in info, (pod, info)
        assert (await s.as_operator(pod, "CONFIG", "GET", "tls-cluster")) == {"tls-cluster": "yes"}
        assert await s.as_operator(pod, "CONFIG", "GET", "port") == {"port": "0"}


async def _users_allowed_their_rules_only(s: _Setup) -> None:
    """Each user runs what its rules allow and is refused the rest; the operator's user reads no
    key; the default user is off."""
    ip = s.c.pod_ip("ctls-0")
    owner = _cluster_client(ip, s.ca.pem, "app")
    try:
        assert await owner.set("app:k", "v") is True
        with pytest.raises(rexc.NoPermissionError):
            await owner.set("other:k", "v")
    finally:
        await owner.aclose()
    reader = _cluster_client(ip, s.ca.pem, "reader")
    try:
        assert await reader.get("app:k") == "v"
        with pytest.raises(rexc.NoPermissionError):
            await reader.set("app:k", "w")
    finally:
        await reader.aclose()
    master = s.c.status()["shards"][0]["master"]
    for command in (("GET", "app:k"), ("KEYS", "*"), ("DUMP", "app:k"), ("SCAN", "0")):
        refused = await s.as_operator(master, *command)
        assert isinstance(refused, rexc.NoPermissionError), (command, refused)
    anonymous = await s.run(ip, None, None, "PING")
    assert isinstance(anonymous, rexc.AuthenticationError | rexc.ResponseError), anonymous


async def _failover_and_resharding_lose_nothing(s: _Setup) -> None:
    """A hung shard master is failed over by Redis's election over the TLS bus; then 3 -> 4 shards
    under acknowledged writes: MIGRATE node to node over TLS as pyctrl-operator (AUTH2)."""
    c = s.c
    ip = c.pod_ip("ctls-0")
    # the app user, whose rules allow app:* keys; one connection per node, so WAIT counts its writes
    writer = Writer(
        ip, prefix="app:w", username="app", password=PASSWORDS["app"], **tls_options(s.ca.pem.decode())
    )
    writer.start()
    try:
        await writer.more(20)
        hung = dict(c.status()["shards"][1])
        pid = int((await s.as_operator(hung["master"], "INFO", "server"))["process_id"])
        os.kill(pid, signal.SIGSTOP)
        try:
            await eventually(
                lambda: true(c.status()["shards"][1]["master"] == hung["replicas"][0]),
                within=120,
                what="shard 1's replica elected over the TLS bus",
                interval=0.3,
            )
        finally:
            os.kill(pid, signal.SIGCONT)
        await eventually(
            lambda: cluster_ready(c, 3, idle=True),
            within=120,
            what="Running after the failover",
            interval=0.5,
        )
        await writer.more(20)
        seeds = _cluster_client(ip, s.ca.pem, "app")
        try:
            pipe = seeds.pipeline()
            for i in range(2000):
                pipe.set(f"app:seed{i}", str(i))
            await pipe.execute()
        finally:
            await seeds.aclose()
        patch = {"spec": {"shards": 4}}
        c.envtest.http.request(
            "PATCH", f"{c.base}/{c.name}", patch, content_type="application/merge-patch+json"
        )
        await eventually(
            lambda: cluster_ready(c, 4, idle=True), within=600, what="4 shards after resharding", interval=0.5
        )
        await writer.more(20)
    finally:
        await writer.finish()
    assert sorted(x["slotCount"] for x in c.status()["shards"]) == [4096] * 4
    check = _cluster_client(ip, s.ca.pem, "reader")
    try:
        pipe = check.pipeline()
        for i in range(2000):
            pipe.get(f"app:seed{i}")
        values = await pipe.execute()
        assert [i for i, v in enumerate(values) if v != str(i)] == []
        assert [k for k in writer.acked if await check.get(k) != k.removeprefix("app:w")] == []
    finally:
        await check.aclose()
    await _reported(c)


async def _reported(c: Cluster) -> None:
    """The Events of the rotation, the users, the failover and the resharding, which moved keys
    and never failed a MIGRATE."""
    # the Event of the reconcile that sees the mover finished may follow the status by a moment
    await eventually(
        lambda: true(any(e["reason"] == "ReshardingCompleted" for e in _events(c))),
        within=60,
        what="ReshardingCompleted",
        interval=0.5,
    )
    reasons = {e["reason"] for e in _events(c)}
    assert {"CertificateReloaded", "UsersLoaded", "FailoverCompleted"} <= reasons, reasons
    failed = [e["message"] for e in _events(c) if e["reason"] == "SlotMigrationFailed"]
    assert failed == []  # a refused MIGRATE (NOPERM, a TLS handshake) would be retried and reported
    completed = next(e["message"] for e in _events(c) if e["reason"] == "ReshardingCompleted")
    moved = re.search(r"(\d+) keys moved", completed)
    assert moved is not None, completed
    assert int(moved.group(1)) > 0, completed


def _events(c: Cluster) -> list[dict[str, Any]]:
    return list(c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"])


def _nothing_leaked(c: Cluster, caplog: pytest.LogCaptureFixture, secrets: list[str]) -> None:
    """No password or private key in any process's argv, in the objects the operator writes, or
    in its log records (message and key/values)."""
    visible = json.dumps(
        [
            c.get(),
            c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/configmaps"),
            _events(c),
            c.envtest.http.get(f"/apis/apps/v1/namespaces/{c.namespace}/statefulsets"),
            c.envtest.http.get(f"/apis/batch/v1/namespaces/{c.namespace}/jobs"),
            c.envtest.http.get(f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{c.namespace}/redisbackups"),
            c.pods(),
        ]
    )
    logged = json.dumps([(r.getMessage(), getattr(r, "kv", None)) for r in caplog.records], default=str)
    assert len(caplog.records) > 10
    argv = _every_cmdline()
    for secret in secrets:
        assert secret not in visible
        assert secret not in logged
        assert not [line for line in argv if secret.encode() in line]
