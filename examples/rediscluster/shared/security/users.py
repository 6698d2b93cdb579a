"""ACL users of a RedisCluster (``spec.users``): the ACL file, its checks, and how it reaches Redis.

With ``spec.users`` set (even ``[]``), every pod loads its users from an ACL file
(``aclfile``) mounted from the Secret ``<name>-acl``, which the operator owns and writes:

- ``users.acl``: one ``user`` line per spec user — ``on``, the SHA-256 of its password
  (``#<hex>``: the password itself is in no file, ConfigMap or argv) and its ``rules`` — plus the
  operator's own users: :data:`OPERATOR_USER` (the commands the operator runs and nothing else:
  no key, no channel — it cannot read data; in cluster mode also :data:`CLUSTER_OPERATOR_RULES`,
  where only ``MIGRATE`` and what it sends the target may touch keys), :data:`REPLICATION_USER`
  (``psync``/``replconf``/``sync``/``ping``, and ``cluster|nodes`` in cluster mode: replicas and
  backup Jobs authenticate with it, ``masteruser``), and
  ``default`` (``off`` with ``disableDefaultUser``; else the ``spec.auth`` password, or
  ``nopass``); a last, disabled user ``pyctrl-generation-<hash>`` names the file's generation;
- ``operator-password`` and ``replication-password``: random, generated once, kept afterwards.

Guarantees:

- rules are checked before they are applied, twice: :func:`parse_rules` refuses what the spec may
  not say (password tokens such as ``>pw``/``nopass``, ``on``/``off``/``reset``, unbalanced
  selectors) without Redis — the webhook runs it too; then, before the Secret is written, every
  rule set is tried with ``ACL SETUSER`` on a scratch user of a pod that answers (Redis' own
  parser, the same version as the pods; ``ACL DRYRUN`` is no validator: it checks a command
  against an existing user), which is deleted afterwards. A refused rule is an ``InvalidSpec``
  naming ``spec.users[i].rules``; nothing is written, loaded or restarted. While no pod answers
  (a new cluster), the file holds the operator's users only and the spec's are added once a pod
  can check them;
- a user's Secret or key that is missing is an ``InvalidSpec`` naming ``spec.users[i].passwordSecret``;
- changes reach running pods without a restart: the node swaps the mounted file, and the
  operator runs ``ACL LOAD`` (all or nothing) on every pod whose ``ACL USERS`` lacks the current
  generation, until each has it;
- a password is never logged, put in an Event, status, ConfigMap or argv.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from examples.rediscluster.api import RedisCluster, RedisUser
from examples.rediscluster.shared.redis_admin import RedisAdminError, RedisConnection
from pyctrl.client import Client, Reader, Secret
from pyctrl.client.errors import NotFound
from pyctrl.controllerutil import set_controller_reference
from pyctrl.log import get_logger

__all__ = [
    "ACL_DIR",
    "ACL_FILE",
    "ACL_VOLUME",
    "CLUSTER_OPERATOR_RULES",
    "CLUSTER_REPLICATION_RULES",
    "OPERATOR_RULES",
    "OPERATOR_USER",
    "REPLICATION_USER",
    "AclFile",
    "AclState",
    "InvalidUsers",
    "UserSync",
    "acl_file",
    "acl_secret_name",
    "check_names",
    "generated_passwords",
    "operator_password",
    "parse_rules",
]

ACL_DIR = "/etc/redis-acl"
ACL_VOLUME = "acl"
ACL_FILE = f"{ACL_DIR}/users.acl"
OPERATOR_USER = "pyctrl-operator"
REPLICATION_USER = "pyctrl-replication"
SCRATCH_USER = "pyctrl-rule-check"
_RESERVED_PREFIX = "pyctrl-"
#: every command the operator sends (redis_admin), the rule checks and the reloads; no key, no channel
OPERATOR_RULES = (
    "resetkeys resetchannels -@all +ping +info +role +replicaof +slaveof +failover +bgsave "
    "+config|get +config|set +acl|load +acl|users +acl|setuser +acl|deluser +client|setname "
    "+client|pause +client|unpause"
)
#: cluster mode adds (``cluster.admin``, ``cluster.mover``): reading and changing the cluster's
#: membership and slots, and moving keys — ``MIGRATE`` on the source, and on the target what
#: MIGRATE sends as the operator's user (``AUTH2``): ``SELECT``, ``RESTORE-ASKING``. Only those
#: three commands may touch keys (the selector); no command reads a value back to the operator
#: (``CLUSTER GETKEYSINSLOT`` lists key names, which a slot move needs).
CLUSTER_OPERATOR_RULES = (
    "+dbsize +cluster|nodes +cluster|info +cluster|meet +cluster|addslotsrange +cluster|replicate "
    "+cluster|forget +cluster|failover +cluster|reset +cluster|setslot +cluster|getkeysinslot "
    "(~* +migrate +restore-asking +select)"
)
REPLICATION_RULES = "resetkeys resetchannels -@all +psync +replconf +sync +ping"
#: cluster mode: a shard's backup Job checks its master's slots (``CLUSTER NODES``) after the RDB
CLUSTER_REPLICATION_RULES = "+cluster|nodes"
log = get_logger("rediscluster.users")
#: tokens the spec may not use: passwords come from passwordSecret, the operator sets on/reset
_FORBIDDEN = {"on", "off", "nopass", "resetpass", "reset"}


class InvalidUsers(ValueError):
    """``spec.users`` cannot be applied; the message names the field."""


def acl_secret_name(cluster: RedisCluster) -> str:
    return f"{cluster.name}-acl"


def parse_rules(rules: str, where: str) -> list[str]:
    """The ACL SETUSER arguments of ``rules`` (a selector ``( ... )`` stays one argument)."""
    args: list[str] = []
    group: list[str] | None = None
    for token in rules.split():
        if token.lstrip("(")[:1] in (">", "<", "#", "!"):  # never echoed: it may be a password
            raise InvalidUsers(
                f"{where}: a password rule ({token.lstrip('(')[0]}...) is not allowed: "
                "passwords come from passwordSecret"
            )
        if group is not None:
            group.append(token)
            if token.endswith(")"):
                args.append(" ".join(group))
                group = None
            continue
        if token.startswith("(") and not token.endswith(")"):
            group = [token]
            continue
        if token.lower() in _FORBIDDEN:
            raise InvalidUsers(
                f"{where}: {token!r} is not allowed (the operator turns users on, with passwordSecret)"
            )
        args.append(token)
    if group is not None:
        raise InvalidUsers(f"{where}: selector {' '.join(group)!r} has no closing ')'")
    return args


def _hash(password: str) -> str:
    return "#" + hashlib.sha256(password.encode()).hexdigest()


@dataclass(frozen=True)
class AclFile:
    """The desired contents of the ``<name>-acl`` Secret (see the module docstring)."""

    operator_password: str = field(repr=False)
    replication_password: str = field(repr=False)
    text: str = field(repr=False)
    #: the disabled user naming this generation of the file (see ``ACL USERS``)
    generation: str
    #: the redis_exporter sidecar's password (None: no exporter, no such user)
    exporter_password: str | None = field(default=None, repr=False)

    def data(self) -> dict[str, str]:
        """The Secret's ``data`` (base64)."""
        plain = {
            "users.acl": self.text,
            "operator-password": self.operator_password,
            "replication-password": self.replication_password,
        }
        if self.exporter_password is not None:
            plain["exporter-password"] = self.exporter_password
        return {k: base64.b64encode(v.encode()).decode() for k, v in plain.items()}


