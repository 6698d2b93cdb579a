"""S3 endpoints of backups (issue 24): the operator's allowlist, and a store that redirects.

- ``EndpointAllowlist``: entries parsed strictly (a bad one named), exact scheme/host/port or a
  ``*.domain`` wildcard, the empty list allowing everything;
- ``S3Store`` against a hostile endpoint on loopback that answers every request with a redirect
  to a second server: the backup fails at once (permanent) naming the redirect, and the second
  server never sees a request; a request to another origin is refused before it is sent.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from botocore.awsrequest import AWSRequest

from examples.rediscluster.backup.endpoints import EndpointAllowlist
from examples.rediscluster.backup.store import S3Store, StoreError


@pytest.mark.parametrize(
    ("entries", "endpoint", "allowed"),
    [
        ([], "http://10.0.0.1:1234", True),  # no list: any endpoint
        (["https://s3.example.com"], "https://s3.example.com", True),
        (["https://s3.example.com"], "https://S3.Example.com:443/bucket-path", True),
        (["https://s3.example.com"], "http://s3.example.com", False),  # another scheme
        (["https://s3.example.com"], "https://s3.example.com:8443", False),  # another port
        (["https://s3.example.com"], "https://s3.example.com.evil.io", False),
        (["https://*.amazonaws.com"], "https://s3.eu-west-1.amazonaws.com", True),
        (["https://*.amazonaws.com"], "https://amazonaws.com", False),
        (["https://*.amazonaws.com"], "https://evilamazonaws.com", False),
        (["http://127.0.0.1:7070", " "], "http://127.0.0.1:7070", True),
        (["http://127.0.0.1:7070"], "http://127.0.0.2:7070", False),
        (["http://127.0.0.1:7070"], "not a url", False),
    ],
)
def test_an_endpoint_is_allowed_only_by_a_matching_entry(
    entries: list[str], endpoint: str, allowed: bool
) -> None:
    assert EndpointAllowlist.parse(entries).allows(endpoint) is allowed


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("ftp://store", "the scheme must be http or https"),
        ("s3.example.com", "the scheme must be http or https"),
        ("https://", "names no host"),
        ("https://user:pw@s3.example.com", "only scheme://host[:port]"),
        ("https://s3.example.com/bucket", "no path"),
        ("https://s3.*.com", "a wildcard must be the whole first label"),
        ("https://s3.example.com:99999", "is not a URL"),
    ],
)
def test_a_bad_entry_is_refused_naming_it(entry: str, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("*", r"\*").replace("[", r"\[")) as refused:
        EndpointAllowlist.parse(["https://ok.example.com", entry])
    assert repr(entry) in str(refused.value)
    assert why in str(refused.value)


def test_the_refusal_names_the_field_the_endpoint_and_the_list() -> None:
    allowlist = EndpointAllowlist.parse(["https://s3.example.com", "http://127.0.0.1:7070"])
    assert allowlist.refusal("spec.destination.s3.endpoint", "https://s3.example.com") is None
    assert allowlist.refusal("spec.destination.s3.endpoint", "http://10.0.0.1") == (
        "spec.destination.s3.endpoint 'http://10.0.0.1' is not among the S3 endpoints the operator "
        "allows (--s3-endpoint-allowlist: https://s3.example.com, http://127.0.0.1:7070)"
    )


class _Recorder(BaseHTTPRequestHandler):
    """Counts requests; with ``redirect_to`` set, answers each with a 307 there."""

    redirect_to: str | None = None
    hits: list[str]

    def _answer(self) -> None:
        self.hits.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.redirect_to is not None:
            self.send_response(307)
            self.send_header("Location", f"{self.redirect_to}{self.path}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_POST = do_HEAD = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(host: str, redirect_to: str | None) -> tuple[ThreadingHTTPServer, list[str]]:
    hits: list[str] = []
    handler = type("Handler", (_Recorder,), {"redirect_to": redirect_to, "hits": hits})
    server = ThreadingHTTPServer((host, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, hits


@pytest.fixture
def hostile() -> Iterator[tuple[str, list[str]]]:
    """(endpoint of a store redirecting everything, the requests the redirect target received)."""
    target, target_hits = _serve("127.0.0.2", None)
    host, port = target.server_address[:2]
    redirecting, _ = _serve("127.0.0.1", f"http://{host!s}:{port}")
    try:
        yield f"http://127.0.0.1:{redirecting.server_address[1]}", target_hits
    finally:
        for server in (redirecting, target):
            server.shutdown()
            server.server_close()


def test_a_store_that_redirects_gets_a_permanent_error_and_nothing_goes_elsewhere(
    hostile: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    endpoint, elsewhere = hostile
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "tenant-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "tenant-secret")
    store = S3Store(endpoint, "backups", "ns/b.rdb", "us-east-1", ca_bundle=None)
    with pytest.raises(StoreError) as refused:
        store.put(io.BytesIO(b"REDIS0011" + b"x" * 1000))
    assert refused.value.permanent
    assert "answered with a redirect" in str(refused.value)
    assert "redirects are not followed" in str(refused.value)
    with pytest.raises(StoreError, match="redirects are not followed"):
        store.get(tmp_path / "restored.rdb", sha256="0" * 64, size_bytes=None)
    assert not list(tmp_path.iterdir())  # no partial file left
    assert elsewhere == []  # neither the data nor a signed request reached the other host


def test_a_request_to_another_origin_is_refused_before_it_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "tenant-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "tenant-secret")
    store = S3Store("http://127.0.0.1:7070", "backups", "ns/b.rdb", "us-east-1", ca_bundle=None)
    events = store.client.meta.events
    same = AWSRequest("GET", "http://127.0.0.1:7070/backups/ns/b.rdb").prepare()
    assert all(r is None for _, r in events.emit("before-send.s3.GetObject", request=same))
    for url in ("http://127.0.0.2:7070/backups/x", "https://127.0.0.1:7070/x", "http://127.0.0.1:7071/x"):
        with pytest.raises(StoreError, match="refusing to send a request to") as refused:
            events.emit("before-send.s3.GetObject", request=AWSRequest("GET", url).prepare())
        assert refused.value.permanent
