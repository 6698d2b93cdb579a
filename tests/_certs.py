"""Test TLS material laid out as cert-manager's Secrets are (``tls.crt``, ``tls.key``, ``ca.crt``),
issued by the library's in-memory CA (``pyctrl.envtest._certs.TinyCA``)."""

from __future__ import annotations

import base64

from pyctrl.envtest._certs import CertPair as Issued
from pyctrl.envtest._certs import TinyCA as CertAuthority

__all__ = ["CertAuthority", "Issued", "secret_data"]


def secret_data(ca: CertAuthority, issued: Issued, **override: bytes | None) -> dict[str, str]:
    """A cert-manager Secret's ``data`` (base64); ``override`` replaces (None: drops) a key,
    e.g. ``**{"tls.key": other.key_pem}``."""
    files: dict[str, bytes | None] = {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem, "ca.crt": ca.pem}
    files.update(override)
    return {k: base64.b64encode(v).decode() for k, v in files.items() if v is not None}
