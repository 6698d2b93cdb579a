"""The RedisBackup reconciler: one Job per backup, its outcome written back to the RedisBackup.

One reconcile (level-triggered; it never waits on the backup itself — the Job does the work):

1. fetch the RedisBackup (cache); being deleted → run the deletion Job of the stored object (when
   there is one), then drop the finalizer ``redis.pyctrl.dev/backup-data`` — a deletion Job that
   fails, or cannot be created (its namespace is being deleted), leaves the object in the store,
   says so in an Event, and lets the RedisBackup go (a namespace deletion never hangs on it);
2. Succeeded or Failed → nothing more to do;
3. no Job yet → check the inputs (the RedisCluster exists and has a serving pod, the claim exists,
   the S3 endpoint is one the operator's ``--s3-endpoint-allowlist`` allows, the S3 credentials
   Secret has both keys): a bad input is ``Failed`` with the reason in
   ``status.message``, an Event and no Job; otherwise pick the source (a replica whose link to the
   master is up, else the master), create the Job ``<backup>-backup`` (owned by the RedisBackup,
   so it is found again after a restart and never doubled) and record ``Running``;
4. the Job finished → the pod's termination message (``worker``'s JSON) becomes the status:
   ``Succeeded`` with location, size and SHA-256, or ``Failed`` with the worker's error.

The operator reads no credential and the status holds none: the Job's pod gets them by
``secretKeyRef``; only the Secret's *keys* are checked for presence.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.backup import BackupPhase, RedisBackup, RedisBackupStatus, ShardBackup
from examples.rediscluster.backup.endpoints import EndpointAllowlist
from examples.rediscluster.backup.job import (
    SOURCE_ANNOTATION,
    RedisLogin,
    backup_job,
    delete_job,
    job_name,
)
from examples.rediscluster.backup.results import result_of, shard_results, with_results
from examples.rediscluster.backup.shards import (
    ShardSource,
    cluster_backup_job,
    cluster_delete_job,
    shards_from_annotation,
)
from examples.rediscluster.cluster.slots import SLOTS
from examples.rediscluster.shared import redis_admin
from examples.rediscluster.shared.facts import Role
from examples.rediscluster.shared.resources import REDIS_PORT, ROLE_LABEL, selector_labels
from examples.rediscluster.shared.security import tls, users
from examples.rediscluster.shared.security.auth import password_ref
from pyctrl import Request, Result
from pyctrl.client import Client, Job, PersistentVolumeClaim, Pod, Reader, Secret
from pyctrl.client.errors import Forbidden, NotFound
from pyctrl.client.objects import Condition
from pyctrl.client.patch import MergeFrom, PatchType, RawPatch
from pyctrl.controllerutil import add_finalizer, remove_finalizer, set_controller_reference
from pyctrl.log import get_logger
from pyctrl.rbacgen import rbac
from pyctrl.recorder import EventRecorder

__all__ = ["DATA_FINALIZER", "RedisBackupReconciler"]

DATA_FINALIZER = "redis.pyctrl.dev/backup-data"
WAIT_REQUEUE = 2.0
log = get_logger("redisbackup")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def owned_by(job: Job, pods: list[Pod]) -> list[Pod]:
    """The pods ``job`` controls (controller reference with its uid): a result is read only from
    them, never from another pod that merely carries the Job's name label (anyone who may create
    pods in the namespace could forge one)."""
    uid = job.metadata.uid
    return [p for p in pods if any(r.controller and r.uid == uid for r in p.metadata.owner_references or [])]


class BadInput(Exception):
    """A backup that cannot be taken as specified (reason: a CamelCase word for the Event)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class NotYet(Exception):
    """The backup cannot start yet (no serving pod); it stays Pending and is retried."""


