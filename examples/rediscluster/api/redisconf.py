"""``spec.redisConfig`` that cannot inject: Redis's own tokenizer, a tenant allowlist, safe lines.

A tenant's ``redisConfig`` map (directive -> arguments) ends up in redis.conf, a file Redis reads
with ``sdssplitargs`` (``src/sds.c``): arguments split on blanks; double quotes take the C escapes
``\\n \\r \\t \\b \\a \\\\ \\" \\xhh`` (any other escaped character stands for itself); single
quotes are literal except ``\\'``; a quote left open, or a closing quote followed by anything but
a blank, is an error; the first argument (the directive) is lower-cased. So a key written
``'"dir"'`` *is* ``dir``, and a value holding a newline (or ``"\\n"`` inside quotes) starts a new
directive. This module parses keys and values exactly that way (:func:`split_args`), accepts only
directives of :data:`ALLOWED` (Redis 7 settings that change nothing but the tenant's own server's
behaviour), and renders each accepted entry as one line whose arguments Redis reads back
unchanged (:meth:`Directive.line`).

Guarantees:

- :func:`split_args` gives the arguments Redis's ``sdssplitargs`` gives for the same text, and
  raises :class:`ConfigSyntaxError` where it fails (unbalanced quotes, a closing quote followed
  by a non-blank); text after a NUL is ignored, as C does;
- :func:`check` returns a :class:`Directive` only for a key that tokenizes to one word, lower-cased
  in :data:`ALLOWED`, with a value of printable ASCII without backslashes (:data:`VALUE_PATTERN`:
  no control character, no newline) that tokenizes cleanly; anything else raises
  :class:`RedisConfigError` naming the key as written (and its canonical form when they differ)
  and why: operator-managed or dangerous (:data:`REFUSED` says which), unknown, bad characters,
  bad quoting, bad arguments;
- ``split_args(d.line()) == [d.name, *d.args]`` for every directive :func:`check` returns: the
  rendered line is one line and Redis reads exactly those arguments from it;
- :func:`render` checks every entry (in key order) and returns the lines, or raises on the first
  bad one; :func:`problems` lists every bad entry (for an admission webhook's answer);
- :func:`cel_validations` gives the CRD's ``x-kubernetes-validations`` for the ``redisConfig`` map,
  built from the same :data:`ALLOWED`, :data:`KEY_PATTERN` and :data:`VALUE_PATTERN`: whatever the
  apiserver admits under them (lower-case canonical keys) :func:`check` accepts unless its
  quoting is broken, and whatever :func:`check` refuses by key or characters the apiserver
  refuses too, naming the (first) offending key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALLOWED",
    "KEY_PATTERN",
    "MAX_ENTRIES",
    "MAX_VALUE_LENGTH",
    "REFUSED",
    "VALUE_PATTERN",
    "ConfigSyntaxError",
    "Directive",
    "RedisConfigError",
    "canonical_key",
    "cel_validations",
    "check",
    "crd_schema",
    "problems",
    "quote_arg",
    "render",
    "split_args",
]

# -- the allowlist: ONE source for the Python check and the CRD's CEL rules -----------------------
#: Directives a tenant may set: each changes only how the tenant's own server uses its own memory,
#: CPU and clients. Nothing here names a file, an address, a port, a password, a command, a
#: module, the replication topology, cluster membership or persistence the operator relies on.
ALLOWED: frozenset[str] = frozenset({
    # Memory limit and eviction: the tenant's own data under its own pod's memory limit.
    "maxmemory", "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity",
    "maxmemory-clients", "lfu-log-factor", "lfu-decay-time", "active-expire-effort",
    # Idle clients and TCP keepalive of client connections (the replication link is exempt).
    "timeout", "tcp-keepalive",
    # Background task frequency: CPU use of the tenant's own server.
    "hz", "dynamic-hz",
    # Lazy freeing: whether deletes free memory in a background thread; semantics unchanged.
    "lazyfree-lazy-eviction", "lazyfree-lazy-expire", "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush", "replica-lazy-flush",
    # Diagnostics kept in memory and read with SLOWLOG / LATENCY (no file, no network).
    "slowlog-log-slower-than", "slowlog-max-len", "latency-monitor-threshold",
    "latency-tracking", "latency-tracking-info-percentiles", "acllog-max-len",
    # Keyspace notifications: Pub/Sub messages to the tenant's own clients.
    "notify-keyspace-events",
    # Encoding thresholds of small aggregates (memory/CPU trade-offs; data unchanged). The
    # ziplist names are Redis 7's aliases of the listpack ones; set-max-listpack-* need 7.2.
    "hash-max-listpack-entries", "hash-max-listpack-value", "hash-max-ziplist-entries",
    "hash-max-ziplist-value", "list-max-listpack-size", "list-max-ziplist-size",
    "list-compress-depth", "set-max-intset-entries", "set-max-listpack-entries",
    "set-max-listpack-value", "zset-max-listpack-entries", "zset-max-listpack-value",
    "zset-max-ziplist-entries", "zset-max-ziplist-value", "stream-node-max-bytes",
    "stream-node-max-entries", "hll-sparse-max-bytes",
    # Active rehashing and defragmentation: CPU spent to give memory back.
    "activerehashing", "activedefrag", "active-defrag-ignore-bytes",
    "active-defrag-threshold-lower", "active-defrag-threshold-upper", "active-defrag-cycle-min",
    "active-defrag-cycle-max", "active-defrag-max-scan-fields", "jemalloc-bg-thread",
    # Client buffers; client-output-buffer-limit only for the normal and pubsub classes (the
    # replica class sizes the operator's replication links: see check()).
    "client-output-buffer-limit", "client-query-buffer-limit", "tracking-table-max-keys",
    # Scripts: when a long script starts answering BUSY (it never stops a script by itself).
    "busy-reply-threshold", "lua-time-limit",
    # AOF/RDB write tuning: how often data written where the operator says is fsynced/compressed;
    # whether and where persistence happens (appendonly, save, dir, file names) is the operator's.
    "appendfsync", "no-appendfsync-on-rewrite", "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size", "aof-rewrite-incremental-fsync", "rdb-save-incremental-fsync",
    "rdbcompression", "rdbchecksum", "stop-writes-on-bgsave-error",
    # A larger backlog only costs memory and spares full resynchronisations.
    "repl-backlog-size", "repl-backlog-ttl",
    # Logical databases of replication mode (memory only; cluster mode serves database 0 only).
    "databases",
})  # fmt: skip

#: Directives refused with the reason a refusal gives (every directive not in ALLOWED is refused;
#: these get a specific reason). "managed": the operator writes it; the others are dangerous.
_MANAGED = "is managed by the operator"
REFUSED: Mapping[str, str] = {
    **dict.fromkeys(
        ("port", "bind", "bind-source-addr", "dir", "dbfilename", "appendfilename", "appenddirname",
         "appendonly", "save", "aof-use-rdb-preamble", "aof-timestamp-enabled", "replicaof",
         "slaveof", "replica-read-only", "slave-read-only", "replica-priority", "slave-priority",
         "replica-serve-stale-data", "min-replicas-to-write", "min-replicas-max-lag",
         "requirepass", "masterauth", "masteruser", "aclfile", "user", "acl-pubsub-default",
         "protected-mode", "shutdown-timeout", "shutdown-on-sigterm", "shutdown-on-sigint",
         "maxclients", "daemonize", "supervised"),
        _MANAGED,
    ),
    **{f"cluster-{k}": _MANAGED for k in (
        "enabled", "config-file", "node-timeout", "port", "announce-ip", "announce-port",
        "announce-bus-port", "announce-tls-port", "announce-hostname", "require-full-coverage",
        "allow-replica-migration", "migration-barrier", "replica-no-failover", "slave-no-failover",
        "allow-reads-when-down", "replica-validity-factor", "slave-validity-factor",
        "preferred-endpoint-type", "link-sendbuf-limit", "allow-pubsubshard-when-down")},
    **{f"tls-{k}": _MANAGED for k in (
        "port", "cert-file", "key-file", "key-file-pass", "client-cert-file", "client-key-file",
        "client-key-file-pass", "ca-cert-file", "ca-cert-dir", "dh-params-file", "auth-clients",
        "replication", "cluster", "protocols", "ciphers", "ciphersuites", "prefer-server-ciphers",
        "session-caching", "session-cache-size", "session-cache-timeout")},
    "include": "reads another file into the configuration",
    "loadmodule": "loads native code into the server",
    "rename-command": "hides or renames commands the operator and clients rely on",
    "enable-debug-command": "enables DEBUG (crash, sleep, reload, arbitrary memory reads)",
    "enable-module-command": "enables MODULE LOAD (native code at run time)",
    "enable-protected-configs": "lets clients change protected settings such as dir",
    "replica-announce-ip": "makes the node announce another address",
    "replica-announce-port": "makes the node announce another address",
    "slave-announce-ip": "makes the node announce another address",
    "slave-announce-port": "makes the node announce another address",
    "unixsocket": "creates a socket file on the node", "unixsocketperm": "sets socket file modes",
    "logfile": "writes a file the operator does not choose", "pidfile": "writes a file anywhere",
    "syslog-enabled": "sends logs to the node's syslog", "syslog-ident": "sets the syslog identity",
    "syslog-facility": "sets the syslog facility",
    "oom-score-adj": "changes the kernel's OOM priority", "oom-score-adj-values": "same",
    "disable-thp": "changes the process's memory settings", "ignore-warnings": "hides warnings",
    "proc-title-template": "changes the process title", "set-proc-title": "same",
    "crash-log-enabled": "changes crash handling", "crash-memcheck-enabled": "same",
    "proto-max-bulk-len": "lets one request exceed the memory limit",
    "rdb-key-save-delay": "a debugging knob (sleeps per key while saving)",
    "key-load-delay": "a debugging knob (sleeps per key while loading)",
}  # fmt: skip

#: The canonical spelling of a key the apiserver admits (CEL), and of every ALLOWED name.
KEY_PATTERN = "^[a-z0-9-]+$"
#: What a raw value may hold: printable ASCII (space to tilde) except the backslash — no control
#: character, no newline, no escape sequence that could make one.
VALUE_PATTERN = "^[ -\\[\\]-~]*$"
#: At most this many entries, each value at most this long (bounded CEL cost, bounded redis.conf).
MAX_ENTRIES = 64
MAX_VALUE_LENGTH = 1024

_KEY_RE = re.compile(KEY_PATTERN)
_VALUE_RE = re.compile(VALUE_PATTERN)
_BLANKS = frozenset(" \t\n\v\f\r")  # C isspace(): what sdssplitargs skips between arguments
_ENDS = frozenset(" \n\r\t")  # what ends an unquoted argument (besides the end of the text)
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "a": "\a"}
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/+*%@,=")
_OUTPUT_BUFFER_CLASSES = frozenset({"normal", "pubsub"})


class ConfigSyntaxError(ValueError):
    """Text Redis's ``sdssplitargs`` refuses (Redis fails to start on such a line)."""


