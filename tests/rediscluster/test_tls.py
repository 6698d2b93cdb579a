"""TLS Secrets checked before use (``shared.security.tls``): each refusal names the field."""

from __future__ import annotations

import pytest

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.shared.resources import desired_children
from examples.rediscluster.shared.security import tls
from tests._certs import CertAuthority, secret_data

CA = CertAuthority()
GOOD = CA.issue()


def test_a_cert_manager_secret_is_accepted_with_its_serial_and_ca() -> None:
    material = tls.tls_material("redis-tls", secret_data(CA, GOOD))
    assert material.serial == GOOD.serial
    assert material.ca_pem == CA.pem.decode()
    assert GOOD.key_pem.decode() not in repr(material)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"tls.key": None}, "has no key tls.key"),
        ({"ca.crt": None, "tls.crt": None}, "has no key tls.crt, ca.crt"),
        ({"tls.crt": b"not a certificate"}, "tls.crt is not a PEM certificate"),
        ({"tls.key": CA.issue().key_pem}, "tls.key does not match the certificate in tls.crt"),
        ({"ca.crt": CertAuthority("another CA").pem}, "is not issued by ca.crt"),
    ],
)
def test_a_secret_that_cannot_serve_is_refused_naming_the_field(
    override: dict[str, bytes | None], message: str
) -> None:
    with pytest.raises(tls.InvalidTls, match=message) as caught:
        tls.tls_material("redis-tls", secret_data(CA, GOOD, **override))
    assert str(caught.value).startswith("spec.tls.secretName: Secret 'redis-tls'")


def test_ca_of_keeps_a_usable_ca_of_a_refused_secret_only() -> None:
    assert tls.ca_of(secret_data(CA, GOOD, **{"tls.key": None})) == CA.pem.decode()
    assert tls.ca_of(secret_data(CA, GOOD, **{"ca.crt": b"garbage"})) is None


def test_a_tls_cluster_listens_on_tls_only_and_mounts_its_secret() -> None:
    cluster = RedisCluster.model_validate(
        {"metadata": {"name": "t", "namespace": "ns"}, "spec": {"tls": {"secretName": "redis-tls"}}}
    )
    config, *_, sts, _ = desired_children(cluster, 3)
    conf = config["data"]["redis.conf"].splitlines()
    assert "port 0" in conf
    assert "tls-port 6379" in conf
    assert "tls-replication yes" in conf
    assert "port 6379" not in conf
    pod = sts["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": "redis-tls"}} in pod["volumes"]
    probe = " ".join(pod["containers"][0]["readinessProbe"]["exec"]["command"])
    assert f"--tls --cacert {tls.CA_FILE}" in probe
