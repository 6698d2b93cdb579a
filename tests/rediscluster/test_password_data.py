"""Secrets stay data (issue 24, test 4, at the process level): the start script of a Redis pod
(``resources.auth_start``), run by a real ``sh`` with the password in its environment as the
kubelet gives it, starts a real ``redis-server`` whose password is exactly the Secret's bytes.

A password holding ``"``, ``\\``, a newline and ``enable-debug-command yes`` (and spaces, ``$``,
backquotes, 512 bytes, non-ASCII) is a password: a client authenticates with it, the wrong one is
refused, and ``CONFIG GET enable-debug-command`` says no. The operator-level test is
tests/operator/test_security.py."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from examples.rediscluster.api import RedisClusterSpec
from examples.rediscluster.shared.resources import auth_start
from examples.rediscluster.shared.security.auth import password_problem
from pyctrl.envtest._process import free_port
from pyctrl.testing import eventually

HOSTILE_PASSWORDS = {
    "injection": 'pw" \\ \nenable-debug-command yes\nrename-command CONFIG ""',
    "shell": "$HOME `id` $(id) ' ; exit 0 #",
    "spaces": "  leading and trailing  ",
    "long": "x" * 511 + "\\",
    "unicode": "pässwörd-密码-🔑",
    "quotes-only": '"',
}


@contextmanager
def started(spec: RedisClusterSpec, password: str, tmp: Path) -> Iterator[int]:
    port = free_port()
    start = f"exec redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no --dir {tmp}"
    proc = subprocess.Popen(
        ["sh", "-c", auth_start(spec, start)],
        env={"PATH": os.environ["PATH"], "REDIS_PASSWORD": password},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _raw(port: int, *args: bytes) -> bytes:
    """One RESP command on a fresh connection, the first reply line (no client library retries)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return conn.recv(4096).split(b"\r\n", 1)[0]


SPEC = RedisClusterSpec.model_validate({"auth": {"passwordSecret": {"name": "pw"}}})


@pytest.mark.parametrize("name", sorted(HOSTILE_PASSWORDS))
async def test_a_hostile_password_is_only_a_password(name: str, tmp_path: Path) -> None:
    password = HOSTILE_PASSWORDS[name]
    assert password_problem(password.encode()) is None
    with started(SPEC, password, tmp_path) as port:
        client = redis.Redis(port=port, password=password, socket_timeout=5)
        try:
            await eventually(client.ping, within=30, what="redis-server to accept the password")
            assert client.config_get("enable-debug-command") == {"enable-debug-command": "no"}
            assert client.config_get("requirepass")["requirepass"] == password
            assert client.config_get("masterauth")["masterauth"] == password
            assert client.config_get("rename-command") == {}  # no such directive was read
        finally:
            client.close()
        assert _raw(port, b"PING").startswith(b"-NOAUTH")  # no password: refused
        wrong = (password + "x").encode()
        assert _raw(port, b"AUTH", wrong).startswith(b"-WRONGPASS")  # a near miss: refused


def test_passwords_that_cannot_be_data_are_refused_with_a_reason() -> None:
    assert password_problem(b"") == "is empty"
    assert password_problem(b"a\0b") == "holds a NUL byte"
    assert password_problem(b"\xff\xfe") == "is not UTF-8 text"
    assert password_problem(b"x" * 4097) == "is longer than 4096 bytes"
    assert password_problem(b"x" * 4096) is None