class RedisConfigError(ValueError):
    """A ``redisConfig`` entry refused; ``key`` is the key as written, ``reason`` why."""

    def __init__(self, key: str, reason: str, canonical: str | None = None) -> None:
        self.key, self.reason, self.canonical = key, reason, canonical
        shown = f"{key!r}" if canonical is None or canonical == key else f"{key!r} (that is {canonical})"
        super().__init__(f"redisConfig key {shown}: {reason}")


def split_args(line: str) -> list[str]:
    """The arguments Redis reads from ``line`` (a mirror of ``sdssplitargs``; see the module
    docstring). ``\\xhh`` gives the character ``chr(0xhh)``."""
    nul = line.find("\0")
    if nul >= 0:
        line = line[:nul]
    args: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _BLANKS:
            i += 1
        if i >= n:
            return args
        current: list[str] = []
        while i < n and line[i] not in _ENDS:
            if line[i] in "\"'":
                i = _quoted(line, i + 1, line[i], current)
                break  # a closing quote ends the argument
            current.append(line[i])
            i += 1
        args.append("".join(current))


def _quoted(line: str, i: int, quote: str, out: list[str]) -> int:
    """Read the quoted text starting at ``line[i]`` into ``out``; the index after the closing quote."""
    n = len(line)
    while i < n:
        c = line[i]
        if c == quote:
            if i + 1 < n and line[i + 1] not in _BLANKS:
                raise ConfigSyntaxError(f"a closing quote must be followed by a blank: {line!r}")
            return i + 1
        if c == "\\" and quote == '"' and i + 1 < n:
            code = line[i + 2 : i + 4]
            if line[i + 1] == "x" and len(code) == 2 and set(code) <= _HEX:
                out.append(chr(int(code, 16)))
                i += 4
            else:
                out.append(_ESCAPES.get(line[i + 1], line[i + 1]))
                i += 2
            continue
        if c == "\\" and quote == "'" and line[i + 1 : i + 2] == "'":
            out.append("'")
            i += 2
            continue
        out.append(c)
        i += 1
    raise ConfigSyntaxError(f"unbalanced quotes: {line!r}")


