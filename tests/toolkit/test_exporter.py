"""The redis_exporter sidecar (``examples.rediscluster.shared.exporter``): its container spec, and
the real exporter run with that spec's flags and env against real redis-servers on loopback —
with a password, as the least-privilege ACL user, and over TLS (name and chain verified)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.shared import exporter
from examples.rediscluster.shared.security import tls, users
from tests._certs import CertAuthority
from tests.rediscluster._servers import RedisServers, free_port
from tests.toolkit._exporter import replicate, run_sidecar

IMAGE = "oliver006/redis_exporter:v1.74.0"


def cluster(**spec: Any) -> RedisCluster:
    return RedisCluster.model_validate({"metadata": {"name": "rc", "namespace": "ns"}, "spec": spec})


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {v["name"]: v.get("value", v.get("valueFrom")) for v in container["env"]}


# -- the container spec ------------------------------------------------------------------------


def test_the_sidecar_is_restricted_and_listens_on_the_pods_ip() -> None:
    c = exporter.exporter_container(cluster(), image=IMAGE)
    assert c["name"] == "redis-exporter"
    assert c["image"] == IMAGE
    assert c["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 59000,  # the image's USER: the kubelet refuses runAsNonRoot without a uid it knows
        "runAsGroup": 59000,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert "--web.listen-address=$(POD_IP):9121" in c["args"]
    assert "--config-command=-" in c["args"]  # no CONFIG GET: it would show masterauth
    assert c["ports"] == [{"name": "redis-metrics", "containerPort": 9121, "protocol": "TCP"}]
    assert env_of(c)["REDIS_ADDR"] == "redis://$(POD_IP):6379"
    # auth is on by default: the generated <name>-auth Secret; only an explicitly open cluster has none
    assert env_of(c)["REDIS_PASSWORD"] == {"secretKeyRef": {"name": "rc-auth", "key": "password"}}
    open_ = exporter.exporter_container(cluster(auth={"enabled": False}), image=IMAGE)
    assert "REDIS_PASSWORD" not in env_of(open_)
    assert "volumeMounts" not in c


def test_the_auth_password_comes_from_its_secret_never_argv() -> None:
    c = exporter.exporter_container(
        cluster(auth={"passwordSecret": {"name": "pw", "key": "redis-password"}}), image=IMAGE
    )
    assert env_of(c)["REDIS_PASSWORD"] == {"secretKeyRef": {"name": "pw", "key": "redis-password"}}
    assert "REDIS_USER" not in env_of(c)
    assert not any("password" in a for a in c["args"])


def test_with_users_it_logs_in_as_its_own_user_with_a_generated_password() -> None:
    c = exporter.exporter_container(cluster(users=[], auth={"passwordSecret": {"name": "pw"}}), image=IMAGE)
    env = env_of(c)
    assert env["REDIS_USER"] == "pyctrl-exporter"
    assert env["REDIS_PASSWORD"] == {"secretKeyRef": {"name": "rc-acl", "key": "exporter-password"}}
    assert users.parse_rules(exporter.EXPORTER_RULES, "exporter") == exporter.EXPORTER_RULES.split()
    assert exporter.EXPORTER_USER.startswith("pyctrl-")  # reserved: no spec user can take the name


def test_with_tls_it_verifies_the_pods_name_and_presents_the_certificate() -> None:
    c = exporter.exporter_container(cluster(tls={"secretName": "rc-tls"}), image=IMAGE)
    assert env_of(c)["REDIS_ADDR"] == "rediss://$(POD_NAME).rc-headless.ns.svc.cluster.local:6379"
    other = exporter.exporter_container(
        cluster(tls={"secretName": "rc-tls"}), image=IMAGE, cluster_domain="k8s.example"
    )
    assert env_of(other)["REDIS_ADDR"] == "rediss://$(POD_NAME).rc-headless.ns.svc.k8s.example:6379"
    assert {
        f"--tls-ca-cert-file={tls.CA_FILE}",
        f"--tls-client-cert-file={tls.CERT_FILE}",
        f"--tls-client-key-file={tls.KEY_FILE}",
    } <= set(c["args"])
    assert "--skip-tls-verification" not in " ".join(c["args"])
    assert c["volumeMounts"] == [{"name": "tls", "mountPath": tls.TLS_DIR, "readOnly": True}]


def test_an_empty_image_is_refused() -> None:
    with pytest.raises(ValueError, match="image must be a non-empty"):
        exporter.exporter_container(cluster(), image="")


def test_no_secret_value_can_reach_the_spec() -> None:
    spec = exporter.exporter_container(
        cluster(users=[], tls={"secretName": "t"}, auth={"passwordSecret": {"name": "pw"}}), image=IMAGE
    )
    text = json.dumps(spec)
    assert "secretKeyRef" in text
    assert all("value" not in v or "$(" in v["value"] or v["value"] == "pyctrl-exporter" for v in spec["env"])


# -- the real exporter against real redis-servers -----------------------------------------------

MEMORY = ("redis_memory_used_bytes", "redis_memory_max_bytes")


def test_password_replication_and_memory_series(redis_servers: RedisServers, tmp_path: Path) -> None:
    master, replica = redis_servers.start(2, password="s3cret pass", extra=("--maxmemory", "64mb"))
    replicate(replica, master)
    with master.client() as c:
        c.set("k", "v")
    spec = exporter.exporter_container(cluster(auth={"passwordSecret": {"name": "pw"}}), image=IMAGE)
    secrets = {("pw", "password"): "s3cret pass"}
    at = f"redis://{master.host}:{master.port}"
    with run_sidecar(spec, log_dir=tmp_path, secrets=secrets, address=at) as side:
        assert side.value("redis_up") == 1
        assert side.value("redis_memory_max_bytes") == 64 * 1024 * 1024
        assert (side.value("redis_memory_used_bytes") or 0) > 0
        assert side.value("redis_connected_slaves") == 1
        assert side.value("redis_instance_info", role="master") == 1
        offsets = [s for s in side.scrape() if s.name == "redis_connected_slave_offset_bytes"]
        assert [o.labels["slave_port"] for o in offsets] == [str(replica.port)]
        assert side.value("redis_master_repl_offset") is not None
        assert "s3cret" not in " ".join(side.proc.args)  # type: ignore[arg-type]
    at = f"redis://{replica.host}:{replica.port}"
    with run_sidecar(spec, log_dir=tmp_path, secrets=secrets, address=at) as side:
        assert side.value("redis_up") == 1
        assert side.value("redis_master_link_up") == 1
        assert side.value("redis_slave_repl_offset") is not None
    wrong = {("pw", "password"): "not it"}
    with run_sidecar(spec, log_dir=tmp_path, secrets=wrong, address=at) as side:
        assert side.value("redis_up") == 0


def test_the_acl_user_scrapes_everything_yet_reads_no_data_nor_config(
    redis_servers: RedisServers, tmp_path: Path
) -> None:
    (server,) = redis_servers.start(1, password="admin")
    with server.client() as c:
        c.execute_command(
            "ACL", "SETUSER", exporter.EXPORTER_USER, "on", ">exp-pw", *exporter.EXPORTER_RULES.split()
        )
        c.set("secret-key", "secret-value")
    spec = exporter.exporter_container(cluster(users=[]), image=IMAGE)
    secrets = {("rc-acl", "exporter-password"): "exp-pw"}
    with run_sidecar(
        spec, log_dir=tmp_path, secrets=secrets, address=f"redis://{server.host}:{server.port}"
    ) as side:
        samples = side.scrape()
        assert side.value("redis_up") == 1
        names = {s.name for s in samples}
        assert {*MEMORY, "redis_connected_clients", "redis_commands_processed_total"} <= names
        assert {"redis_db_keys", "redis_evicted_keys_total", "redis_rejected_connections_total"} <= names
    with server.client() as c:  # Redis logs every command it refused the exporter: only the one
        refused = {e["object"] for e in c.acl_log() if e["username"] == exporter.EXPORTER_USER}
    assert refused == {"slowlog|get"}  # on purpose: slow log entries carry command arguments (data)
    as_exporter = redis.Redis(server.host, server.port, username=exporter.EXPORTER_USER, password="exp-pw")
    with as_exporter:
        for command in (
            ("GET", "secret-key"),
            ("CONFIG", "GET", "masterauth"),
            ("SLOWLOG", "GET"),
            ("KEYS", "*"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                as_exporter.execute_command(*command)  # type: ignore[no-untyped-call]


@pytest.fixture(scope="module")
def ca() -> CertAuthority:
    return CertAuthority()


def tls_server(
    redis_servers: RedisServers, tmp_path: Path, ca: CertAuthority, hosts: tuple[str, ...]
) -> tuple[int, Path]:
    """A redis-server with a TLS port (beside the plaintext one its start-up check uses)."""
    files = tmp_path / "tls"
    files.mkdir()
    issued = ca.issue(hosts=hosts)
    for name, pem in (("tls.crt", issued.cert_pem), ("tls.key", issued.key_pem), ("ca.crt", ca.pem)):
        (files / name).write_bytes(pem)
    port = free_port()
    redis_servers.start(
        1,
        extra=(
            "--tls-port", str(port),
            "--tls-cert-file", str(files / "tls.crt"),
            "--tls-key-file", str(files / "tls.key"),
            "--tls-ca-cert-file", str(files / "ca.crt"),
            "--tls-auth-clients", "optional",
        ),
    )  # fmt: skip
    return port, files


def test_tls_with_the_name_and_chain_verified(
    redis_servers: RedisServers, tmp_path: Path, ca: CertAuthority
) -> None:
    port, files = tls_server(redis_servers, tmp_path, ca, hosts=("localhost",))
    spec = exporter.exporter_container(
        cluster(tls={"secretName": "rc-tls"}, auth={"enabled": False}), image=IMAGE
    )
    # The pod's DNS name does not resolve here: the test's server is "localhost", which its
    # certificate names as the pod's must name <pod>.<name>-headless.<namespace>.svc.cluster.local
    # (tests/operator/test_exporter_in_cluster.py: the real name, in a cluster).
    mapping = {tls.TLS_DIR: str(files)}
    with run_sidecar(spec, log_dir=tmp_path, address=f"rediss://localhost:{port}", paths=mapping) as side:
        assert side.value("redis_up") == 1
        assert (side.value("redis_memory_used_bytes") or 0) > 0
    with run_sidecar(spec, log_dir=tmp_path, address=f"rediss://127.0.0.1:{port}", paths=mapping) as side:
        assert side.value("redis_up") == 0  # 127.0.0.1 is not a name the certificate holds
    # the exporter refused the server's certificate (the alert Redis logs), not anything else
    assert "alert bad certificate" in (redis_servers.servers[0].dir / "redis.log").read_text()
