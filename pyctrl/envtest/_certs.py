"""Certificates for the local control plane (controller-runtime ``pkg/internal/testing/certs``).

``TinyCA`` is an in-memory self-signed CA issuing ``CertPair``s; tests use it for the TLS material
of their Secrets. ``Pki`` keeps one on disk for a control plane and signs with it: the apiserver
serving certificate (SANs 127.0.0.1, localhost and the in-cluster service names), client
certificates (CN = user, O = groups); a separate RSA key pair signs service-account tokens; a
separate front-proxy CA signs the one client certificate (CN ``front-proxy-client``) with which the
apiserver's aggregation layer proxies to an extension apiserver (kubeadm's ``front-proxy-ca``).
Everything is written as PEM files under ``pki/``; existing files are reused so a restarted
control plane keeps trusting earlier kubeconfigs."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPair", "Pki", "TinyCA"]

_VALIDITY = datetime.timedelta(days=365)
_BOTH = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(_pem_key(key))
    path.chmod(0o600)


def _sans(hosts: tuple[str, ...]) -> list[x509.GeneralName]:
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    return sans


@dataclass(frozen=True)
class CertPair:
    """A certificate and its private key (``certs.CertPair``)."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _pem_key(self.key)

    @property
    def serial(self) -> int:
        return int(self.cert.serial_number)


class TinyCA:
    """An in-memory self-signed CA (``certs.TinyCA``) issuing EC P-256 certificates."""

    def __init__(self, name: str = "pyctrl-envtest-ca", *, pair: CertPair | None = None) -> None:
        self.ca = pair or _self_signed(name)

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> TinyCA:
        """The CA whose PEM files are ``cert_path`` and ``key_path``."""
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TypeError(f"{key_path} is not an EC key")
        return cls(pair=CertPair(x509.load_pem_x509_certificate(cert_path.read_bytes()), key))

    @property
    def pem(self) -> bytes:
        """The CA certificate, PEM."""
        return self.ca.cert_pem

    def issue(
        self,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        hosts: tuple[str, ...] = (),
        usages: tuple[x509.ObjectIdentifier, ...] = _BOTH,
    ) -> CertPair:
        """A leaf certificate for ``common_name`` (O = ``organizations``, SANs = ``hosts``: IPs or
        DNS names) good for ``usages`` (server and client authentication unless told)."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.ca.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        )
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName(_sans(hosts)), critical=False)
        return CertPair(builder.sign(self.ca.key, hashes.SHA256()), key)


def _self_signed(name: str) -> CertPair:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
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
    return CertPair(cert, key)


class Pki:
    """The PEM files of one control plane, created on first use in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ca_cert, self.ca_key = directory / "ca.crt", directory / "ca.key"
        self.serving_cert, self.serving_key = directory / "apiserver.crt", directory / "apiserver.key"
        self.sa_key, self.sa_pub = directory / "sa.key", directory / "sa.pub"  # service-account tokens
        self.front_proxy_ca = directory / "front-proxy-ca.crt"
        self.front_proxy_client = directory / "front-proxy-client.crt", directory / "front-proxy-client.key"

    def ensure(self, extra_hosts: tuple[str, ...] = ()) -> None:
        """Create the CA, serving certificate and service-account keys unless present; a serving
        certificate without one of ``extra_hosts`` (real nodes' addresses) is issued anew."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not (self.ca_cert.exists() and self.ca_key.exists()):
            ca = TinyCA().ca
            _write_key(self.ca_key, ca.key)
            self.ca_cert.write_bytes(ca.cert_pem)
        if not self._serves(extra_hosts):
            hosts = (
                "127.0.0.1",
                "127.255.0.1",  # the kubernetes Service (SERVICE_CIDR)
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
                *extra_hosts,
            )
            self._issue(self.serving_cert, self.serving_key, "kube-apiserver", (), hosts, server=True)
        if not (self.sa_key.exists() and self.sa_pub.exists()):
            sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            _write_key(self.sa_key, sa)
            self.sa_pub.write_bytes(
                sa.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
            )

    def ensure_front_proxy(self) -> None:
        """The front-proxy CA and its ``front-proxy-client`` certificate, unless present: the
        apiserver trusts request headers (X-Remote-User/Group) only from that client, and an
        extension apiserver (metrics-server) only from a certificate signed by that CA."""
        ca_key = self.directory / "front-proxy-ca.key"
        cert, key = self.front_proxy_client
        if all(p.exists() for p in (self.front_proxy_ca, ca_key, cert, key)):
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        ca = TinyCA("front-proxy-ca")
        _write_key(ca_key, ca.ca.key)
        self.front_proxy_ca.write_bytes(ca.pem)
        pair = ca.issue("front-proxy-client", usages=(ExtendedKeyUsageOID.CLIENT_AUTH,))
        _write_key(key, pair.key)
        cert.write_bytes(pair.cert_pem)

    def _serves(self, hosts: tuple[str, ...]) -> bool:
        """The serving certificate exists and names every one of ``hosts``."""
        if not (self.serving_cert.exists() and self.serving_key.exists()):
            return False
        if not hosts:
            return True
        cert = x509.load_pem_x509_certificate(self.serving_cert.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        have = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
        have |= set(names.get_values_for_type(x509.DNSName))
        return set(hosts) <= have

    def client_cert(self, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """Return (cert, key) paths for ``user`` in ``groups``, issuing them if needed."""
        stem = "client-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        if groups:
            stem += "-" + hashlib.sha256("\n".join(groups).encode()).hexdigest()[:8]
        cert, key = self.directory / f"{stem}.crt", self.directory / f"{stem}.key"
        if not (cert.exists() and key.exists()):
            self._issue(cert, key, user, groups, (), server=False)
        return cert, key

    def issue_serving_cert(
        self, directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
    ) -> None:
        """Write ``tls.crt``/``tls.key`` for ``hosts`` (IPs or DNS names), signed by this CA."""
        directory.mkdir(parents=True, exist_ok=True)
        self._issue(directory / "tls.crt", directory / "tls.key", hosts[0], (), hosts, server=True)

    def _issue(
        self,
        cert_path: Path,
        key_path: Path,
        common_name: str,
        organizations: tuple[str, ...],
        hosts: tuple[str, ...],
        *,
        server: bool,
    ) -> None:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        pair = TinyCA.load(self.ca_cert, self.ca_key).issue(
            common_name, organizations=organizations, hosts=hosts, usages=(usage,)
        )
        _write_key(key_path, pair.key)
        cert_path.write_bytes(pair.cert_pem)
