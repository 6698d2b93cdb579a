"""TLS end to end (issue 17, test 4): real control plane, local node, real redis-server pods.

One cluster goes through it all: TLS-only listeners (``redis-cli --tls --cacert`` works, plaintext
is refused), replication over TLS, each pod's redis_exporter sidecar scraping its Redis over TLS
(``redis_up 1`` and the replication series; it verifies the certificate's chain and its pod's stable
name, which the local node's managed ``/etc/hosts`` resolves as a kubelet's does), refused Secrets
that change nothing, a rotated certificate served without a restart, and a failover over TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from cryptography import x509

from examples.rediscluster.shared.security.tls import client_tls_context
from pyctrl.testing import eventually
from tests._certs import CertAuthority, Issued, secret_data
from tests.operator.conftest import Cluster, RunningOperator, true
from tests.operator.test_metrics_sidecar import assert_sidecars_serve

pytestmark = pytest.mark.controlplane


def _tls_client(c: Cluster, pod: str, ca: bytes) -> aioredis.Redis:
    return aioredis.Redis(
        host=c.pod_ip(pod),
        port=6379,
        ssl=True,
        ssl_ca_data=ca.decode(),
        ssl_check_hostname=False,
        ssl_cert_reqs="required",
        password=c.password(),
        socket_timeout=2,
        socket_connect_timeout=2,
        decode_responses=True,
    )


async def _served_serial(ip: str, ca: bytes) -> int | None:
    """Serial of the certificate the server at ``ip`` presents (None: no TLS handshake)."""
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(ip, 6379, ssl=client_tls_context(ca.decode())), 3
        )
    except (OSError, TimeoutError, ssl.SSLError):
        return None
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return int(x509.load_der_x509_certificate(der).serial_number)


def _cli(*args: str, password: str | None = None) -> subprocess.CompletedProcess[str]:
    """redis-cli ``args``; ``password`` through REDISCLI_AUTH (never argv)."""
    env = {**os.environ, **({"REDISCLI_AUTH": password} if password is not None else {})}
    return subprocess.run(
        ["redis-cli", *args], capture_output=True, text=True, timeout=10, check=False, env=env
    )


def _condition(c: Cluster, type_: str) -> dict[str, Any]:
    return next((x for x in c.status().get("conditions", []) if x["type"] == type_), {})


def _restarts(c: Cluster) -> dict[str, tuple[str, int]]:
    """pod -> (uid, restartCount): a restarted container or a re-created pod changes it."""
    return {
        name: (p["metadata"]["uid"], p["status"]["containerStatuses"][0]["restartCount"])
        for name, p in c.pods().items()
    }


async def test_tls_only_replication_rotation_bad_secrets_and_failover(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster], tmp_path: Path
) -> None:
    ca = CertAuthority()
    c = cluster_factory("tls")
    # the name the exporter sidecar connects to (and verifies): its pod's stable name
    pods_names = (f"*.tls-headless.{c.namespace}.svc.cluster.local",)
    first, second = ca.issue(hosts=pods_names), ca.issue(hosts=pods_names)
    secrets = f"/api/v1/namespaces/{c.namespace}/secrets"
    c.envtest.http.request(
        "POST", secrets, {"metadata": {"name": "redis-tls"}, "data": secret_data(ca, first)}
    )
    await c.create_ready(2, downAfterMilliseconds=2000, tls={"secretName": "redis-tls"})
    master = c.status()["currentMaster"]
    replica = next(p for p in c.pods() if p != master)
    await _tls_only_and_replicating(c, master, replica, ca, tmp_path)
    # the exporter sidecars scrape their Redis over TLS, the chain and the pod's name verified
    await assert_sidecars_serve(c)
    before = _restarts(c)
    await _refused_secrets_change_nothing(c, master, ca, first, second)

    # rotation: the Secret gets a new certificate; every pod serves it, none restarted
    back = {"spec": {"tls": {"secretName": "redis-tls"}}}
    c.envtest.http.request("PATCH", f"{c.base}/{c.name}", back, content_type="application/merge-patch+json")
    rotated = {"metadata": {"name": "redis-tls"}, "data": secret_data(ca, second)}
    c.envtest.http.request("PUT", f"{secrets}/redis-tls", rotated)

    async def all_serve_the_new_one() -> bool:
        served = [await _served_serial(p["status"]["podIP"], ca.pem) for p in c.pods().values()]
        return served == [second.serial] * 2

    await eventually(all_serve_the_new_one, within=120, what="the rotated certificate served", interval=0.5)
    await eventually(lambda: c.ready(2), within=60, what="Running again", interval=0.2)
    assert _restarts(c) == before
    events = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
    assert any(e["reason"] == "CertificateReloaded" for e in events)

    # failover over TLS: the master crashes, the replica takes over and keeps the data (read the
    # roles again: on a loaded machine a slow probe may have failed the master over already)
    master, epoch = c.status()["currentMaster"], c.status()["masterEpoch"]
    replica = next(p for p in c.pods() if p != master)
    victim = _tls_client(c, master, ca.pem)
    with contextlib.suppress(Exception):
        await victim.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
    await victim.aclose()
    await eventually(
        lambda: true(c.status().get("currentMaster") == replica and c.status()["masterEpoch"] == epoch + 1),
        within=120,  # generous: the machine may be loaded (promotion retries on Redis timeouts)
        what="a failover to the replica",
        interval=0.2,
    )
    promoted = _tls_client(c, replica, ca.pem)
    assert await promoted.get("before") == "rotation"
    await promoted.aclose()
    await eventually(lambda: c.ready(2), within=90, what="Running with the old master back", interval=0.2)

    # the private keys are in no object the operator writes
    visible = json.dumps(
        [
            c.get(),
            c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/configmaps"),
            c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events"),
            c.pods(),
        ]
    )
    for key in (first.key_pem, second.key_pem):
        assert key.decode().splitlines()[1] not in visible


async def _tls_only_and_replicating(
    c: Cluster, master: str, replica: str, ca: CertAuthority, tmp: Path
) -> None:
    """redis-cli over TLS verified against ca.crt works; plaintext is refused (port 0); the replica
    syncs over TLS; a first key is written and replicated."""
    ip = c.pod_ip(master)
    ca_file = tmp / "ca.crt"
    ca_file.write_bytes(ca.pem)
    secure = _cli("--tls", "--cacert", str(ca_file), "-h", ip, "-p", "6379", "ping", password=c.password())
    assert secure.stdout.strip() == "PONG", secure
    plain = _cli("-h", ip, "-p", "6379", "ping", password=c.password())
    assert "PONG" not in plain.stdout, plain
    untrusted = tmp / "other-ca.crt"
    untrusted.write_bytes(CertAuthority("another CA").pem)
    untrusted_ping = _cli(
        "--tls", "--cacert", str(untrusted), "-h", ip, "-p", "6379", "ping", password=c.password()
    )
    assert "PONG" not in untrusted_ping.stdout
    client = _tls_client(c, replica, ca.pem)
    info = await client.info("replication")
    assert info["master_link_status"] == "up"
    assert info["master_host"] == ip
    assert (await client.config_get("tls-replication"))["tls-replication"] == "yes"
    assert (await client.config_get("port"))["port"] == "0"
    await client.aclose()
    writer = _tls_client(c, master, ca.pem)
    await writer.set("before", "rotation")
    assert await writer.wait(1, 2000) == 1
    await writer.aclose()


async def _refused_secrets_change_nothing(
    c: Cluster, master: str, ca: CertAuthority, first: Issued, second: Issued
) -> None:
    """A key that does not match, then a Secret lacking ca.crt: reported naming the field, the
    StatefulSet untouched, the old certificate still served."""
    secrets = f"/api/v1/namespaces/{c.namespace}/secrets"
    sts_path = f"/apis/apps/v1/namespaces/{c.namespace}/statefulsets/{c.name}"
    template = c.envtest.http.get(sts_path)["spec"]["template"]
    mismatched = secret_data(ca, first, **{"tls.key": second.key_pem})
    c.envtest.http.request(
        "PUT", f"{secrets}/redis-tls", {"metadata": {"name": "redis-tls"}, "data": mismatched}
    )
    await eventually(
        lambda: true(_condition(c, "Ready").get("reason") == "InvalidSpec"),
        within=60,
        what="the refused Secret reported",
        interval=0.2,
    )
    assert (
        "spec.tls.secretName: Secret 'redis-tls': tls.key does not match" in _condition(c, "Ready")["message"]
    )
    missing = {"metadata": {"name": "no-ca"}, "data": secret_data(ca, second, **{"ca.crt": None})}
    c.envtest.http.request("POST", secrets, missing)
    patch = {"spec": {"tls": {"secretName": "no-ca"}}}
    c.envtest.http.request("PATCH", f"{c.base}/{c.name}", patch, content_type="application/merge-patch+json")
    await eventually(
        lambda: true("Secret 'no-ca' has no key ca.crt" in _condition(c, "Ready").get("message", "")),
        within=60,
        what="the Secret without ca.crt reported",
        interval=0.2,
    )
    assert c.envtest.http.get(sts_path)["spec"]["template"] == template  # nothing applied
    assert await _served_serial(c.pod_ip(master), ca.pem) == first.serial  # still serving the old one