@rbac(
    groups=["redis.pyctrl.dev"],
    resources=["redisbackups"],
    verbs=["get", "list", "watch", "create", "patch", "delete"],
)
@rbac(groups=["redis.pyctrl.dev"], resources=["redisbackups/status"], verbs=["get", "patch"])
@rbac(groups=["redis.pyctrl.dev"], resources=["redisbackups/finalizers"], verbs=["update"])
# Jobs are never deleted by the operator: they are owned by their RedisBackup (garbage collected).
@rbac(groups=["batch"], resources=["jobs"], verbs=["get", "list", "watch", "create"])
@rbac(groups=[""], resources=["persistentvolumeclaims"], verbs=["get", "list", "watch"])
@rbac(groups=[""], resources=["pods"], verbs=["get", "list", "watch"])
@rbac(groups=[""], resources=["secrets"], verbs=["get"])
class RedisBackupReconciler:
    """Reconciles RedisBackup objects; see the module docstring."""

    def __init__(
        self,
        client: Client,
        api_reader: Reader,
        recorder: EventRecorder,
        image: str,
        *,
        s3_endpoints: EndpointAllowlist | None = None,
    ) -> None:
        self.client = client
        self.api_reader = api_reader
        self.recorder = recorder
        self.image = image
        self.s3_endpoints = s3_endpoints or EndpointAllowlist()

    async def reconcile(self, request: Request) -> Result:
        try:
            backup = await self.client.get(RedisBackup, request.name, namespace=request.namespace)
        except NotFound:
            return Result()
        if backup.metadata.deletion_timestamp:
            return await self._delete_data(backup)
        if add_finalizer(backup, DATA_FINALIZER):
            backup = await self.client.patch(
                backup, RawPatch(PatchType.MERGE, {"metadata": {"finalizers": backup.metadata.finalizers}})
            )
        status = backup.status or RedisBackupStatus()
        if status.phase in (BackupPhase.SUCCEEDED, BackupPhase.FAILED):
            return Result()
        job = await self._job(backup, "backup")
        if job is None:
            return await self._start(backup)
        return await self._follow(backup, job)

    async def _job(self, backup: RedisBackup, purpose: str) -> Job | None:
        try:
            job: Job = await self.client.get(Job, job_name(backup.name, purpose), namespace=backup.namespace)
        except NotFound:
            return None
        return job

    # -- starting ------------------------------------------------------------------------------
    async def _start(self, backup: RedisBackup) -> Result:
        shards: list[ShardBackup] | None = None
        try:
            cluster = await self._check_inputs(backup)
            tls_secret = cluster.spec.tls.secret_name if cluster.spec.tls is not None else None
            login = RedisLogin(password_ref(cluster), tls_secret)
            if cluster.spec.users is not None:  # the ACL file's replication user may SYNC, nothing else
                password = (users.acl_secret_name(cluster), "replication-password")
                login = RedisLogin(password, tls_secret, users.REPLICATION_USER)
            if cluster.spec.mode == "cluster":
                sources = await self._shard_sources(cluster)
                job = cluster_backup_job(backup, sources, self.image, login)
                shards = [ShardBackup(index=s.index, slots=list(s.slots), source_pod=s.pod) for s in sources]
                source = f"{len(sources)} shards ({', '.join(s.pod for s in sources)})"
            else:
                source, ip = await self._source(cluster)
                job = backup_job(backup, source, ip, self.image, login)
        except BadInput as exc:
            await self._finish(backup, BackupPhase.FAILED, reason=exc.reason, message=str(exc))
            return Result()
        except NotYet as exc:
            await self._write_status(backup, phase=BackupPhase.PENDING, message=str(exc))
            return Result(requeue_after=WAIT_REQUEUE)
        set_controller_reference(backup, job)
        await self.client.create(job)
        self.recorder.event(
            backup, "Normal", "BackupStarted", f"Job {job['metadata']['name']} backs up {source}"
        )
        log.info("Backup Job created", backup=backup.name, namespace=backup.namespace, source=source)
        await self._write_status(
            backup,
            phase=BackupPhase.RUNNING,
            start_time=_now(),
            source_pod=None if shards else source,
            job_name=job["metadata"]["name"],
            message=None,
            shards=shards,
        )
        # a shard's container ending changes no Job: look again to fill status.shards in
        return Result(requeue_after=WAIT_REQUEUE if shards else None)

    async def _check_inputs(self, backup: RedisBackup) -> RedisCluster:
        ns = backup.namespace
        try:
            cluster: RedisCluster = await self.client.get(
                RedisCluster, backup.spec.cluster_name, namespace=ns
            )
        except NotFound:
            raise BadInput(
                "ClusterNotFound", f"RedisCluster {backup.spec.cluster_name!r} not found"
            ) from None
        dest = backup.spec.destination
        if dest.pvc is not None:
            try:
                await self.client.get(PersistentVolumeClaim, dest.pvc.claim_name, namespace=ns)
            except NotFound:
                raise BadInput(
                    "ClaimNotFound", f"PersistentVolumeClaim {dest.pvc.claim_name!r} not found"
                ) from None
        if dest.s3 is not None:
            refused = self.s3_endpoints.refusal("spec.destination.s3.endpoint", dest.s3.endpoint)
            if refused is not None:
                raise BadInput("EndpointNotAllowed", refused)
            creds = dest.s3.credentials_secret
            try:
                secret = await self.api_reader.get(Secret, creds.name, namespace=ns)
            except NotFound:
                raise BadInput("SecretNotFound", f"Secret {creds.name!r} not found") from None
            missing = [
                k
                for k in (creds.access_key_id_key, creds.secret_access_key_key)
                if k not in (secret.data or {})
            ]
            if missing:
                raise BadInput("SecretKeyMissing", f"Secret {creds.name!r} has no key {', '.join(missing)}")
        return cluster

    async def _source(self, cluster: RedisCluster) -> tuple[str, str]:
        """(pod, IP) to take the RDB from: a replica with its master link up, else the master."""
        master = cluster.status.current_master if cluster.status else None
        pods = await self.client.list(Pod, namespace=cluster.namespace, labels=selector_labels(cluster))
        access = await self._access(cluster)
        replicas, master_ip = [], None
        for pod in sorted(pods, key=lambda p: p.name):
            ip = pod.status.pod_ip if pod.status else None
            if not ip or pod.metadata.deletion_timestamp:
                continue
            if pod.name == master:
                master_ip = ip
            elif (pod.metadata.labels or {}).get(ROLE_LABEL) == "replica":
                replicas.append((pod.name, ip))
        for name, ip in replicas:
            try:
                facts = await access.at(ip, REDIS_PORT).observe()
            except redis_admin.RedisAdminError:
                continue
            if facts.role is Role.REPLICA and facts.master_link_up:
                return name, ip
        if master is not None and master_ip is not None:
            return master, master_ip
        raise NotYet(f"waiting for RedisCluster {cluster.name!r} to have a serving master")

    async def _access(self, cluster: RedisCluster) -> redis_admin.RedisAccess:
        """How the operator reaches the cluster's pods (its own ACL user with ``spec.users``)."""
        password, username = await self._password(cluster), None
        if cluster.spec.users is not None:  # the ACL file's pods: the operator's own user
            password = await users.operator_password(self.api_reader, cluster)
            username = users.OPERATOR_USER
        return redis_admin.RedisAccess(password, username, await self._tls_ca(cluster))

    async def _tls_ca(self, cluster: RedisCluster) -> str | None:
        """``ca.crt`` of the cluster's TLS Secret (None without TLS, or while it has none)."""
        if cluster.spec.tls is None:
            return None
        try:
            secret = await self.api_reader.get(
                Secret, cluster.spec.tls.secret_name, namespace=cluster.namespace
            )
        except NotFound:
            return None
        return tls.ca_of(secret.data)

    async def _shard_sources(self, cluster: RedisCluster) -> list[ShardSource]:
        """Per shard (cluster mode): a replica with its master link up, else the master; only
        while every slot is served and no resharding runs (the manifest's slot map must hold)."""
        status = cluster.status
        shards = [s for s in (status.shards or []) if s.index < cluster.spec.shards] if status else []
        if (
            status is None
            or status.resharding
            or status.slots_to_move
            or status.slots_assigned != SLOTS
            or len(shards) != cluster.spec.shards
            or not all(s.master and s.slot_count for s in shards)
        ):
            raise NotYet(
                f"waiting for RedisCluster {cluster.name!r} to serve every slot, each shard with a "
                "master, and no resharding under way"
            )
        pods = await self.client.list(Pod, namespace=cluster.namespace, labels=selector_labels(cluster))
        ips = {p.name: p.status.pod_ip for p in pods if p.status and p.status.pod_ip}
        access = await self._access(cluster)
        out = []
        for shard in shards:
            assert shard.master is not None
            if shard.master not in ips:
                raise NotYet(f"waiting for shard {shard.index}'s master {shard.master} to have an IP")
            source = shard.master
            for replica in shard.replicas:
                if replica not in ips:
                    continue
                try:
                    facts = await access.at(ips[replica], REDIS_PORT).observe()
                except redis_admin.RedisAdminError:
                    continue
                if facts.role is Role.REPLICA and facts.master_link_up:
                    source = replica
                    break
            out.append(ShardSource(shard.index, source, ips[source], ips[shard.master], tuple(shard.slots)))
        return out

    async def _password(self, cluster: RedisCluster) -> str | None:
        ref = password_ref(cluster)
        if ref is None:
            return None
        try:
            secret = await self.api_reader.get(Secret, ref[0], namespace=cluster.namespace)
        except NotFound:
            return None
        value = (secret.data or {}).get(ref[1])
        return None if value is None else base64.b64decode(value).decode()

    # -- following -----------------------------------------------------------------------------
    async def _follow(self, backup: RedisBackup, job: Job) -> Result:
        status = job.status
        complete = status is not None and status.condition("Complete") is not None
        failed = status.condition("Failed") if status is not None else None
        recorded = shards_from_annotation(job.metadata.annotations or {})
        pods: list[Pod] = []
        if recorded is not None or complete or failed is not None:
            listed = await self.client.list(
                Pod, namespace=backup.namespace, labels={"batch.kubernetes.io/job-name": job.name}
            )
            pods = owned_by(job, listed.items)
        shards: dict[str, Any] = {}
        if recorded is not None:
            shards["shards"] = with_results(recorded, shard_results(pods))
        if not complete and failed is None:
            if (backup.status or RedisBackupStatus()).phase is not BackupPhase.RUNNING:
                # restarted between creating the Job and recording it: record it now
                source = (job.metadata.annotations or {}).get(SOURCE_ANNOTATION)
                shards |= {"phase": BackupPhase.RUNNING, "start_time": _now(), "job_name": job.name}
                shards |= {"source_pod": None if recorded is not None else source}
            await self._write_status(backup, **shards)
            return Result(requeue_after=WAIT_REQUEUE if recorded is not None else None)
        result = result_of(pods)
        if complete:
            if result is None or "sha256" not in result:
                return await self._result_missing(backup, job, pods)
            await self._finish(
                backup,
                BackupPhase.SUCCEEDED,
                reason="BackupSucceeded",
                message=None,
                location=str(result["location"]),
                size_bytes=int(result["sizeBytes"]),
                sha256=str(result["sha256"]),
                **shards,
            )
            return Result()
        assert failed is not None
        why = str(result["error"]) if result and "error" in result else failed.message or failed.reason
        await self._finish(
            backup, BackupPhase.FAILED, reason="BackupFailed", message=f"{failed.reason}: {why}", **shards
        )
        return Result()

    async def _result_missing(self, backup: RedisBackup, job: Job, cached: list[Pod]) -> Result:
        """A complete Job whose result is not readable: the cache may not hold the pod's final
        status yet (look again soon), or the pods are gone and the result with them (Failed: it
        can never be read; a finished Job is not run again)."""
        if cached:
            return Result(requeue_after=WAIT_REQUEUE)
        live = await self.api_reader.list(
            Pod, namespace=backup.namespace, labels={"batch.kubernetes.io/job-name": job.name}
        )
        if owned_by(job, live.items):
            return Result(requeue_after=WAIT_REQUEUE)
        why = (
            f"Job {job.name} completed but its pods are gone, and with them its result (location, "
            "size, SHA-256): delete this RedisBackup and create it again to take a new backup"
        )
        await self._finish(backup, BackupPhase.FAILED, reason="BackupResultLost", message=why)
        return Result()

    # -- status --------------------------------------------------------------------------------
    async def _finish(
        self, backup: RedisBackup, phase: BackupPhase, *, reason: str, message: str | None, **fields: Any
    ) -> None:
        ok = phase is BackupPhase.SUCCEEDED
        now = _now()
        condition = Condition(
            type="Complete" if ok else "Failed",
            status="True",
            reason=reason,
            message=message or f"stored at {fields.get('location')}",
            last_transition_time=now,
        )
        await self._write_status(
            backup, phase=phase, completion_time=now, message=message, conditions=[condition], **fields
        )
        if ok:
            self.recorder.event(
                backup, "Normal", reason, f"{fields['size_bytes']} bytes stored at {fields['location']}"
            )
        else:
            self.recorder.event(backup, "Warning", reason, message or reason)
        log.info(
            "Backup finished",
            backup=backup.name,
            namespace=backup.namespace,
            phase=phase.value,
            reason=reason,
        )

    async def _write_status(self, backup: RedisBackup, **fields: Any) -> None:
        old = backup.status or RedisBackupStatus()
        new = old.model_copy(update=fields)
        if new == old:
            return
        before = backup.model_copy(deep=True)
        backup.status = new
        await self.client.status().patch(backup, MergeFrom(before, optimistic_lock=True))

    # -- deletion ------------------------------------------------------------------------------
    async def _delete_data(self, backup: RedisBackup) -> Result:
        if DATA_FINALIZER not in (backup.metadata.finalizers or []):
            return Result()
        stored = backup.status is not None and backup.status.location is not None
        if stored:
            job = await self._job(backup, "delete")
            if job is None:
                sharded = backup.status is not None and backup.status.shards is not None
                job_obj = (cluster_delete_job if sharded else delete_job)(backup, self.image)
                set_controller_reference(backup, job_obj)
                try:
                    await self.client.create(job_obj)
                    return Result()
                except Forbidden as exc:  # e.g. the namespace is being deleted: no Job can start
                    assert backup.status is not None
                    self.recorder.event(
                        backup,
                        "Warning",
                        "DeleteFailed",
                        f"cannot start the deletion Job ({exc}); {backup.status.location} is left in place",
                    )
            else:
                status = job.status
                if status is None or (
                    status.condition("Complete") is None and status.condition("Failed") is None
                ):
                    return Result()
                if status.condition("Failed") is not None:
                    assert backup.status is not None
                    self.recorder.event(
                        backup,
                        "Warning",
                        "DeleteFailed",
                        f"could not delete {backup.status.location}; it is left in place",
                    )
        remove_finalizer(backup, DATA_FINALIZER)
        await self.client.patch(
            backup,
            RawPatch(
                PatchType.MERGE,
                {
                    "metadata": {
                        "finalizers": backup.metadata.finalizers or None,
                        "resourceVersion": backup.metadata.resource_version,
                    }
                },
            ),
        )
        return Result()
