"""Which S3 endpoints backups may use: the operator's ``--s3-endpoint-allowlist``.

A tenant who may create RedisBackups (or a RedisCluster with ``spec.backup``) names the S3
endpoint its backups go to; the backup Job then connects there from inside the cluster, with the
tenant's data. An allowlist lets the cluster admin keep those connections to known stores (no
backup Job reaching an internal service or an address outside the cluster's policy).

Guarantees of :class:`EndpointAllowlist`:

- an entry is ``scheme://host[:port]`` (``http`` or ``https``; the port defaults to the
  scheme's) or ``scheme://*.domain[:port]`` (any host under ``domain``, not ``domain`` itself);
  anything else (a path, a user, a query, another scheme, an empty host) is refused when the
  list is parsed, with a message naming the entry;
- an endpoint is allowed when its scheme, host (compared in lower case) and port match an entry;
  a path on the endpoint does not matter; an endpoint that is not a URL is not allowed;
- the empty list allows every endpoint (the default: the admin opts in).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["EndpointAllowlist"]

_PORTS = {"http": 80, "https": 443}


def _split(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of ``url``; ValueError saying what is wrong."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{url!r} is not a URL: {exc}") from None
    if parts.scheme not in _PORTS:
        raise ValueError(f"{url!r}: the scheme must be http or https")
    if not parts.hostname:
        raise ValueError(f"{url!r} names no host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{url!r}: only scheme://host[:port] is allowed")
    return parts.scheme, parts.hostname.lower(), port or _PORTS[parts.scheme]


@dataclass(frozen=True)
class EndpointAllowlist:
    """The endpoints backups may use (module docstring); ``EndpointAllowlist.parse(entries)``."""

    entries: tuple[tuple[str, str, int], ...] = ()
    text: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EndpointAllowlist:
        """The allowlist of ``entries`` (blank ones skipped); ValueError naming a bad entry."""
        parsed, text = [], []
        for entry in (e.strip() for e in entries):
            if not entry:
                continue
            scheme, host, port = _split(entry)
            if urlsplit(entry).path not in ("", "/"):
                raise ValueError(f"{entry!r}: only scheme://host[:port] is allowed (no path)")
            if "*" in host and (not host.startswith("*.") or "*" in host[2:] or len(host) < 3):
                raise ValueError(f"{entry!r}: a wildcard must be the whole first label (*.example.com)")
            parsed.append((scheme, host, port))
            text.append(entry)
        return cls(tuple(parsed), tuple(text))

    def allows(self, endpoint: str) -> bool:
        if not self.entries:
            return True
        try:
            scheme, host, port = _split(endpoint)
        except ValueError:
            return False
        for want_scheme, want_host, want_port in self.entries:
            if (scheme, port) != (want_scheme, want_port):
                continue
            if host == want_host or (want_host.startswith("*.") and host.endswith(want_host[1:])):
                return True
        return False

    def refusal(self, field: str, endpoint: str) -> str | None:
        """Why ``endpoint`` (the value of ``field``) may not be used, or None."""
        if self.allows(endpoint):
            return None
        return (
            f"{field} {endpoint!r} is not among the S3 endpoints the operator allows "
            f"(--s3-endpoint-allowlist: {', '.join(self.text)})"
        )
