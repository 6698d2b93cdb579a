"""The RedisCluster validating admission webhook (opt-in: ``--webhook-port``).

The CRD schema already refuses what it can express (bounds, types, enums, and CEL rules that
admit only allowlisted lower-case ``redisConfig`` keys with printable values). What it cannot —
quoting Redis's tokenizer refuses (``'"unbalanced'``), a directive named twice, bad arguments —
the reconciler refuses at run time (``InvalidSpec``: nothing applied, ``Ready=False``). With the
webhook, the apiserver refuses such a create or update up front (422 Invalid, one cause per bad
``redisConfig`` entry naming its key: ``redisconf.problems``), from the very same checks, so the
two can never disagree.

It also refuses what depends on the operator's flags (the CRD cannot know them): a backup
schedule whose runs come closer than ``--min-backup-interval`` (``backup.schedule.schedule_problem``,
which the schedule controller runs too), a backup S3 endpoint outside ``--s3-endpoint-allowlist``
(``backup.endpoints``; the RedisBackup reconciler refuses it too), and a name no child could carry
(``api.name_problem``, the CRD's CEL rule, for a CRD installed without it).

It also warns (kubectl prints the warning; the object is accepted) about a spec that is valid
but risky: a single replica has nothing to fail over to.
"""

from __future__ import annotations

from examples.rediscluster.api import RedisCluster, name_problem, redisconf
from examples.rediscluster.backup.endpoints import EndpointAllowlist
from examples.rediscluster.backup.schedule import DEFAULT_MIN_INTERVAL, schedule_problem
from examples.rediscluster.shared.resources import InvalidSpec, desired_children
from pyctrl.client.errors import Invalid

__all__ = ["RedisClusterValidator"]


class RedisClusterValidator:
    """``CustomValidator`` for RedisCluster; ``min_backup_interval``: the operator's flag (s)."""

    def __init__(
        self,
        *,
        min_backup_interval: float = DEFAULT_MIN_INTERVAL,
        s3_endpoints: EndpointAllowlist | None = None,
    ) -> None:
        self.min_backup_interval = min_backup_interval
        self.s3_endpoints = s3_endpoints or EndpointAllowlist()

    async def validate_create(self, obj: RedisCluster) -> list[str] | None:
        return _validate(obj, self.min_backup_interval, self.s3_endpoints)

    async def validate_update(self, old: RedisCluster, new: RedisCluster) -> list[str] | None:
        return _validate(new, self.min_backup_interval, self.s3_endpoints)

    async def validate_delete(self, obj: RedisCluster) -> list[str] | None:
        return None


def _refuse(causes: list[dict[str, str]]) -> Invalid:
    message = "; ".join(c["message"] for c in causes)
    status = {"code": 422, "reason": "Invalid", "message": message, "details": {"causes": causes}}
    return Invalid(status)


def _validate(
    cluster: RedisCluster, min_backup_interval: float, s3_endpoints: EndpointAllowlist
) -> list[str] | None:
    if (why := name_problem(cluster.name)) is not None:  # the CRD's CEL rule, for a CRD without it
        raise _refuse([{"field": "metadata.name", "message": why, "reason": "FieldValueInvalid"}])
    backup = cluster.spec.backup
    schedule = backup.schedule if backup is not None else None
    if schedule is not None and (why := schedule_problem(schedule, min_backup_interval)) is not None:
        raise _refuse([{"field": "spec.backup.schedule", "message": why, "reason": "FieldValueInvalid"}])
    s3 = backup.destination.s3 if backup is not None else None
    field = "spec.backup.destination.s3.endpoint"
    if s3 is not None and (why := s3_endpoints.refusal(field, s3.endpoint)) is not None:
        raise _refuse([{"field": field, "message": why, "reason": "FieldValueForbidden"}])
    bad_config = redisconf.problems(cluster.spec.redis_config)
    if bad_config:  # every refused entry, each naming its key
        raise _refuse(
            [
                {"field": "spec.redisConfig", "message": f"spec.{m}", "reason": "FieldValueForbidden"}
                for m in bad_config
            ]
        )
    try:
        desired_children(cluster, cluster.spec.replicas)
    except InvalidSpec as exc:
        message = str(exc)
        field = message.split(" ", 1)[0].split("[", 1)[0].rstrip(":")
        raise _refuse([{"field": field, "message": message, "reason": "FieldValueForbidden"}]) from exc
    if cluster.spec.replicas == 1:
        return ["spec.replicas is 1: there is no replica to fail over to"]
    return None
