"""The RedisCluster validating admission webhook (opt-in: ``--webhook-port``).

The CRD schema already refuses what it can express (bounds, types, enums). What it cannot —
``redisConfig`` keys the operator manages (``port``, ``replicaof``, ``requirepass``…) or values
that would break redis.conf — the reconciler refuses at run time (``InvalidSpec``: nothing
applied, ``Ready=False``). With the webhook, the apiserver refuses such a create or update up
front (422 Invalid naming the field), from the very same check, so the two can never disagree.

It also warns (kubectl prints the warning; the object is accepted) about a spec that is valid
but risky: a single replica has nothing to fail over to.
"""

from __future__ import annotations

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.shared.resources import InvalidSpec, desired_children
from pyctrl.client.errors import Invalid

__all__ = ["RedisClusterValidator"]


class RedisClusterValidator:
    """``CustomValidator`` for RedisCluster."""

    async def validate_create(self, obj: RedisCluster) -> list[str] | None:
        return _validate(obj)

    async def validate_update(self, old: RedisCluster, new: RedisCluster) -> list[str] | None:
        return _validate(new)

    async def validate_delete(self, obj: RedisCluster) -> list[str] | None:
        return None


def _validate(cluster: RedisCluster) -> list[str] | None:
    try:
        desired_children(cluster, cluster.spec.replicas)
    except InvalidSpec as exc:
        message = str(exc)
        field = message.split(" ", 1)[0].split("[", 1)[0].rstrip(":")
        cause = {"field": field, "message": message, "reason": "FieldValueForbidden"}
        status = {"code": 422, "reason": "Invalid", "message": message, "details": {"causes": [cause]}}
        raise Invalid(status) from exc
    if cluster.spec.replicas == 1:
        return ["spec.replicas is 1: there is no replica to fail over to"]
    return None
