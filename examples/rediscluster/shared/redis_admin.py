"""Redis admin commands of the RedisCluster operator (redis.asyncio), bounded by short timeouts.

Guarantees:
- Every call opens one connection, runs its commands and closes it (``failover_to``: one per
  server for the whole handover; :class:`KeptConnection`, the prober's, keeps one open across
  PINGs); connect and socket timeouts are
  ``io_timeout`` seconds (default 1 s) and the whole call is cut off at ``2 * io_timeout + 0.5`` s,
  so a hung Redis (SIGSTOP, full backlog) never stalls a reconcile or the prober (REFERENCE
  "Operator rules": never block in reconcile). redis-py retries are off: one attempt, one answer.
- Errors are translated at this boundary into a small tree, raised ``from None`` with messages that
  name host, port and command but never the password (scrubbed even if a lower layer echoed it)::

      RedisAdminError
      +-- RedisUnavailable    no valid reply in time: refused, timed out, reset, still loading
      +-- RedisCommandError   Redis answered with an error, refused auth, or a verification failed

- The commands are methods of :class:`RedisConnection`, a frozen value naming one Redis (host,
  port, password, ``io_timeout``, and the ACL ``username`` and TLS CA when set) instead of that
  clump on every call; its ``repr`` leaves the password out. :class:`RedisAccess` is the part
  shared by every pod of a cluster (user, password, CA).
- TLS (``tls_ca`` set, a PEM bundle): the server's certificate must chain to that CA; its name is
  not checked, as redis-server's replication and redis-cli do not check it either (pod IPs change,
  certificates need not name them). :meth:`RedisConnection.served_certificate` returns the
  certificate a server presents, so a rotation can be verified end to end.
- ``promote`` implements REFERENCE "Promote (REPLICAOF NO ONE), verify role:master": it raises
  ``RedisCommandError`` unless INFO then says ``role:master``. ``failover_to`` is the planned
  switchover (``CLIENT PAUSE WRITE``, the target caught up, then ``FAILOVER TO host port FORCE``,
  Redis >= 6.2), returning once the target is master.
  ``bgsave`` only starts a save;
  ``bgsave_status`` reports it, so the operator requeues instead of waiting.
- ``observe`` parses INFO (replication, server, persistence, keyspace) into ``topology.RedisFacts``;
  ``ping`` is the prober's probe and, like Sentinel, counts ``PONG``, ``-LOADING`` and
  ``-MASTERDOWN`` as valid replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions as rexc
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from examples.rediscluster.shared.facts import NULL_REPLID, RedisFacts, Role
from examples.rediscluster.shared.security.tls import client_tls_context

__all__ = [
    "CLIENT_DEFAULTS",
    "DEFAULT_IO_TIMEOUT",
    "BgsaveStatus",
    "KeptConnection",
    "RedisAccess",
    "RedisAdminError",
    "RedisCommandError",
    "RedisConnection",
    "RedisUnavailable",
    "parse_facts",
    "parse_info",
    "tls_options",
]

DEFAULT_IO_TIMEOUT = 1.0
#: how long past its own timeout a ``FAILOVER`` may take to finish, and how often it is polled
HANDOVER_GRACE_SECONDS = 2.0
HANDOVER_POLL_SECONDS = 0.01


class RedisAdminError(Exception):
    """Base of the admin errors; ``host`` and ``port`` name the Redis."""

    def __init__(self, host: str, port: int, message: str) -> None:
        super().__init__(f"redis {host}:{port}: {message}")
        self.host = host
        self.port = port


class RedisUnavailable(RedisAdminError):
    """No valid reply in time (refused, timed out, connection lost, dataset loading)."""


class RedisCommandError(RedisAdminError):
    """Redis answered with an error, refused the credentials, or a post-condition did not hold."""


@dataclass(frozen=True, slots=True)
class BgsaveStatus:
    in_progress: bool
    last_status: str  # "ok" or "err"
    last_save_time: int  # unix seconds of the last successful save
    changes_since_last_save: int


def _scrub(text: str, password: str | None) -> str:
    return text.replace(password, "***") if password else text


def _translate(exc: BaseException, host: str, port: int, what: str, password: str | None) -> RedisAdminError:
    detail = _scrub(f"{type(exc).__name__}: {exc}", password)
    if isinstance(exc, rexc.AuthenticationError | rexc.AuthorizationError | rexc.ResponseError):
        return RedisCommandError(host, port, f"{what}: {detail}")
    if isinstance(exc, rexc.ConnectionError | rexc.TimeoutError | TimeoutError | OSError):
        return RedisUnavailable(host, port, f"{what}: {detail}")
    return RedisCommandError(host, port, f"{what}: {detail}")


def _is_valid_error_reply(exc: BaseException) -> bool:
    """Sentinel counts -LOADING and -MASTERDOWN as valid replies to PING."""
    return isinstance(exc, rexc.BusyLoadingError) or (
        isinstance(exc, rexc.ResponseError) and str(exc).startswith("MASTERDOWN")
    )


#: redis-py keywords of every client the operator makes. redis-py >= 7 builds a ``DriverInfo`` for
#: each client, reading its own package metadata (``importlib.metadata.version``) every time, and
#: sends ``CLIENT SETINFO`` on every connection: with a fresh connection per probe that lookup was
#: a fifth of the operator's CPU at 50 clusters (py-spy, fleet benchmark). ``driver_info=None``
#: skips both; older redis-py (no such keyword) computed its default once, at import.
CLIENT_DEFAULTS: dict[str, Any] = (
    {"driver_info": None} if "driver_info" in inspect.signature(aioredis.Redis.__init__).parameters else {}
)


def tls_options(ca_pem: str | None) -> dict[str, Any]:
    """redis-py keywords of a connection verified against ``ca_pem``: the chain, not the name
    (``shared.security.tls``: pods' certificates need not name their IPs); {} for plaintext."""
    if ca_pem is None:
        return {}
    return {"ssl": True, "ssl_ca_data": ca_pem, "ssl_cert_reqs": "required", "ssl_check_hostname": False}


def _client(conn: RedisConnection) -> aioredis.Redis:
    """One connection to ``conn`` (opened on the first command): its timeouts, TLS and ACL user;
    no retries; INFO replies kept as raw text."""
    client = aioredis.Redis(
        host=conn.host,
        port=conn.port,
        username=conn.username,
        password=conn.password,
        socket_timeout=conn.io_timeout,
        socket_connect_timeout=conn.io_timeout,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
        single_connection_client=True,
        **tls_options(conn.tls_ca),
        **CLIENT_DEFAULTS,
    )
    client.set_response_callback("INFO", lambda response, **_: response)
    return client


class _Session:
    """One connection kept open for a sequence of commands (``failover_to``'s handover, where each
    fresh connection's connect and handshake would lengthen the write pause); each command is
    bounded and its errors translated as a :func:`_call`'s are."""

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self.client = _client(conn)

    async def run(self, *command: str | int) -> Any:
        conn = self.conn
        try:
            async with asyncio.timeout(2 * conn.io_timeout + 0.5):
                return await self.client.execute_command(*command)  # type: ignore[no-untyped-call]
        except (rexc.RedisError, TimeoutError, OSError) as exc:
            what = " ".join(str(c) for c in command[:2])
            raise _translate(exc, conn.host, conn.port, what, conn.password) from None

    async def info_replication(self) -> dict[str, str]:
        return parse_info(str(await self.run("INFO", "replication")))

    async def aclose(self) -> None:
        with contextlib.suppress(rexc.RedisError, OSError):  # a broken connection has nothing to release
            await self.client.aclose()


@contextlib.asynccontextmanager
async def _session(conn: RedisConnection) -> AsyncIterator[_Session]:
    session = _Session(conn)
    try:
        yield session
    finally:
        await session.aclose()


#: closes of connections abandoned mid-command (held so the tasks are not collected early)
_closing: set[asyncio.Future[None]] = set()


async def _quiet_close(client: aioredis.Redis) -> None:
    with contextlib.suppress(rexc.RedisError, OSError):  # a broken connection has nothing to release
        await client.aclose()


class KeptConnection:
    """One connection to ``conn`` kept open across PINGs: the health prober's (a PING every half
    second per pod otherwise pays a connect, the AUTH and a close each time).

    ``ping`` has :meth:`RedisConnection.ping`'s meaning and bound (a valid reply or an error
    within ``2 * io_timeout + 0.5`` s, errors translated the same way). It opens the connection on
    first use; any failure closes it, so the next call starts on a fresh one. A *reused*
    connection that fails with a connection error (reset or closed: a restarted Redis, an idle
    timeout) is retried once at once on a fresh connection within the same bound, as redis-py
    retries a stale pooled connection; a timeout is not retried (a hung Redis is the answer).
    Not for concurrent calls (the prober runs one probe per pod at a time); ``aclose`` closes it
    for good (a ``ping`` then fails, even one in flight, and opens nothing).
    """

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self._client: aioredis.Redis | None = None
        self._closed = False

    @property
    def open(self) -> bool:
        return self._client is not None

    async def ping(self) -> None:
        conn = self.conn
        try:
            async with asyncio.timeout(2 * conn.io_timeout + 0.5):
                await self._ping()
        except TimeoutError as exc:
            raise _translate(exc, conn.host, conn.port, "PING", conn.password) from None

    async def _ping(self) -> None:
        conn = self.conn
        for attempt in (1, 2):
            if self._closed:
                raise RedisUnavailable(conn.host, conn.port, "PING: the kept connection was closed")
            reused = self._client is not None
            client = self._client = self._client or _client(conn)
            try:
                await client.execute_command("PING")  # type: ignore[no-untyped-call]
                return
            except (rexc.RedisError, OSError) as exc:
                if _is_valid_error_reply(exc):
                    return
                await self._reset()
                stale = isinstance(exc, rexc.ConnectionError | ConnectionError) and not isinstance(
                    exc, rexc.AuthenticationError
                )
                if attempt == 2 or not (reused and stale):
                    raise _translate(exc, conn.host, conn.port, "PING", conn.password) from None
            except BaseException:  # cancelled or cut off mid-command: the connection's state is unknown
                self._client = None
                _closing.add(task := asyncio.ensure_future(_quiet_close(client)))
                task.add_done_callback(_closing.discard)
                raise

    async def aclose(self) -> None:
        self._closed = True
        await self._reset()

    async def _reset(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await _quiet_close(client)


async def _call(
    conn: RedisConnection,
    *commands: tuple[str | int, ...],
    tolerate: Callable[[BaseException], bool] = lambda _: False,
) -> list[Any]:
    """Run ``commands`` in order on one fresh connection; return their replies (INFO as raw text).

    Every redis-py, asyncio or OS error becomes a ``RedisAdminError`` raised ``from None``, except
    errors ``tolerate`` accepts, which end the call quietly.
    """
    host, port, password, io_timeout = conn.host, conn.port, conn.password, conn.io_timeout
    client = _client(conn)
    replies: list[Any] = []
    what = ""
    error: RedisAdminError | None = None
    try:
        async with asyncio.timeout(2 * io_timeout + 0.5):
            for command in commands:
                what = " ".join(str(c) for c in command[:2])
                replies.append(await client.execute_command(*command))  # type: ignore[no-untyped-call]
    except (rexc.RedisError, TimeoutError, OSError) as exc:
        if not tolerate(exc):
            error = _translate(exc, host, port, what or "connect", password)
    finally:
        with contextlib.suppress(rexc.RedisError, OSError):  # a broken connection has nothing to release
            await client.aclose()
    if error is not None:
        raise error from None
    return replies


def _offset(fields: Mapping[str, str]) -> int:
    return int(fields.get("master_repl_offset", "0"))


def _failover_state(fields: Mapping[str, str]) -> str:
    return fields.get("master_failover_state", "no-failover")


async def _unpause(master: _Session) -> None:
    """``CLIENT UNPAUSE`` on the handover's connection, or on a fresh one if that one broke (the
    pause would otherwise last until it expires)."""
    try:
        await master.run("CLIENT", "UNPAUSE")
    except RedisAdminError:
        with contextlib.suppress(RedisAdminError):
            await _call(master.conn, ("CLIENT", "UNPAUSE"))


def parse_info(text: str) -> dict[str, str]:
    """``field:value`` lines of an INFO reply (section headers and blank lines skipped)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def _keys(fields: Mapping[str, str]) -> int:
    """Sum of ``keys=`` over the ``dbN:keys=..,expires=..`` lines of the keyspace section."""
    total = 0
    for key, value in fields.items():
        if key.startswith("db") and key[2:].isdigit():
            parts = dict(p.split("=", 1) for p in value.split(",") if "=" in p)
            total += int(parts.get("keys", "0"))
    return total


def _online_replicas(fields: Mapping[str, str]) -> frozenset[tuple[str, int]]:
    """``slaveN:ip=..,port=..,state=online,..`` lines of a master's replication section."""
    online = set()
    for key, value in fields.items():
        if key.startswith("slave") and key[5:].isdigit():
            parts = dict(p.split("=", 1) for p in value.split(",") if "=" in p)
            if parts.get("state") == "online" and "ip" in parts and parts.get("port", "").isdigit():
                online.add((parts["ip"], int(parts["port"])))
    return frozenset(online)


def parse_facts(fields: Mapping[str, str]) -> RedisFacts:
    """INFO fields → ``RedisFacts`` (``role:slave`` is ``Role.REPLICA``)."""
    replica = fields.get("role") == "slave"
    link_up = fields.get("master_link_status") == "up"
    down_since: float | None = None
    if replica and not link_up:
        raw = int(fields.get("master_link_down_since_seconds", "-1"))
        down_since = math.inf if raw < 0 else float(raw)  # -1: never connected
    return RedisFacts(
        role=Role.REPLICA if replica else Role.MASTER,
        run_id=fields.get("run_id", ""),
        master_replid=fields.get("master_replid", ""),
        master_replid2=fields.get("master_replid2", NULL_REPLID),
        master_repl_offset=int(fields.get("master_repl_offset", "0")),
        slave_repl_offset=int(fields["slave_repl_offset"]) if "slave_repl_offset" in fields else None,
        master_host=fields.get("master_host") if replica else None,
        master_port=int(fields["master_port"]) if replica and "master_port" in fields else None,
        master_link_up=link_up,
        master_link_down_since_seconds=down_since,
        replica_priority=int(fields.get("slave_priority", fields.get("replica_priority", "100"))),
        connected_replicas=int(fields.get("connected_slaves", "0")),
        keys=_keys(fields),
        loading=fields.get("loading", "0") == "1",
        uptime_seconds=int(fields.get("uptime_in_seconds", "0")),
        failover_state=fields.get("master_failover_state", "no-failover"),
        online_replicas=_online_replicas(fields),
    )


@dataclass(frozen=True, slots=True)
class RedisAccess:
    """How the operator reaches every Redis of one cluster: ACL user, password, TLS CA (PEM)."""

    password: str | None = field(default=None, repr=False)
    username: str | None = None
    tls_ca: str | None = field(default=None, repr=False)

    def at(self, host: str, port: int, io_timeout: float = DEFAULT_IO_TIMEOUT) -> RedisConnection:
        return RedisConnection(host, port, self.password, io_timeout, self.username, self.tls_ca)


@dataclass(frozen=True, slots=True)
class RedisConnection:
    """One Redis the operator administers: where it listens, its credentials and the I/O timeout.

    A value, not an open socket: every method opens one connection, runs its commands and closes
    it (see the module docstring for the timeouts and the errors). The password is left out of
    ``repr`` so a logged or printed connection never shows it.
    """

    host: str
    port: int
    password: str | None = field(default=None, repr=False)
    io_timeout: float = DEFAULT_IO_TIMEOUT
    username: str | None = None
    #: PEM of the CA the server's TLS certificate chains to; None: plaintext
    tls_ca: str | None = field(default=None, repr=False)

    async def served_certificate(self) -> bytes:
        """The DER certificate the server presents in its TLS handshake (verified against ``tls_ca``)."""
        if self.tls_ca is None:
            raise RedisCommandError(self.host, self.port, "served_certificate: not a TLS connection")
        try:
            async with asyncio.timeout(2 * self.io_timeout + 0.5):
                _, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=client_tls_context(self.tls_ca)
                )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise RedisUnavailable(
                self.host, self.port, f"TLS handshake: {type(exc).__name__}: {exc}"
            ) from None
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
        if not der:
            raise RedisCommandError(self.host, self.port, "TLS handshake: no certificate presented")
        return bytes(der)

    async def info(self) -> dict[str, str]:
        """The default INFO sections as a flat ``field -> value`` dict."""
        (text,) = await _call(self, ("INFO",))
        return parse_info(str(text))

    async def observe(self) -> RedisFacts:
        """What this Redis says about itself, for ``topology.NodeObservation.redis``."""
        return parse_facts(await self.info())

    async def ping(self) -> None:
        """Return on a valid reply: PONG, or -LOADING / -MASTERDOWN (Sentinel counts those as alive)."""
        await _call(self, ("PING",), tolerate=_is_valid_error_reply)

    async def replica_of(self, master: RedisConnection) -> None:
        """``REPLICAOF master.host master.port`` (also demotes a master). Syncing happens afterwards."""
        await _call(self, ("REPLICAOF", master.host, master.port))

    async def promote(self) -> None:
        """``REPLICAOF NO ONE``, then verify ``role:master``; ``RedisCommandError`` if it is not."""
        _, text = await _call(self, ("REPLICAOF", "NO", "ONE"), ("INFO", "replication"))
        role = parse_info(str(text)).get("role")
        if role != "master":
            raise RedisCommandError(self.host, self.port, f"REPLICAOF NO ONE: still role:{role}")

    async def failover_to(
        self, target: RedisConnection, *, failover_timeout_ms: int = 5000, force: bool = True
    ) -> None:
        """A planned switchover of this master to ``target``, carried out to its end.

        Redis's own ``FAILOVER TO`` pauses writes and then waits for the target to *acknowledge*
        the master's offset; a replica acknowledges once a second (``REPLCONF ACK`` from its
        replication cron, and the master sends no ``GETACK`` while clients are paused), so that
        wait alone pauses writes 0-1 s. This method pauses writes itself instead
        (``CLIENT PAUSE ms WRITE``, expiring on its own ``2 * HANDOVER_GRACE_SECONDS`` after the
        timeout should the operator die), polls until the target has *processed* the master's
        frozen offset (its INFO ``master_repl_offset``), and only then runs
        ``FAILOVER TO target FORCE TIMEOUT 1``: the handover no longer waits for an
        acknowledgement the operator has already checked, and no write the master accepted is
        lost. If the target is still behind after ``failover_timeout_ms``, ``force`` hands over
        anyway (as ``FAILOVER ... FORCE`` did); without it the pause is lifted and
        ``RedisCommandError`` raised. It then polls :meth:`failover_state` until ``no-failover``,
        lifts the pause and returns once ``target`` answers ``role:master`` — so a caller can move
        the master label at once. ``RedisCommandError`` when the handover was aborted or is still
        going after the timeout plus ``HANDOVER_GRACE_SECONDS``.

        The handover runs on one connection to each of the two servers (``INFO replication``
        polls): a fresh connection per poll — connect, the client's handshake, a full INFO — made
        each poll several round trips, and under load (~10 on two cores) the pause lasted
        0.3-0.5 s longer than the handover itself.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + failover_timeout_ms / 1000
        pause_ms = failover_timeout_ms + int(2 * HANDOVER_GRACE_SECONDS * 1000)
        async with _session(self) as master, _session(target) as replica:
            await master.run("CLIENT", "PAUSE", pause_ms, "WRITE")
            try:
                frozen = _offset(await master.info_replication())
                while not (caught_up := _offset(await replica.info_replication()) >= frozen):
                    if loop.time() > deadline:
                        break
                    await asyncio.sleep(HANDOVER_POLL_SECONDS)  # poll interval, bounded by the deadline
                if not caught_up and not force:
                    raise RedisCommandError(
                        target.host, target.port, f"still behind offset {frozen} after the FAILOVER timeout"
                    )
                await master.run("FAILOVER", "TO", target.host, target.port, "FORCE", "TIMEOUT", 1)
                deadline += HANDOVER_GRACE_SECONDS
                while (state := _failover_state(await master.info_replication())) != "no-failover":
                    if loop.time() > deadline:
                        raise RedisCommandError(
                            self.host, self.port, f"FAILOVER still {state} after its timeout"
                        )
                    await asyncio.sleep(HANDOVER_POLL_SECONDS)  # poll interval, bounded by the deadline
            finally:
                await _unpause(master)
            role = (await replica.info_replication()).get("role")
        if role != "master":
            raise RedisCommandError(target.host, target.port, f"FAILOVER to it ended with role:{role}")

    async def replication_offset(self) -> int:
        """INFO ``master_repl_offset``: what a master wrote, or what a replica has processed."""
        return _offset(await self.info())

    async def reload_tls(self, settings: Mapping[str, str]) -> None:
        """One ``CONFIG SET`` of every TLS file setting (all or none): Redis re-reads the files."""
        pairs = [part for item in settings.items() for part in item]
        try:
            await _call(self, ("CONFIG", "SET", *pairs))
        except RedisCommandError as exc:
            raise RedisCommandError(self.host, self.port, f"reloading TLS failed: {exc}") from None

    async def acl_users(self) -> list[str]:
        """``ACL USERS``: the names of every user."""
        (names,) = await _call(self, ("ACL", "USERS"))
        return [str(n) for n in names]

    async def acl_load(self) -> None:
        """``ACL LOAD``: re-read the ACL file (all or nothing: a refused file changes no user)."""
        await _call(self, ("ACL", "LOAD"))

    async def acl_check(self, scratch: str, rules: list[str]) -> str | None:
        """Try ``rules`` on the disabled user ``scratch`` (then deleted); Redis' refusal, or None."""
        try:
            await _call(self, ("ACL", "SETUSER", scratch, "reset", *rules))
        except RedisCommandError as exc:
            return str(exc).split("ACL SETUSER: ", 1)[-1].removeprefix("ResponseError: ")
        finally:
            with contextlib.suppress(RedisAdminError):
                await _call(self, ("ACL", "DELUSER", scratch))
        return None

    async def failover_state(self) -> str:
        """``master_failover_state``: ``no-failover``, ``waiting-for-sync`` or ``failover-in-progress``."""
        return _failover_state(await self.info())

    async def bgsave(self) -> bool:
        """Start ``BGSAVE``; False when a save is already running (then just poll the status)."""
        try:
            await _call(self, ("BGSAVE",))
        except RedisCommandError as exc:
            if "already in progress" in str(exc):
                return False
            raise
        return True

    async def bgsave_status(self) -> BgsaveStatus:
        """Whether a background save runs, and how the last one ended (INFO persistence)."""
        fields = await self.info()
        return BgsaveStatus(
            in_progress=fields.get("rdb_bgsave_in_progress") == "1",
            last_status=fields.get("rdb_last_bgsave_status", "ok"),
            last_save_time=int(fields.get("rdb_last_save_time", "0")),
            changes_since_last_save=int(fields.get("rdb_changes_since_last_save", "0")),
        )

    async def configure(self, settings: Mapping[str, str | int]) -> None:
        """``CONFIG SET`` each setting (e.g. ``min-replicas-to-write``, ``masterauth``).

        Values are never put in error messages (``masterauth`` is a password).
        """
        for name, value in settings.items():
            try:
                await _call(self, ("CONFIG", "SET", name, value))
            except RedisCommandError:
                raise RedisCommandError(self.host, self.port, f"CONFIG SET {name} was refused") from None