def quote_arg(arg: str) -> str:
    """``arg`` as one redis.conf argument: bare when made of safe characters, else double-quoted
    with C escapes (``split_args`` reads it back as ``arg``). Characters above U+00FF have no
    redis.conf spelling here: ValueError."""
    if arg and all(c in _SAFE for c in arg):
        return arg
    out = ['"']
    for c in arg:
        if c in '\\"':
            out.append("\\" + c)
        elif " " <= c <= "~" or c == "'":
            out.append(c)
        elif ord(c) <= 0xFF:
            out.append(f"\\x{ord(c):02x}")
        else:
            raise ValueError(f"character {c!r} cannot be written in redis.conf")
    out.append('"')
    return "".join(out)


@dataclass(frozen=True)
class Directive:
    """One accepted redis.conf directive: its canonical name and its arguments."""

    name: str
    args: tuple[str, ...]

    def line(self) -> str:
        """The directive as one redis.conf line, every argument quoted as it needs."""
        return " ".join(quote_arg(a) for a in (self.name, *self.args))


def canonical_key(key: str) -> str:
    """The directive Redis sees for ``key``: tokenized as Redis does, lower-cased; ValueError
    unless it is exactly one argument."""
    try:
        words = split_args(key)
    except ConfigSyntaxError as exc:
        raise ValueError(f"cannot be read as a directive name: {exc}") from None
    if len(words) != 1 or not words[0]:
        raise ValueError("a key must be exactly one directive name")
    return words[0].lower()