def acl_file(
    cluster: RedisCluster,
    passwords: Sequence[str],
    *,
    default_password: str | None,
    generated: tuple[str, str],
    include_spec_users: bool,
    exporter_password: str | None = None,
) -> AclFile:
    """The ACL file of ``cluster``; ``passwords[i]`` is ``spec.users[i]``'s, ``generated`` the
    operator's and the replication user's (:func:`generated_passwords`); with
    ``exporter_password``, the exporter sidecar's least-privilege user too (``shared.exporter``)."""
    from examples.rediscluster.shared.exporter import EXPORTER_RULES, EXPORTER_USER  # (an import cycle)

    operator_password, replication_password = generated
    spec = cluster.spec
    if spec.disable_default_user:
        default = "user default off resetkeys resetchannels -@all"
    elif default_password is not None:
        default = f"user default on {_hash(default_password)} ~* &* +@all"
    else:
        default = "user default on nopass ~* &* +@all"
    operator_rules, replication_rules = OPERATOR_RULES, REPLICATION_RULES
    if spec.mode == "cluster":
        operator_rules = f"{operator_rules} {CLUSTER_OPERATOR_RULES}"
        replication_rules = f"{replication_rules} {CLUSTER_REPLICATION_RULES}"
    lines = [
        default,
        f"user {OPERATOR_USER} on {_hash(operator_password)} {operator_rules}",
        f"user {REPLICATION_USER} on {_hash(replication_password)} {replication_rules}",
    ]
    if exporter_password is not None:
        lines.append(f"user {EXPORTER_USER} on {_hash(exporter_password)} {EXPORTER_RULES}")
    if include_spec_users:
        for i, (user, password) in enumerate(zip(spec.users or [], passwords, strict=True)):
            rules = " ".join(parse_rules(user.rules, f"spec.users[{i}].rules"))
            lines.append(f"user {user.name} on {_hash(password)} {rules}".rstrip())
    generation = f"pyctrl-generation-{hashlib.sha256(chr(10).join(lines).encode()).hexdigest()[:16]}"
    lines.append(f"user {generation} off")
    text = "".join(f"{line}\n" for line in lines)
    return AclFile(operator_password, replication_password, text, generation, exporter_password)


