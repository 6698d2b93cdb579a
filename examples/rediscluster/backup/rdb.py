"""An RDB snapshot streamed off a Redis server over the replication protocol (what
``redis-cli --rdb`` does), as a read-only file object, in bounded memory.

The reader connects (over TLS when given the CA, which the server's certificate must chain to;
its name is not checked, as Redis' own replication does not), authenticates (``AUTH``), asks
for the snapshot only (``REPLCONF rdb-only 1``, Redis >= 7.0: the server sends no command
stream after it) and sends ``SYNC``. The server answers
with newlines while it forks the snapshot, then either ``$<length>\\r\\n`` and that many bytes
(disk-backed sync) or ``$EOF:<40-byte mark>\\r\\n``, the payload and the same mark (diskless sync,
the default since Redis 7). A replica serves it too (chained replication), provided its own master
link is up — a pod the operator has not attached yet answers ``-NOMASTERLINK``.

Guarantees:

- ``read(n)`` returns ``n`` bytes, fewer only at the end of the payload (file semantics: callers
  such as boto3 take a short read for the end), and ``b""`` after it; ``n < 0`` means one socket
  buffer, not "everything" — the reader holds at most ``n`` bytes plus a socket buffer whatever
  the dataset size;
- a payload that does not start with the ``REDIS`` magic, does not end with the RDB end-of-file
  opcode, or stops early (connection closed, timeout) raises :class:`RdbError` — a truncated
  snapshot is never returned as a complete one;
- ``size`` counts exactly the bytes returned (the caller hashes them: ``store`` does, once).
"""

from __future__ import annotations

import socket
import ssl
from typing import Self

from examples.rediscluster.shared.security.tls import client_tls_context

__all__ = ["RDB_EOF_OPCODE", "RDB_MAGIC", "RdbError", "RdbStream"]

RDB_MAGIC = b"REDIS"
RDB_EOF_OPCODE = 0xFF
_MARK_LEN = 40
_RECV = 256 * 1024


class RdbError(Exception):
    """The snapshot could not be taken or arrived incomplete."""


class RdbStream:
    """A snapshot being received: a binary file object (``read``) counting what it returned."""

    def __init__(
        self,
        host: str,
        port: int,
        password: str | None = None,
        *,
        timeout: float = 60.0,
        tls_ca: str | None = None,
        username: str | None = None,
    ) -> None:
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise RdbError(f"cannot connect to redis at {host}:{port}: {exc}") from exc
        if tls_ca is not None:
            try:
                sock = client_tls_context(tls_ca).wrap_socket(sock)
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise RdbError(f"TLS handshake with redis at {host}:{port} failed: {exc}") from exc
        self._sock = sock
        self._where = f"{host}:{port}"
        self._buf = b""
        self._remaining: int | None = None  # bytes still to come (disk-backed sync)
        self._mark: bytes | None = None  # end mark (diskless sync)
        self._done = False
        self._first = True
        self._tail = b""  # the last bytes returned (RDB end-of-file check)
        self.size = 0
        try:
            if password is not None:
                user = [username.encode()] if username is not None else []
                self._command(b"AUTH", *user, password.encode())
            self._command(b"REPLCONF", b"rdb-only", b"1")
            self._sock.sendall(_resp(b"SYNC"))
            self._read_header()
        except BaseException:
            self.close()
            raise

    # -- protocol ------------------------------------------------------------------------------
    def _recv(self) -> bytes:
        try:
            chunk = self._sock.recv(_RECV)
        except OSError as exc:
            raise RdbError(f"reading the snapshot from {self._where} failed: {exc}") from exc
        if not chunk:
            raise RdbError(f"{self._where} closed the connection before the snapshot was complete")
        return chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self._buf:
            self._buf += self._recv()
            if len(self._buf) > 64 * 1024:
                raise RdbError(f"{self._where} sent no protocol line")
        line, _, self._buf = self._buf.partition(b"\r\n")
        return line

    def _command(self, *parts: bytes) -> None:
        self._sock.sendall(_resp(*parts))
        reply = self._line()
        if reply.startswith(b"-"):
            what = parts[0].decode()
            raise RdbError(f"{self._where} refused {what}: {reply[1:].decode(errors='replace')}")

    def _read_header(self) -> None:
        while True:
            self._buf = self._buf.lstrip(b"\n")  # keep-alive newlines while the server forks
            if b"\r\n" in self._buf:
                break
            self._buf += self._recv()
        line = self._line()
        if line.startswith(b"-"):
            raise RdbError(f"{self._where} refused SYNC: {line[1:].decode(errors='replace')}")
        if not line.startswith(b"$"):
            raise RdbError(f"{self._where} answered SYNC with {line[:40]!r}, not a bulk payload")
        if line.startswith(b"$EOF:"):
            self._mark = line[5:]
            if len(self._mark) != _MARK_LEN:
                raise RdbError(f"{self._where} sent a malformed end mark")
        else:
            try:
                self._remaining = int(line[1:])
            except ValueError as exc:
                raise RdbError(f"{self._where} sent a malformed payload length {line[:40]!r}") from exc

    # -- file object ---------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        """``n`` bytes of the payload, fewer at its end (``n`` < 0: a buffer's worth)."""
        if self._done:
            return b""
        want = _RECV if n is None or n < 0 else n
        parts: list[bytes] = []
        got = 0
        while got < want and not self._done:  # a short read means the end, as for a file
            part = self._next(want - got)
            parts.append(part)
            got += len(part)
        out = b"".join(parts)
        if out:
            self.size += len(out)
            if self._first:
                self._first = False
                if not out.startswith(RDB_MAGIC[: len(out)]):
                    raise RdbError(f"{self._where} sent a payload that is not an RDB file")
            self._tail = (self._tail + out)[-16:]
        if self._done:
            self._check_end()
        return out

    def _next(self, want: int) -> bytes:
        if self._remaining is not None:
            if self._remaining == 0:
                self._done = True
                return b""
            if not self._buf:
                self._buf = self._recv()
            out, self._buf = self._buf[: min(want, self._remaining)], self._buf[min(want, self._remaining) :]
            self._remaining -= len(out)
            self._done = self._remaining == 0
            return out
        assert self._mark is not None
        while True:
            if self._buf.endswith(self._mark):  # the payload is complete (the mark ends it)
                payload = len(self._buf) - _MARK_LEN
                if payload == 0:
                    self._done = True
                    return b""
                out, self._buf = self._buf[: min(want, payload)], self._buf[min(want, payload) :]
                return out
            if len(self._buf) > _MARK_LEN:  # hold back what could be the start of the mark
                take = min(want, len(self._buf) - _MARK_LEN)
                out, self._buf = self._buf[:take], self._buf[take:]
                return out
            self._buf += self._recv()

    def _check_end(self) -> None:
        # RDB ends with the EOF opcode and an 8-byte CRC64 (zero when rdbchecksum is off)
        if self.size < len(RDB_MAGIC) + 9 or self._tail[-9] != RDB_EOF_OPCODE:
            raise RdbError(f"the snapshot from {self._where} does not end like an RDB file (truncated?)")

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _resp(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for p in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(p), p))
    return b"".join(out)