def check(key: str, value: str) -> Directive:
    """The directive ``key: value`` stands for, or :class:`RedisConfigError` (module docstring)."""
    try:
        name = canonical_key(key)
    except ValueError as exc:
        raise RedisConfigError(key, str(exc)) from None
    if name in REFUSED:
        raise RedisConfigError(key, f"{name} {REFUSED[name]}", name)
    if name not in ALLOWED or not _KEY_RE.fullmatch(name):
        raise RedisConfigError(key, f"{name} is not a directive tenants may set (see the allowlist)", name)
    if len(value) > MAX_VALUE_LENGTH:
        raise RedisConfigError(key, f"the value is longer than {MAX_VALUE_LENGTH} characters", name)
    if not _VALUE_RE.fullmatch(value):  # fullmatch: Python's $ also matches before a final newline
        bad = next(c for c in value if not _VALUE_RE.fullmatch(c))
        raise RedisConfigError(
            key, f"the value holds {bad!r}: only printable ASCII without backslashes, on one line", name
        )
    try:
        args = tuple(split_args(value)) or ("",)
    except ConfigSyntaxError as exc:
        raise RedisConfigError(key, f"the value is not valid redis.conf text ({exc})", name) from None
    if name == "client-output-buffer-limit":
        _check_output_buffer_limits(key, name, args)
    return Directive(name, args)


