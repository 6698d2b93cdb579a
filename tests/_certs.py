"""Test TLS material laid out as cert-manager's Secrets are (``tls.crt``, ``tls.key``, ``ca.crt``),
issued by the library's in-memory CA (``pyctrl.envtest._certs.TinyCA``)."""

from __future__ import annotations

import base64
from typing import Any

from pyctrl.envtest._certs import CertPair as Issued
from pyctrl.envtest._certs import TinyCA

__all__ = ["CertAuthority", "Issued", "secret_data"]


class CertAuthority(TinyCA):
    """The library's CA; a certificate is named "redis" unless told (Redis checks no names)."""

    def issue(self, common_name: str = "redis", **options: Any) -> Issued:
        return super().issue(common_name, **options)


def secret_data(ca: CertAuthority, issued: Issued, **override: bytes | None) -> dict[str, str]:
    """A cert-manager Secret's ``data`` (base64); ``override`` replaces (None: drops) a key,
    e.g. ``**{"tls.key": other.key_pem}``."""
    files: dict[str, bytes | None] = {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem, "ca.crt": ca.pem}
    files.update(override)
    return {k: base64.b64encode(v).decode() for k, v in files.items() if v is not None}
