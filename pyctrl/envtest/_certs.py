"""Certificates for the local control plane (controller-runtime ``pkg/internal/testing/certs``).

One self-signed CA signs: the apiserver serving certificate (SANs 127.0.0.1, localhost and the
in-cluster service names), client certificates (CN = user, O = groups), and a separate RSA key
pair signs service-account tokens. Everything is written as PEM files under ``pki/``; existing
files are reused so a restarted control plane keeps trusting earlier kubeconfigs.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki"]

_VALIDITY = datetime.timedelta(days=365)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


class Pki:
    """The PEM files of one control plane, created on first use in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ca_cert, self.ca_key = directory / "ca.crt", directory / "ca.key"
        self.serving_cert, self.serving_key = directory / "apiserver.crt", directory / "apiserver.key"
        self.sa_key, self.sa_pub = directory / "sa.key", directory / "sa.pub"  # service-account tokens

    def ensure(self) -> None:
        """Create the CA, serving certificate and service-account keys unless present."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not (self.ca_cert.exists() and self.ca_key.exists()):
            key = ec.generate_private_key(ec.SECP256R1())
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pyctrl-envtest-ca")])
            now = datetime.datetime.now(datetime.UTC)
            cert = (
                x509.CertificateBuilder()
                .subject_name(name)
                .issuer_name(name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + _VALIDITY)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(
                    x509.KeyUsage(
                        digital_signature=True,
                        key_cert_sign=True,
                        crl_sign=True,
                        content_commitment=False,
                        key_encipherment=False,
                        data_encipherment=False,
                        key_agreement=False,
                        encipher_only=False,
                        decipher_only=False,
                    ),
                    critical=True,
                )
                .sign(key, hashes.SHA256())
            )
            _write_key(self.ca_key, key)
            self.ca_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        if not (self.serving_cert.exists() and self.serving_key.exists()):
            sans: list[x509.GeneralName] = [
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address("127.255.0.1")),  # the kubernetes Service (SERVICE_CIDR)
                x509.DNSName("localhost"),
                x509.DNSName("kubernetes"),
                x509.DNSName("kubernetes.default"),
                x509.DNSName("kubernetes.default.svc"),
                x509.DNSName("kubernetes.default.svc.cluster.local"),
            ]
            self._issue(self.serving_cert, self.serving_key, "kube-apiserver", (), sans, server=True)
        if not (self.sa_key.exists() and self.sa_pub.exists()):
            sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            _write_key(self.sa_key, sa)
            self.sa_pub.write_bytes(
                sa.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
            )

    def client_cert(self, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """Return (cert, key) paths for ``user`` in ``groups``, issuing them if needed."""
        stem = "client-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        if groups:
            stem += "-" + hashlib.sha256("\n".join(groups).encode()).hexdigest()[:8]
        cert, key = self.directory / f"{stem}.crt", self.directory / f"{stem}.key"
        if not (cert.exists() and key.exists()):
            self._issue(cert, key, user, groups, [], server=False)
        return cert, key

    def issue_serving_cert(
        self, directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
    ) -> None:
        """Write ``tls.crt``/``tls.key`` for ``hosts`` (IPs or DNS names), signed by this CA."""
        directory.mkdir(parents=True, exist_ok=True)
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        self._issue(directory / "tls.crt", directory / "tls.key", hosts[0], (), sans, server=True)

    def _issue(
        self,
        cert_path: Path,
        key_path: Path,
        common_name: str,
        organizations: tuple[str, ...],
        sans: list[x509.GeneralName],
        *,
        server: bool,
    ) -> None:
        ca_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), password=None)
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise TypeError(f"{self.ca_key} is not an EC key")
        ca_cert = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        _write_key(key_path, key)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