def _check_output_buffer_limits(key: str, name: str, args: tuple[str, ...]) -> None:
    if len(args) % 4:
        raise RedisConfigError(key, "give '<class> <hard> <soft> <seconds>' groups of four", name)
    classes = args[::4]
    if not set(classes) <= _OUTPUT_BUFFER_CLASSES:
        others = sorted(set(classes) - _OUTPUT_BUFFER_CLASSES)
        raise RedisConfigError(key, f"only the normal and pubsub classes may be set, not {others}", name)


def _directives(config: Mapping[str, str]) -> tuple[list[Directive], list[RedisConfigError]]:
    """Every entry checked in key order: the accepted directives and the refusals (a directive
    named by two keys, e.g. ``maxmemory`` and ``MAXMEMORY``, is refused the second time)."""
    accepted: list[Directive] = []
    refused: list[RedisConfigError] = []
    seen: dict[str, str] = {}
    for key in sorted(config):
        try:
            directive = check(key, config[key])
            if directive.name in seen:
                raise RedisConfigError(
                    key, f"the same directive as key {seen[directive.name]!r}", directive.name
                )
        except RedisConfigError as exc:
            refused.append(exc)
            continue
        seen[directive.name] = key
        accepted.append(directive)
    return accepted, refused


def _too_many(config: Mapping[str, str]) -> str | None:
    return (
        f"redisConfig has {len(config)} entries; at most {MAX_ENTRIES}" if len(config) > MAX_ENTRIES else None
    )


def problems(config: Mapping[str, str]) -> list[str]:
    """One message per refused entry (key order), each naming its key; empty when all pass."""
    too_many = _too_many(config)
    return ([too_many] if too_many else []) + [str(exc) for exc in _directives(config)[1]]


def render(config: Mapping[str, str]) -> list[str]:
    """The redis.conf lines of ``config`` (key order); :class:`RedisConfigError` for the first
    refused entry, ValueError when the map has more than :data:`MAX_ENTRIES` entries."""
    too_many = _too_many(config)
    if too_many:
        raise ValueError(too_many)
    accepted, refused = _directives(config)
    if refused:
        raise refused[0]
    return [d.line() for d in accepted]


# -- CEL for the CRD ------------------------------------------------------------------------------
def _cel_string(text: str) -> str:
    """``text`` as a CEL single-quoted string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cel_key_ok(var: str) -> str:
    names = ", ".join(_cel_string(n) for n in sorted(ALLOWED))
    return f"{var}.matches({_cel_string(KEY_PATTERN)}) && {var} in [{names}]"


def cel_validations() -> list[dict[str, str]]:
    """The ``x-kubernetes-validations`` of the ``redisConfig`` map (an object whose values are
    strings): keys canonical and allowed, values printable ASCII without backslashes; a refusal
    names the (first) offending key. Only the first: the apiserver's cost estimate of joining
    every offending key (keys of a map have no declared length) exceeds its budget 100-fold, so
    it refuses such a CRD."""
    key_ok = _cel_key_ok("k")
    value_ok = f"self[k].matches({_cel_string(VALUE_PATTERN)})"
    return [
        {
            "rule": f"self.all(k, {key_ok})",
            "messageExpression": (
                "'redisConfig may not set ' + self.filter(k, !(" + key_ok + "))[0]"
                " + ' (allowed: lower-case tenant-safe Redis directives; dir, port, include,"
                " loadmodule, rename-command and other operator-managed or dangerous ones are refused)'"
            ),
            "reason": "FieldValueForbidden",
        },
        {
            "rule": f"self.all(k, {value_ok})",
            "messageExpression": (
                "'redisConfig values must be printable ASCII without backslashes or newlines: ' + "
                f"self.filter(k, !{value_ok})[0]"
            ),
            "reason": "FieldValueInvalid",
        },
    ]


def crd_schema() -> dict[str, Any]:
    """The OpenAPI schema of the ``redisConfig`` property: a bounded map of strings with
    :func:`cel_validations` (what a CRD, or a pydantic field's ``json_schema_extra``, carries)."""
    return {
        "type": "object",
        "maxProperties": MAX_ENTRIES,
        "additionalProperties": {"type": "string", "maxLength": MAX_VALUE_LENGTH},
        "x-kubernetes-validations": cel_validations(),
    }
