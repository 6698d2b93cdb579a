"""The ACL file of ``spec.users`` (``shared.security.users``): its lines and the checks made
without Redis (the rest is Redis' own check, in tests/operator/test_users.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.cluster.resources import cluster_children
from examples.rediscluster.shared.resources import InvalidSpec, desired_children
from examples.rediscluster.shared.security import users


def cluster(**spec: Any) -> RedisCluster:
    return RedisCluster.model_validate({"metadata": {"name": "c", "namespace": "ns"}, "spec": spec})


def user(name: str, rules: str) -> dict[str, Any]:
    return {"name": name, "passwordSecret": {"name": f"{name}-pw"}, "rules": rules}


def test_a_selector_stays_one_argument_and_plain_rules_split() -> None:
    assert users.parse_rules("~app:* +get (~log:* +xadd) -@dangerous", "f") == [
        "~app:*",
        "+get",
        "(~log:* +xadd)",
        "-@dangerous",
    ]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (">hunter2 +get", r"f: a password rule \(>\.\.\.\) is not allowed"),
        ("#abcd +get", r"a password rule \(#\.\.\.\)"),
        ("nopass +get", "'nopass' is not allowed"),
        ("on +get", "'on' is not allowed"),
        ("(~a* +get", "selector '\\(~a\\* \\+get' has no closing"),
    ],
)
def test_rules_the_spec_may_not_say_are_refused_without_echoing_a_password(rules: str, message: str) -> None:
    with pytest.raises(users.InvalidUsers, match=message) as caught:
        users.parse_rules(rules, "f")
    assert "hunter2" not in str(caught.value)


def test_the_file_holds_hashes_the_operators_users_and_a_generation() -> None:
    c = cluster(users=[user("app", "~app:* +get")], disableDefaultUser=True)
    acl = users.acl_file(
        c, ["app-password"], default_password=None, generated=("op", "repl"), include_spec_users=True
    )
    lines = acl.text.splitlines()
    assert lines[0] == "user default off resetkeys resetchannels -@all"
    assert lines[1].startswith(f"user pyctrl-operator on #{hashlib.sha256(b'op').hexdigest()} resetkeys")
    assert "~" not in lines[1]  # the operator's user has no key pattern: it reads no key
    assert lines[3] == f"user app on #{hashlib.sha256(b'app-password').hexdigest()} ~app:* +get"
    assert lines[4] == f"user {acl.generation} off"
    assert "app-password" not in acl.text
    other = users.acl_file(
        c, ["changed"], default_password=None, generated=("op", "repl"), include_spec_users=True
    )
    assert other.generation != acl.generation


def test_the_default_user_keeps_the_auth_password_unless_disabled() -> None:
    c = cluster(users=[])
    acl = users.acl_file(c, [], default_password="pw", generated=("op", "repl"), include_spec_users=True)
    assert acl.text.splitlines()[0] == f"user default on #{hashlib.sha256(b'pw').hexdigest()} ~* &* +@all"


def test_generated_passwords_are_kept_once_made() -> None:
    first = users.generated_passwords(None)
    data = users.AclFile(*first, text="", generation="g").data()
    assert users.generated_passwords(data) == first
    assert users.generated_passwords(None) != first


@pytest.mark.parametrize(
    ("spec_users", "message"),
    [
        ([user("default", "+get")], r"spec.users\[0\].name: 'default' is reserved"),
        ([user("ok", "+get"), user("pyctrl-x", "+get")], r"spec.users\[1\].name: 'pyctrl-x' is reserved"),
        ([user("ok", ">pw")], r"spec.users\[0\].rules: a password rule"),
    ],
)
def test_bad_users_are_an_invalid_spec_naming_the_field(
    spec_users: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(InvalidSpec, match=message):
        desired_children(cluster(users=spec_users), 3)


def test_pods_of_an_acl_cluster_load_the_file_and_authenticate_as_the_operators_users() -> None:
    config, *_, sts, _ = desired_children(cluster(users=[]), 3)
    conf = config["data"]["redis.conf"]
    assert f"aclfile {users.ACL_FILE}" in conf
    assert "masteruser pyctrl-replication" in conf
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert "--user pyctrl-operator" in container["readinessProbe"]["exec"]["command"][-1]
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container["env"]
        if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
    }
    assert refs["REPLICATION_PASSWORD"] == {"name": "c-acl", "key": "replication-password"}


def test_in_cluster_mode_the_operator_may_move_keys_only_and_replicas_log_in_as_the_replication_user() -> (
    None
):
    spec = {"mode": "cluster", "users": [], "tls": {"secretName": "redis-tls"}}
    text = users.acl_file(
        cluster(**spec), [], default_password=None, generated=("op", "repl"), include_spec_users=True
    ).text
    operator = next(line for line in text.splitlines() if line.startswith(f"user {users.OPERATOR_USER} "))
    # every key permission of the operator's user is in the selector of MIGRATE and what it sends
    root, selector = operator.split(" (", 1)
    assert "~" not in root
    assert "%" not in root
    assert selector == "~* +migrate +restore-asking +select)"
    assert "+cluster|setslot" in root
    assert "+cluster|getkeysinslot" in root
    replication = next(
        line for line in text.splitlines() if line.startswith(f"user {users.REPLICATION_USER} ")
    )
    assert replication.endswith("+psync +replconf +sync +ping +cluster|nodes")
    # replication mode's file is what it was
    plain = users.acl_file(
        cluster(users=[]), [], default_password=None, generated=("op", "repl"), include_spec_users=True
    ).text
    assert users.CLUSTER_OPERATOR_RULES not in plain
    assert "+cluster|nodes" not in plain
    config, _, sts, _ = cluster_children(cluster(**spec))
    conf = config["data"]["redis.conf"].splitlines()
    assert {
        "port 0",
        "tls-port 6379",
        "tls-replication yes",
        "tls-cluster yes",
        "cluster-enabled yes",
    } <= set(conf)
    assert f"aclfile {users.ACL_FILE}" in conf
    assert "masteruser pyctrl-replication" in conf
    start = sts["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert 'masterauth $(redis_quoted "$REPLICATION_PASSWORD")' in start  # through stdin, never argv
    assert "requirepass" not in start
