"""Step 4 of a reconcile, in both modes: the security material (password, TLS Secret, ACL users).

:class:`Security` lives as long as the operator; :meth:`Security.read` gives one reconcile its
:class:`Material`:

- ``access``: how the operator reaches every Redis (:class:`~examples.rediscluster.shared.
  redis_admin.RedisAccess`): the password, or with ``spec.users`` the operator's own
  ``pyctrl-operator`` user; with ``spec.tls`` the CA that verifies the pods;
- a TLS Secret that ``tls.tls_material`` refuses is an ``InvalidSpec`` Event and ``tls_invalid``
  (the reconcile applies no child); the operator keeps connecting with the CA it last verified
  (after a restart: the Secret's ``ca.crt``, if that alone parses). Without any CA, ``read``
  returns None: observing the pods as unreachable would fail them over;
- :meth:`Material.write_users`: the ``<name>-acl`` Secret (the pods' ACL file) is written only
  once a pod that answers accepted the rules; a refusal is an ``InvalidSpec`` Event naming the
  field;
- :meth:`Material.reload`: every answering pod whose served certificate is not the Secret's
  re-reads its files (``CONFIG SET tls-cert-file ...``, no restart; Event ``CertificateReloaded``),
  and ``ACL LOAD`` runs where the generation written is not loaded yet (Event ``UsersLoaded``);
  True while some pod lags, so the reconcile looks again soon.

Every Secret is read with a GET through the API reader, each reconcile: the operator neither
caches nor watches Secrets (its RBAC grants no Secret list/watch), so a rotated certificate or a
changed user password is seen on the cluster's next reconcile — at the latest its settled
look-again (30 s in replication mode, 10 s in cluster mode).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.shared.redis_admin import RedisAccess, RedisAdminError, RedisConnection
from examples.rediscluster.shared.security import tls, users
from examples.rediscluster.shared.security.auth import ensure_generated, read_password
from pyctrl.client import Client, Reader, Secret
from pyctrl.client.errors import NotFound
from pyctrl.recorder import EventRecorder

__all__ = ["Material", "Security"]


@dataclass
class Material:
    """One reconcile's security material (module docstring)."""

    access: RedisAccess
    #: the checked TLS Secret (None without ``spec.tls`` or when it was refused)
    tls_material: tls.TlsMaterial | None
    #: why the TLS Secret is refused (nothing is applied then), if it is
    tls_invalid: str | None
    #: ``spec.users``: the ACL state read (None without users)
    acl: users.AclState | None
    recorder: EventRecorder
    user_sync: users.UserSync
    #: the ACL file generation written this reconcile (the one the pods should load)
    generation: str | None = None

    async def write_users(self, cluster: RedisCluster, checker: RedisConnection | None) -> str | None:
        """Write the ACL Secret once ``checker`` (a pod that answers) accepted the rules; the
        refusal naming the field, if any."""
        if self.acl is None:
            return None
        refused, self.generation = await self.user_sync.write(cluster, self.acl, checker)
        if refused is not None:
            self.recorder.event(cluster, "Warning", "InvalidSpec", refused)
        return refused

    async def reload(self, cluster: RedisCluster, answering: Mapping[str, RedisConnection]) -> bool:
        """Certificates re-read and the ACL file loaded where not yet; True while some pod lags."""
        reloading = self.tls_material is not None and await self._reload_certificates(
            cluster, answering, self.tls_material
        )
        if self.generation is not None:
            reloading = await self._load_users(cluster, answering, self.generation) or reloading
        return reloading

    async def _reload_certificates(
        self, cluster: RedisCluster, answering: Mapping[str, RedisConnection], material: tls.TlsMaterial
    ) -> bool:
        reloaded: list[str] = []
        pending: list[str] = []
        for pod, conn in answering.items():
            try:
                if await conn.served_certificate() == material.cert_der:
                    continue
                await conn.reload_tls(tls.reload_settings())
                served = await conn.served_certificate()
            except RedisAdminError:
                pending.append(pod)
                continue
            (reloaded if served == material.cert_der else pending).append(pod)
        if reloaded:
            message = (
                f"{', '.join(reloaded)} serve the certificate with serial {material.serial:x} (no restart)"
            )
            self.recorder.event(cluster, "Normal", "CertificateReloaded", message)
        return bool(pending)

    async def _load_users(
        self, cluster: RedisCluster, answering: Mapping[str, RedisConnection], generation: str
    ) -> bool:
        loaded, pending = await self.user_sync.load(answering, generation)
        if loaded:
            message = f"{', '.join(loaded)} loaded the ACL file of spec.users (no restart)"
            self.recorder.event(cluster, "Normal", "UsersLoaded", message)
        return bool(pending)


class Security:
    """Reads each reconcile's :class:`Material`; remembers the last verified CA of each cluster."""

    def __init__(self, client: Client, api_reader: Reader, recorder: EventRecorder) -> None:
        self.client = client
        self.api_reader = api_reader
        self.recorder = recorder
        self.users = users.UserSync(client, api_reader)
        #: (namespace, cluster) -> the CA of its last TLS Secret that passed the checks
        self._tls_ca: dict[tuple[str, str], str] = {}

    async def read(self, cluster: RedisCluster) -> Material | None:
        """This reconcile's material; None while ``spec.tls`` has no CA to verify the pods with."""
        await ensure_generated(self.client, self.api_reader, self.recorder, cluster)
        password = await read_password(self.api_reader, self.recorder, cluster)
        material, tls_invalid, ca = await self._read_tls(cluster)
        if cluster.spec.tls is not None and ca is None:
            return None
        acl = await self.users.read(cluster, password) if cluster.spec.users is not None else None
        access = RedisAccess(password, None, ca)
        if acl is not None:  # the ACL file's pods: the operator's own user
            access = RedisAccess(acl.operator_password, users.OPERATOR_USER, ca)
        return Material(access, material, tls_invalid, acl, self.recorder, self.users)

    async def access(self, cluster: RedisCluster) -> RedisAccess:
        """How to reach the pods, without the checks a reconcile reports (the finalizer's snapshot)."""
        password = await read_password(self.api_reader, self.recorder, cluster)
        ca = (await self._read_tls(cluster))[2]
        if cluster.spec.users is not None:
            acl = await self.users.read(cluster, password)
            return RedisAccess(acl.operator_password, users.OPERATOR_USER, ca)
        return RedisAccess(password, None, ca)

    def forget(self, namespace: str, name: str) -> None:
        self._tls_ca.pop((namespace, name), None)

    async def _read_tls(self, cluster: RedisCluster) -> tuple[tls.TlsMaterial | None, str | None, str | None]:
        """(the checked TLS Secret, why it was refused, the CA to connect with); all None without TLS."""
        if cluster.spec.tls is None:
            return None, None, None
        key, name = (cluster.namespace, cluster.name), cluster.spec.tls.secret_name
        try:
            secret = await self.api_reader.get(Secret, name, namespace=cluster.namespace)
        except NotFound:
            secret = None
        try:
            if secret is None:
                raise tls.InvalidTls(f"spec.tls.secretName: Secret {name!r} not found")
            material = tls.tls_material(name, secret.data)
        except tls.InvalidTls as exc:
            self.recorder.event(cluster, "Warning", "InvalidSpec", str(exc))
            fallback = self._tls_ca.get(key) or (tls.ca_of(secret.data) if secret is not None else None)
            return None, str(exc), fallback
        self._tls_ca[key] = material.ca_pem
        return material, None, material.ca_pem