def generated_passwords(current: Mapping[str, str] | None) -> tuple[str, str]:
    """(operator's, replication user's) password: those of the existing Secret's base64 ``data``,
    else new random ones."""

    def kept(key: str) -> str:
        value = (current or {}).get(key)
        return base64.b64decode(value).decode() if value else secrets.token_urlsafe(32)

    return kept("operator-password"), kept("replication-password")


def exporter_password(cluster: RedisCluster, current: Mapping[str, str] | None) -> str | None:
    """The exporter user's password (the existing Secret's, else a new random one); None when
    ``spec.monitoring.exporter`` is off."""
    if not cluster.spec.monitoring.exporter:
        return None
    value = (current or {}).get("exporter-password")
    return base64.b64decode(value).decode() if value else secrets.token_urlsafe(32)


def check_names(users: Sequence[RedisUser]) -> None:
    """Names the operator reserves, and duplicates, are refused naming the field."""
    seen: set[str] = set()
    for i, user in enumerate(users):
        if user.name == "default" or user.name.startswith(_RESERVED_PREFIX):
            raise InvalidUsers(f"spec.users[{i}].name: {user.name!r} is reserved (default, pyctrl-*)")
        if user.name in seen:
            raise InvalidUsers(f"spec.users[{i}].name: {user.name!r} appears twice")
        seen.add(user.name)
        parse_rules(user.rules, f"spec.users[{i}].rules")


# -- I/O: reading the Secrets, checking the rules on Redis, writing and loading the file -------
@dataclass(frozen=True)
class AclState:
    """What one reconcile knows of a cluster's users before it touches anything."""

    #: the file the spec asks for (operator's users and the spec's), or None when ``invalid``
    wanted: AclFile | None
    #: the file the operator's users only (what a new cluster starts with until rules are checked)
    system: AclFile
    #: the ``<name>-acl`` Secret's users.acl now (None: no Secret yet)
    current_text: str | None
    invalid: str | None = None

    @property
    def operator_password(self) -> str:
        return self.system.operator_password


async def _user_passwords(api_reader: Reader, cluster: RedisCluster) -> list[str]:
    """Each ``spec.users[i]``'s password; ``InvalidUsers`` naming the passwordSecret otherwise."""
    out = []
    for i, user in enumerate(cluster.spec.users or []):
        ref, where = user.password_secret, f"spec.users[{i}].passwordSecret"
        try:
            secret = await api_reader.get(Secret, ref.name, namespace=cluster.namespace)
        except NotFound:
            raise InvalidUsers(f"{where}: Secret {ref.name!r} not found") from None
        value = (secret.data or {}).get(ref.key)
        if not value:
            raise InvalidUsers(f"{where}: Secret {ref.name!r} has no key {ref.key!r}")
        out.append(base64.b64decode(value).decode())
    return out


