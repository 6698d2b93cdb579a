"""TLS of a RedisCluster's Redis (``spec.tls: {secretName}``), with cert-manager's Secret layout.

The Secret holds ``tls.crt`` (the server certificate, its chain after it), ``tls.key`` and
``ca.crt``; every pod mounts it at :data:`TLS_DIR`. redis.conf then has ``port 0`` (no plaintext
listener: a plaintext client is refused), ``tls-port 6379``, ``tls-replication yes`` (replicas
sync over TLS) and ``tls-auth-clients optional`` (a client certificate is checked when one is
presented, not required: the operator, ``redis-cli --tls --cacert`` and the probes present none);
in cluster mode also ``tls-cluster yes``: the cluster bus (port 16379) runs over TLS, and so do
the connections a node opens to another for ``MIGRATE`` (redis-server picks TLS for those when
``tls-cluster`` is on). A node connecting to another (replication, bus, MIGRATE) presents its own
``tls.crt`` as a client certificate, which the other verifies against ``ca.crt``: the certificate
must allow client use (no extended key usage, or clientAuth among them).

Guarantees:

- :func:`tls_material` checks a Secret before anything uses it: every key present, each a PEM
  that parses, the key matching the certificate, the certificate issued by ``ca.crt`` — an
  :class:`~examples.rediscluster.shared.resources.InvalidSpec` naming ``spec.tls.secretName`` otherwise
  (the reconciler then applies nothing and reloads nothing; the pods keep the files they loaded);
- names are not checked (not by Redis, not by the operator: pod IPs change, so certificates need
  not name them) — the chain to ``ca.crt`` is;
- rotation without a restart: the local node (like the kubelet) swaps the mounted files when the
  Secret changes; Redis re-reads them on ``CONFIG SET tls-cert-file ...`` (the reconciler's
  :func:`reload_settings`), and the reconciler compares the certificate each pod *serves* with
  the Secret's until they are the same, so a pod whose files have not been swapped yet is reloaded
  again on a later reconcile;
- the private key is in no ``repr``, log, Event or status (only ``ca.crt`` reaches the operator's
  connections; backup Jobs mount ``ca.crt`` alone).
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = [
    "CA_FILE",
    "CERT_FILE",
    "CLUSTER_CONF_LINE",
    "KEY_FILE",
    "SECRET_KEYS",
    "TLS_DIR",
    "TLS_VOLUME",
    "InvalidTls",
    "TlsMaterial",
    "ca_of",
    "client_tls_context",
    "conf_lines",
    "reload_settings",
    "tls_material",
]

TLS_DIR = "/etc/redis-tls"  # not under /etc/redis: a volume inside the config volume
TLS_VOLUME = "tls"
SECRET_KEYS = ("tls.crt", "tls.key", "ca.crt")
CERT_FILE, KEY_FILE, CA_FILE = (f"{TLS_DIR}/{key}" for key in SECRET_KEYS)
_FIELD = "spec.tls.secretName"
#: cluster mode: the cluster bus, and the connections MIGRATE opens between nodes, over TLS
CLUSTER_CONF_LINE = "tls-cluster yes"


class InvalidTls(ValueError):
    """A TLS Secret that cannot be used; the message names the field and the Secret."""


@dataclass(frozen=True)
class TlsMaterial:
    """A checked TLS Secret: the server certificate (DER) and the CA bundle (PEM)."""

    cert_der: bytes
    ca_pem: str
    serial: int
    key_pem: bytes = field(repr=False)


def client_tls_context(ca_pem: str) -> ssl.SSLContext:
    """A client context verifying the server's chain against ``ca_pem``, not its name."""
    context = ssl.create_default_context(cadata=ca_pem)
    context.check_hostname = False
    return context


def _public(key: Any) -> bytes:
    return bytes(key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


def tls_material(secret_name: str, data: Mapping[str, str] | None) -> TlsMaterial:
    """Check the Secret ``secret_name`` (its base64 ``data``); ``InvalidTls`` says what is wrong."""
    where = f"{_FIELD}: Secret {secret_name!r}"
    missing = [key for key in SECRET_KEYS if not (data or {}).get(key)]
    if missing:
        raise InvalidTls(
            f"{where} has no key {', '.join(missing)} (cert-manager layout: tls.crt, tls.key, ca.crt)"
        )
    assert data is not None
    raw = {key: base64.b64decode(data[key]) for key in SECRET_KEYS}
    try:
        chain = x509.load_pem_x509_certificates(raw["tls.crt"])
    except ValueError:
        raise InvalidTls(f"{where}: tls.crt is not a PEM certificate") from None
    try:
        cas = x509.load_pem_x509_certificates(raw["ca.crt"])
    except ValueError:
        raise InvalidTls(f"{where}: ca.crt is not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(raw["tls.key"], password=None)
    except (ValueError, TypeError):
        raise InvalidTls(f"{where}: tls.key is not an unencrypted PEM private key") from None
    cert = chain[0]
    if _public(key.public_key()) != _public(cert.public_key()):
        raise InvalidTls(f"{where}: tls.key does not match the certificate in tls.crt")
    issuers = [*chain[1:], *cas]
    if not any(_issued_by(cert, issuer) for issuer in issuers):
        raise InvalidTls(f"{where}: the certificate in tls.crt is not issued by ca.crt (nor by its chain)")
    return TlsMaterial(
        cert_der=cert.public_bytes(Encoding.DER),
        ca_pem=raw["ca.crt"].decode(),
        serial=cert.serial_number,
        key_pem=raw["tls.key"],
    )


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def ca_of(data: Mapping[str, str] | None) -> str | None:
    """``ca.crt`` of a Secret that failed :func:`tls_material`, if it alone is a usable CA."""
    value = (data or {}).get("ca.crt")
    if not value:
        return None
    pem = base64.b64decode(value)
    try:
        x509.load_pem_x509_certificates(pem)
    except ValueError:
        return None
    return pem.decode()


def conf_lines() -> list[str]:
    """redis.conf lines of a TLS cluster (cluster mode adds :data:`CLUSTER_CONF_LINE`)."""
    return [
        "port 0",
        "tls-port 6379",
        f"tls-cert-file {CERT_FILE}",
        f"tls-key-file {KEY_FILE}",
        f"tls-ca-cert-file {CA_FILE}",
        "tls-auth-clients optional",
        "tls-replication yes",
    ]


def reload_settings() -> dict[str, str]:
    """``CONFIG SET`` of these (same paths) makes Redis re-read the certificate, key and CA."""
    return {"tls-cert-file": CERT_FILE, "tls-key-file": KEY_FILE, "tls-ca-cert-file": CA_FILE}
