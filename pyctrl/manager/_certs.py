"""The metrics server's TLS context: a certificate from ``cert_dir`` or a self-signed one made at
start (controller-runtime ``metricsserver``: ``CertDir``/``CertName``/``KeyName``, else
``certutil.GenerateSelfSignedCertKeyWithFixtures`` in memory).

The self-signed key is an ECDSA P-256 key made per process and never written anywhere lasting:
Python's ``ssl`` loads a chain only from files, so it passes through a private (0700) temporary
directory removed before this returns. Scrapers of a self-signed endpoint must skip verification
(Prometheus ``insecure_skip_verify``) or be given a certificate through ``cert_dir``.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import tempfile
from pathlib import Path

__all__ = ["serving_context"]


def serving_context(
    cert_dir: Path | str | None, cert_name: str = "tls.crt", key_name: str = "tls.key"
) -> ssl.SSLContext:
    """A TLS 1.2+ server context with the certificate of ``cert_dir`` or a self-signed one;
    ``OSError`` naming the file when the directory's files cannot be loaded."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir is not None:
        cert, key = Path(cert_dir) / cert_name, Path(cert_dir) / key_name
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise OSError(
                f"metrics server: cannot load the serving certificate {cert} and key {key}: {exc}"
            ) from exc
        return context
    cert_pem, key_pem = _self_signed()
    with tempfile.TemporaryDirectory(prefix="pyctrl-metrics-") as tmp:
        (Path(tmp) / "tls.crt").write_bytes(cert_pem)
        key_path = Path(tmp) / "tls.key"
        key_path.touch(0o600)
        key_path.write_bytes(key_pem)
        context.load_cert_chain(Path(tmp) / "tls.crt", key_path)
    return context


def _self_signed() -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for localhost, 127.0.0.1, ::1 and this host's name, one year."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    host = socket.gethostname()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@pyctrl-metrics")])
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.DNSName(host)]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