async def operator_password(api_reader: Reader, cluster: RedisCluster) -> str | None:
    """The operator's own password from the ``<name>-acl`` Secret (None before it exists)."""
    try:
        secret = await api_reader.get(Secret, acl_secret_name(cluster), namespace=cluster.namespace)
    except NotFound:
        return None
    value = (secret.data or {}).get("operator-password")
    return base64.b64decode(value).decode() if value else None


class UserSync:
    """Keeps the ``<name>-acl`` Secret and every pod's loaded users as ``spec.users`` says."""

    def __init__(self, client: Client, api_reader: Reader) -> None:
        self.client = client
        self.api_reader = api_reader

    async def read(self, cluster: RedisCluster, default_password: str | None) -> AclState:
        """The wanted file (or why it cannot be made) and the current one; no write."""
        try:
            current = await self.api_reader.get(Secret, acl_secret_name(cluster), namespace=cluster.namespace)
        except NotFound:
            current = None
        data = current.data if current is not None else None
        text = base64.b64decode(data["users.acl"]).decode() if data and data.get("users.acl") else None
        generated = generated_passwords(data)
        exporter = exporter_password(cluster, data)
        system = acl_file(
            cluster,
            [],
            default_password=default_password,
            generated=generated,
            include_spec_users=False,
            exporter_password=exporter,
        )
        try:
            check_names(cluster.spec.users or [])
            passwords = await _user_passwords(self.api_reader, cluster)
        except InvalidUsers as exc:
            return AclState(None, system, text, str(exc))
        wanted = acl_file(
            cluster,
            passwords,
            default_password=default_password,
            generated=generated,
            include_spec_users=True,
            exporter_password=exporter,
        )
        return AclState(wanted, system, text)

    async def write(
        self, cluster: RedisCluster, state: AclState, checker: RedisConnection | None
    ) -> tuple[str | None, str | None]:
        """Write the Secret once its rules passed Redis' own check on ``checker`` (a pod that
        answers). Returns (the refusal naming the field, the generation the Secret now holds).
        Without a checker a new cluster gets the operator's users only."""
        current = _generation_of(state.current_text)
        if state.invalid is not None or state.wanted is None:
            return state.invalid, current
        target = state.wanted
        if state.current_text == target.text:
            return None, current
        if checker is None:
            if state.current_text is not None:
                return None, current  # checked once a pod answers
            target = state.system
        else:
            for i, user in enumerate(cluster.spec.users or []):
                try:
                    refused = await checker.acl_check(SCRATCH_USER, parse_rules(user.rules, ""))
                except RedisAdminError:
                    return None, current  # the checker went away: try again on the next reconcile
                if refused is not None:
                    return f"spec.users[{i}].rules: Redis refused them: {refused}", current
        secret: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": acl_secret_name(cluster), "namespace": cluster.namespace},
            "type": "Opaque",
            "data": target.data(),
        }
        set_controller_reference(cluster, secret)
        await self.client.apply(secret, field_manager="rediscluster-operator", force=True)
        log.info(
            "ACL file written",
            cluster=cluster.name,
            namespace=cluster.namespace,
            generation=target.generation,
        )
        return None, target.generation

    async def load(
        self, connections: Mapping[str, RedisConnection], generation: str
    ) -> tuple[list[str], list[str]]:
        """``ACL LOAD`` on every pod that has not loaded ``generation``: (pods that loaded it now,
        pods still without it — their file not swapped yet, or unreachable)."""
        loaded, pending = [], []
        for pod, conn in connections.items():
            try:
                if generation in await conn.acl_users():
                    continue
                await conn.acl_load()
                if generation in await conn.acl_users():
                    loaded.append(pod)
                    continue
            except RedisAdminError as exc:
                log.info("ACL LOAD not done yet", pod=pod, error=str(exc))
            pending.append(pod)
        return loaded, pending


def _generation_of(text: str | None) -> str | None:
    """The generation user named on the file's last line."""
    last = (text or "").strip().rsplit("\n", 1)[-1].split()
    return last[1] if len(last) > 1 and last[1].startswith("pyctrl-generation-") else None
