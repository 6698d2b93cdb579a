"""A RedisCluster of real Redis containers on real nodes, under load, through faults and changes.

The operator runs as its own process on the host (``python -m examples.rediscluster``, this
checkout's code, as a user holding only the generated ClusterRole); it reaches the apiserver and
the Pods' IPs as an in-cluster operator would. The clients are Pods too: a writer Pod
(``redis-cli`` of the Redis image) sends ``SET`` then ``WAIT 1`` on one connection to the
``<name>-master`` Service's ClusterIP (kube-proxy), and prints the keys WAIT acknowledged; the test
reads them with ``kubectl logs`` and checks each against the master at the end. Every scenario
holds one invariant: **no acknowledged write is lost**.

- the master's container SIGKILLed through its node's containerd (a crash): the kubelet restarts it
  at once, empty (no persistence) and fenced, well within ``downAfterMilliseconds``; the operator
  sees a master that restarted empty while replicas hold the data, and promotes the best replica
  (the FailoverCompleted Event says so);
- an image change (``localhost/pyctrl/redis:7`` -> ``:7.0``, the same image under a second name)
  rolls out pod by pod with exactly one planned switchover (``FAILOVER TO``);
- ``kubectl drain`` of the master's node: evictions respect the PodDisruptionBudget (never two Pods
  disrupted at once), the master is handed over before its Pod goes;
- a backup to versitygw (S3) on the host's bridge address, which the Pods reach through their node,
  and a new cluster restored from it, every key on every Pod.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from examples.rediscluster.api import CLIENT_LABEL
from examples.rediscluster.shared.security.auth import GENERATED_KEY
from pyctrl.envtest import Environment, poll_until
from pyctrl.envtest._http import ApiError
from pyctrl.envtest.objectstore import ObjectStore
from pyctrl.envtest.realnode.node import _children
from pyctrl.testing import eventually
from tests.operator.conftest import Cluster, Pods, PodSampler, grant_operator_role
from tests.realnode.test_real_node import RESTRICTED, container_state, is_ready, kubectl

# The session environment starts within the first test's budget: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(1200)

ROOT = Path(__file__).resolve().parents[2]
REDIS_IMAGE = "localhost/pyctrl/redis:7"
REDIS_IMAGE_ALIAS = "localhost/pyctrl/redis:7.0"  # the same image under a second name
BUCKET = "backups"
# A loaded 2-core machine answers PING late now and then: 10 s keeps that from failing over (the
# crash scenario raises it further); planned changes do not depend on it.
DOWN_AFTER_MS = 10_000

# SET then WAIT 1 on one connection (redis-cli sends stdin's commands in order, raw replies when
# stdout is not a terminal: "OK" then the number of replicas that acknowledged); a line per key
# that at least one replica acknowledged. One connection per key, so each write follows the
# Service to whichever Pod it selects now. The pause only paces the load on a shared machine.
WRITER = r"""
i=0
while :; do
  out=$(printf 'SET %s%d %d\r\nWAIT 1 2000\r\n' "$PREFIX" "$i" "$i" |
    redis-cli -h "$MASTER" -p 6379 2>&1 | tr '\n' ' ')
  case "$out" in "OK 1 "|"OK 2 ") echo "acked $i" ;; esac
  i=$((i+1))
  sleep 0.02
done
"""


@pytest.fixture(scope="module")
def ns(env: Environment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The CRDs, a namespace, and the operator watching it (stopped, and the namespace deleted, at
    the end)."""
    env.install_crds([ROOT / "crds"])
    name = f"rc-{uuid.uuid4().hex[:6]}"
    env.create_namespace(name)
    kubeconfig = grant_operator_role(env)
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "examples.rediscluster", f"--kubeconfig={kubeconfig}",
             f"--namespace={name}", "--metrics-bind-address=127.0.0.1:0",
             "--health-probe-bind-address=127.0.0.1:0"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield name
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        env.delete_namespace(name)
        print(f"operator log: {log}")


def running(c: Cluster, replicas: int = 3) -> bool:
    s = c.status()
    return s.get("phase") == "Running" and s.get("readyReplicas") == replicas


@pytest.fixture(scope="module")
def cache(env: Environment, ns: str) -> Cluster:
    """One 3-Pod RedisCluster of real Redis containers, spread over the two nodes."""
    c = Cluster(env, ns, "cache")
    c.create(replicas=3, image=REDIS_IMAGE, downAfterMilliseconds=DOWN_AFTER_MS)
    poll_until("the RedisCluster Running with 3 ready replicas", lambda: running(c), 400, interval=1)
    for pod in c.pods().values():
        assert container_state(pod)["containerID"].startswith("containerd://")
    return c


