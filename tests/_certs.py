"""Test certificates made with ``cryptography``: a CA and server certificates it issues, laid out
as cert-manager's Secrets are (``tls.crt``, ``tls.key``, ``ca.crt``)."""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["CertAuthority", "Issued", "secret_data"]


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass
class Issued:
    cert_pem: bytes
    key_pem: bytes
    serial: int


class CertAuthority:
    """A self-signed CA issuing server certificates (no names: Redis does not check them)."""

    def __init__(self, name: str = "pyctrl test CA") -> None:
        self.key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str = "redis") -> Issued:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        serial = x509.random_serial_number()
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(self.key, hashes.SHA256())
        )
        return Issued(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key), serial)


def secret_data(ca: CertAuthority, issued: Issued, **override: bytes | None) -> dict[str, str]:
    """A cert-manager Secret's ``data`` (base64); ``override`` replaces (None: drops) a key,
    e.g. ``**{"tls.key": other.key_pem}``."""
    files: dict[str, bytes | None] = {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem, "ca.crt": ca.pem}
    files.update(override)
    return {k: base64.b64encode(v).decode() for k, v in files.items() if v is not None}
