"""Security of a RedisCluster on the real control plane and real redis-server (issue 24).

- no ``auth`` (the default, as ``auth: {}``): the operator generates a random password in the
  Secret ``<name>-auth`` it controls; the status names the Secret (never the value); an
  unauthenticated client is refused, the generated password works, the replica logs in with it;
- ``auth: {enabled: false}``: explicitly open;
- never adopt: a ``<name>-auth`` Secret the cluster does not control is neither changed nor
  used; an Event ``Conflict`` names it and nothing is created; a ``<name>-config`` ConfigMap
  likewise (test 6): Ready/Degraded with reason Conflict naming it, nothing written, and it
  survives the cluster's deletion.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable

import pytest

from pyctrl.testing import eventually
from tests.operator.conftest import Cluster, RunningOperator

pytestmark = pytest.mark.controlplane


async def _anonymous_ping(ip: str) -> str:
    """The first reply line to a bare RESP PING from a client that gives no password."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, 6379), timeout=5)
    try:
        writer.write(b"*1\r\n$4\r\nPING\r\n")
        return (await asyncio.wait_for(reader.readline(), timeout=5)).decode().strip()
    finally:
        writer.close()


async def test_a_generated_password_is_required_and_an_explicitly_disabled_auth_is_open(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("genpw")
    status = await c.create_ready(2, downAfterMilliseconds=2000)  # no auth: on by default (issue 24)
    assert c.get()["spec"]["auth"] == {"enabled": True}  # the CRD's default, as stored
    assert status["authSecret"] == "genpw-auth"
    secret = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/secrets/genpw-auth")
    (owner,) = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RedisCluster", "genpw", True)
    password = c.password()
    assert password is not None
    assert len(password) >= 32
    assert password not in str(c.get())  # the status names the Secret only
    for pod in c.pods():
        assert (await _anonymous_ping(c.pod_ip(pod))).startswith("-NOAUTH")
    replica = next(p for p in c.pods() if p != status["currentMaster"])
    info = await c.info(replica)  # the generated password, as clients use it
    assert (info["role"], info["master_link_status"]) == ("slave", "up")  # masterauth: the same

    o = cluster_factory("open")
    status = await o.create_ready(1, downAfterMilliseconds=2000, auth={"enabled": False})
    assert "authSecret" not in status
    assert await _anonymous_ping(o.pod_ip(status["currentMaster"])) == "+PONG"
    secrets = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/secrets")["items"]
    assert "open-auth" not in {s["metadata"]["name"] for s in secrets}


async def test_a_secret_it_does_not_control_is_never_adopted(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    c = cluster_factory("taken")
    mine = base64.b64encode(b"the user's own value").decode()
    path = f"/api/v1/namespaces/{c.namespace}/secrets"
    c.envtest.http.request("POST", path, {"metadata": {"name": "taken-auth"}, "data": {"password": mine}})
    c.create(replicas=1, auth={})

    async def conflict() -> str | None:
        events = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
        found = [e["message"] for e in events if e["reason"] == "Conflict"]
        return found[0] if found else None

    message = await eventually(conflict, within=30, what="an Event Conflict", interval=0.2)
    assert "Secret taken-auth exists and is not controlled by this RedisCluster" in message
    secret = c.envtest.http.get(f"{path}/taken-auth")
    assert secret["data"] == {"password": mine}
    assert "ownerReferences" not in secret["metadata"]
    sts = c.envtest.http.get(f"/apis/apps/v1/namespaces/{c.namespace}/statefulsets")["items"]
    assert sts == []


async def test_a_child_name_taken_by_a_foreign_object_is_a_conflict_and_nothing_is_touched(
    operator: RunningOperator, cluster_factory: Callable[[str], Cluster]
) -> None:
    """Issue 24, test 6: a pre-existing ``<name>-config`` ConfigMap is neither changed nor deleted;
    the cluster reports the conflict (Event and Ready condition with reason Conflict naming it)."""
    c = cluster_factory("squat")
    path = f"/api/v1/namespaces/{c.namespace}/configmaps"
    theirs = {"metadata": {"name": "squat-config"}, "data": {"redis.conf": "someone else's"}}
    c.envtest.http.request("POST", path, theirs)
    c.create(replicas=1)

    async def ready_conflict() -> dict[str, str] | None:
        ready = [x for x in c.status().get("conditions", []) if x["type"] == "Ready"]
        return ready[0] if ready and ready[0]["reason"] == "Conflict" else None

    ready = await eventually(ready_conflict, within=30, what="Ready=False with reason Conflict", interval=0.2)
    assert ready["status"] == "False"
    assert "ConfigMap squat-config exists and is not controlled by this RedisCluster" in ready["message"]

    async def conflict_event() -> bool:  # the recorder writes Events in the background
        events = c.envtest.http.get(f"/api/v1/namespaces/{c.namespace}/events")["items"]
        return any(e["reason"] == "Conflict" and "ConfigMap squat-config" in e["message"] for e in events)

    await eventually(conflict_event, within=30, what="an Event Conflict naming the ConfigMap", interval=0.2)
    live = c.envtest.http.get(f"{path}/squat-config")
    assert live["data"] == {"redis.conf": "someone else's"}
    assert "ownerReferences" not in live["metadata"]
    for kind in ("services", "statefulsets"):  # nothing else was written either
        group = "apps/v1" if kind == "statefulsets" else None
        base = f"/apis/{group}" if group else "/api/v1"
        assert c.envtest.http.get(f"{base}/namespaces/{c.namespace}/{kind}")["items"] == []
    c.envtest.http.request("DELETE", f"{c.base}/squat")

    async def gone() -> bool:
        names = {x["metadata"]["name"] for x in c.envtest.http.get(c.base)["items"]}
        return "squat" not in names

    await eventually(gone, within=60, what="the RedisCluster deleted", interval=0.2)
    assert c.envtest.http.get(f"{path}/squat-config")["data"] == {"redis.conf": "someone else's"}