async def settled(c: Cluster) -> dict[str, Any]:
    """Wait until ``c`` is Running with every Pod in its role (one master, two linked replicas)."""

    async def check() -> bool:
        if not running(c):
            return False
        roles = await c.roles()
        return sorted(roles.values()) == ["master", "slave", "slave"]

    await eventually(check, within=300, what=f"{c.name} Running, one master and two replicas", interval=1)
    return c.status()


@dataclass
class Writer:
    """The writer Pod of one scenario (see the module docstring)."""

    env: Environment
    ns: str
    name: str
    prefix: str = field(default_factory=lambda: f"w{uuid.uuid4().hex[:4]}:")

    def start(self, cluster: Cluster, *, node: str | None = None) -> None:
        service = self.env.http.get(f"/api/v1/namespaces/{self.ns}/services/{cluster.name}-master")
        container = {
            "name": "writer",
            "image": REDIS_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", WRITER],
            "env": [
                {"name": "MASTER", "value": service["spec"]["clusterIP"]},
                {"name": "PREFIX", "value": self.prefix},
                # auth is on by default: redis-cli logs in with the generated password, by reference
                {
                    "name": "REDISCLI_AUTH",
                    "valueFrom": {"secretKeyRef": {"name": f"{cluster.name}-auth", "key": GENERATED_KEY}},
                },
            ],
            "securityContext": RESTRICTED,
        }
        spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 1}
        if node is not None:
            spec["nodeName"] = node
        # a client of the cluster by its NetworkPolicy's label (not enforced by these nodes' CNI)
        meta = {"name": self.name, "labels": {CLIENT_LABEL: cluster.name}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        self.env.http.request("POST", f"/api/v1/namespaces/{self.ns}/pods", pod)

    def acked(self) -> list[int]:
        out = kubectl(self.env, "logs", "-n", self.ns, self.name)
        assert out.returncode == 0, out
        return [int(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("acked ")]

    async def acks(self, more_than: int, what: str) -> list[int]:
        """Wait for more than ``more_than`` acknowledged writes; return them."""
        seen: list[int] = []

        async def check() -> bool:
            seen[:] = self.acked()
            return len(seen) > more_than

        await eventually(check, within=180, what=f"{what} (> {more_than} acknowledged writes)", interval=1)
        return seen

    def stop(self) -> None:
        """Delete the Pod; return once it is gone (no write of it reaches a later scenario)."""
        path = f"/api/v1/namespaces/{self.ns}/pods/{self.name}"
        self.env.http.request("DELETE", f"{path}?gracePeriodSeconds=0")

        def gone() -> bool:
            try:
                self.env.http.get(path)
            except ApiError as exc:
                return exc.code == 404
            return False

        poll_until(f"the writer Pod {self.name} gone", gone, 120, interval=0.5)

    async def lost(self, cluster: Cluster, keys: list[int]) -> list[int]:
        """The acknowledged keys the cluster's current master does not hold."""
        client = await cluster.redis(str(cluster.status()["currentMaster"]))
        try:
            missing = []
            for start in range(0, len(keys), 1000):
                chunk = keys[start : start + 1000]
                values = await client.mget([f"{self.prefix}{i}" for i in chunk])
                missing += [i for i, v in zip(chunk, values, strict=True) if v != str(i)]
            print(f"{self.name}: {len(keys)} acknowledged writes, {len(missing)} lost")
            return missing
        finally:
            await client.aclose()


def events(env: Environment, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    items = env.http.get(f"/api/v1/namespaces/{ns}/events")["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]


def kill_container(env: Environment, pod: dict[str, Any]) -> None:
    """SIGKILL the Pod's redis container through its node's containerd (a crash: no handler runs)."""
    container = container_state(pod)["containerID"].removeprefix("containerd://")
    node_pid1 = _children(env.processes[pod["spec"]["nodeName"]].pid)[0]
    ctr = ["ctr", "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", container]
    out = subprocess.run(
        ["nsenter", "-t", str(node_pid1), "-m", "-n", *ctr], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out


def patch(env: Environment, cluster: Cluster, body: dict[str, Any]) -> None:
    path = f"{cluster.base}/{cluster.name}"
    env.http.request("PATCH", path, body, content_type="application/merge-patch+json")


def restarts(pod: dict[str, Any]) -> int:
    return int(container_state(pod).get("restartCount", 0))


async def test_a_crashed_master_container_restarts_empty_is_failed_over_and_no_write_is_lost(
    env: Environment, ns: str, cache: Cluster
) -> None:
    """The finding of the first real-node runs: the kubelet restarts a crashed container at once,
    and the Redis that answers there again is empty (no persistence). With a down-after far longer
    than that restart, only the operator's empty-restart rule can — and must — fail it over."""
    status = await settled(cache)
    master, epoch = str(status["currentMaster"]), int(status["masterEpoch"])
    patch(env, cache, {"spec": {"downAfterMilliseconds": 120_000}})
    writer = Writer(env, ns, "writer-crash")
    writer.start(cache)
    try:
        before = await writer.acks(50, "the writer under way")
        client = await cache.redis(master)
        try:
            assert await client.dbsize() >= len(before)  # the master holds the data it will lose
        finally:
            await client.aclose()
        restarted = restarts(cache.pods()[master])
        kill_container(env, cache.pods()[master])

        async def failed_over() -> bool:
            s = cache.status()
            return s.get("currentMaster") != master and int(s.get("masterEpoch", 0)) > epoch

        await eventually(failed_over, within=110, what=f"a failover away from the restarted {master}")
        assert restarts(cache.pods()[master]) > restarted  # the same Pod, its container restarted
        expected = f"in place of {master} (epoch {epoch + 1}): master {master} restarted empty"

        async def said_why() -> bool:  # Events are written in the background
            return any(expected in e["message"] for e in events(env, ns, "cache", "FailoverCompleted"))

        await eventually(said_why, within=30, what=f"the FailoverCompleted Event: {expected}")
        after = await writer.acks(len(before) + 50, "writes acknowledged by the new master")
    finally:
        writer.stop()
        patch(env, cache, {"spec": {"downAfterMilliseconds": DOWN_AFTER_MS}})
    status = await settled(cache)
    assert (await cache.roles())[master] == "slave"  # the restarted Pod follows the new master
    assert not await writer.lost(cache, after), "acknowledged writes lost"


async def test_an_image_change_rolls_out_with_one_planned_switchover_and_loses_nothing(
    env: Environment, ns: str, cache: Cluster
) -> None:
    status = await settled(cache)
    epoch = int(status["masterEpoch"])
    started = len(events(env, ns, "cache", "SwitchoverStarted"))
    uids = {name: p["metadata"]["uid"] for name, p in cache.pods().items()}
    writer = Writer(env, ns, "writer-rollout")
    writer.start(cache)
    try:
        await writer.acks(30, "the writer under way")
        patch(env, cache, {"spec": {"image": REDIS_IMAGE_ALIAS}})

        def rolled_out() -> bool:
            pods = cache.pods()
            images = {p["spec"]["containers"][0]["image"] for p in pods.values()}
            return images == {REDIS_IMAGE_ALIAS} and len(pods) == 3 and running(cache)

        poll_until("every Pod on the new image", rolled_out, 600, interval=1)
        status = await settled(cache)
        acked = await writer.acks(len(writer.acked()) + 30, "writes acknowledged after the rollout")
    finally:
        writer.stop()
    assert int(status["masterEpoch"]) == epoch + 1, status  # the master was handed over once
    assert len(events(env, ns, "cache", "SwitchoverStarted")) == started + 1
    # every Pod was recreated (the kubelet reports the image by the first of its names, so the
    # container's status cannot tell the two names apart; the spec and the new Pods do)
    assert not {name: p["metadata"]["uid"] for name, p in cache.pods().items()}.items() & uids.items()
    assert not await writer.lost(cache, acked), "acknowledged writes lost"


async def test_draining_the_masters_node_hands_the_master_over_first_one_pod_at_a_time(
    env: Environment, ns: str, cache: Cluster
) -> None:
    status = await settled(cache)
    master, epoch = str(status["currentMaster"]), int(status["masterEpoch"])
    pods = cache.pods()
    node = pods[master]["spec"]["nodeName"]
    other = next(n for n in env.node_names if n != node)
    uids = {name: p["metadata"]["uid"] for name, p in pods.items()}
    started = len(events(env, ns, "cache", "SwitchoverStarted"))
    worst: list[tuple[int, list[str]]] = [(0, [])]

    def disrupted(now: Pods) -> None:
        """Pods evicted and not back yet: missing, terminating, or recreated and not Ready."""
        down = [
            name
            for name in uids
            if name not in now
            or now[name]["metadata"].get("deletionTimestamp")
            or (now[name]["metadata"]["uid"] != uids[name] and not is_ready(now[name]))
        ]
        if len(down) > worst[0][0]:
            worst[0] = (len(down), down)

    writer = Writer(env, ns, "writer-drain")
    writer.start(cache, node=other)  # a bare Pod: kubectl drain would refuse to delete it
    try:
        await writer.acks(30, "the writer under way")
        assert env.bin_dir is not None
        async with PodSampler(cache, disrupted, interval=0.5):
            drain = await asyncio.create_subprocess_exec(
                str(env.bin_dir / "kubectl"), f"--kubeconfig={env.kubeconfig_path}", "drain", node,
                "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=600s",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
            out = (await asyncio.wait_for(drain.communicate(), 660))[0].decode()
        assert drain.returncode == 0, out
        poll_until("the drained Pods back elsewhere", lambda: running(cache), 600, interval=1)
        status = await settled(cache)
        acked = await writer.acks(len(writer.acked()) + 30, "writes acknowledged after the drain")
    finally:
        writer.stop()
        kubectl(env, "uncordon", node)
    assert worst[0][0] <= 1, f"two Pods disrupted at once: {worst[0][1]}"
    assert status["currentMaster"] != master
    assert int(status["masterEpoch"]) == epoch + 1, status  # one handover
    assert len(events(env, ns, "cache", "SwitchoverStarted")) == started + 1  # planned, not a failover
    assert all(p["spec"]["nodeName"] == other for p in cache.pods().values())
    assert not await writer.lost(cache, acked), "acknowledged writes lost"


@pytest.fixture(scope="module")
def store(env: Environment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """versitygw on the host's address on the environment's bridge: the Pods reach it through
    their node, and nothing outside the environment does."""
    s = ObjectStore(tmp_path_factory.mktemp("s3"), host=env.api_host)
    s.start()
    try:
        s.create_bucket(BUCKET)
        yield s
    finally:
        s.cleanup()


async def test_a_backup_to_s3_restores_every_key_into_a_new_cluster(
    env: Environment, ns: str, cache: Cluster, store: ObjectStore
) -> None:
    await settled(cache)
    client = await cache.redis(str(cache.status()["currentMaster"]))
    data = {f"backup:{i}": f"value-{i}" for i in range(20_000)}
    try:
        await client.mset(data)
        assert await client.wait(2, 10_000) == 2  # both replicas hold every key before the snapshot
    finally:
        await client.aclose()
    secret = {"AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key}
    env.http.request(
        "POST",
        f"/api/v1/namespaces/{ns}/secrets",
        {
            "metadata": {"name": "s3-creds"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in secret.items()},
        },
    )
    backups = f"/apis/redis.pyctrl.dev/v1alpha1/namespaces/{ns}/redisbackups"
    destination = {
        "s3": {"endpoint": store.endpoint, "bucket": BUCKET, "prefix": "redis/",
               "credentialsSecret": {"name": "s3-creds"}},
    }  # fmt: skip
    env.http.request(
        "POST",
        backups,
        {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisBackup",
            "metadata": {"name": "nightly"},
            "spec": {"clusterName": "cache", "destination": destination},
        },
    )

    async def finished() -> dict[str, Any] | None:
        s = dict(env.http.get(f"{backups}/nightly").get("status") or {})
        return s if s.get("phase") in ("Succeeded", "Failed") else None

    backup = await eventually(finished, within=300, what="the backup Job finished", interval=1)
    assert backup["phase"] == "Succeeded", backup
    body = store.client().get_object(Bucket=BUCKET, Key=f"redis/{ns}/nightly.rdb")["Body"].read()
    assert body.startswith(b"REDIS")
    assert len(body) == backup["sizeBytes"]

    restored = Cluster(env, ns, "restored")
    restored.create(
        replicas=2,
        image=REDIS_IMAGE,
        downAfterMilliseconds=DOWN_AFTER_MS,
        restoreFrom={"backupName": "nightly"},
    )

    def restored_condition() -> bool:
        s = restored.status()
        conditions = {c["type"]: c["status"] for c in s.get("conditions", [])}
        return running(restored, 2) and conditions.get("Restored") == "True"

    poll_until("the restored cluster Running and Restored", restored_condition, 400, interval=1)
    keys = list(data)
    for pod in restored.pods():  # the master was seeded from the backup, the replica synced from it
        client = await restored.redis(pod)
        try:
            assert await client.dbsize() >= len(data), pod  # and the keys of earlier scenarios
            assert await client.mget(keys) == list(data.values()), pod
        finally:
            await client.aclose()
