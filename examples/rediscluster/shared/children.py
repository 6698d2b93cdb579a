"""Keeping the RedisCluster's children as desired, with zero writes when they already are.

A child is written (server-side apply, field manager ``rediscluster-operator``, forced) only when
one of the fields the operator sets differs from the cached object: the desired object must be a
*subset* of the live one (fields the apiserver defaults or other managers own are ignored;
quantities compare by value, so ``1024Mi`` equals ``1Gi``). A converged cluster therefore costs no
write requests, and a child edited by hand is put back on the next reconcile.

:func:`apply_children` is step 5 of a reconcile, in both modes: the mode's desired children, each
with a controller ownerReference to the RedisCluster. A spec that cannot be run (``InvalidSpec``)
applies no child at all — the running pods keep their configuration and failover keeps protecting
them, while the Event ``InvalidSpec`` and the Ready condition say what to fix. Never adopt: when
the name of a child is taken by an object this cluster does not control (no controller
reference with its uid), nothing at all is written — an Event ``Conflict`` and the Ready and
Degraded conditions (reason ``Conflict``) name the object, which is neither changed nor, since
it gets no owner reference, deleted with the cluster; with
``spec.restoreFrom`` no child is applied until a backup can seed the pods (``backup.restore``:
condition ``Restored``), then the StatefulSet gets the restore init container.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from examples.rediscluster.api import RedisCluster, name_problem
from examples.rediscluster.shared.networkpolicy import NetworkPolicy
from examples.rediscluster.shared.resources import InvalidSpec, parse_quantity
from pyctrl.client import Client, ConfigMap, Service, StatefulSet
from pyctrl.client.errors import NotFound
from pyctrl.client.objects import KubeObject, PodDisruptionBudget
from pyctrl.client.scheme import to_dict
from pyctrl.controllerutil import set_controller_reference
from pyctrl.recorder import EventRecorder

__all__ = ["CONFLICT_PREFIX", "FIELD_MANAGER", "apply_children", "conflict", "ensure", "is_subset"]

FIELD_MANAGER = "rediscluster-operator"
#: how :func:`apply_children` marks a refusal for a child name taken by a foreign object (the
#: status then gives reason ``Conflict`` instead of ``InvalidSpec``)
CONFLICT_PREFIX = "Conflict: "

_TYPED: dict[str, type[KubeObject]] = {
    "ConfigMap": ConfigMap,
    "Service": Service,
    "StatefulSet": StatefulSet,
    "PodDisruptionBudget": PodDisruptionBudget,
    "NetworkPolicy": NetworkPolicy,
}


def _same_scalar(want: Any, have: Any) -> bool:
    if want == have:
        return True
    if isinstance(want, str | int) and isinstance(have, str | int) and not isinstance(want, bool):
        try:
            return parse_quantity(want) == parse_quantity(have)
        except ValueError:
            return False
    return False


def is_subset(want: Any, have: Any) -> bool:
    """True when every field set in ``want`` has the same value in ``have`` (lists: same length,
    item by item)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and is_subset(v, have[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(is_subset, want, have))
    return _same_scalar(want, have)


async def ensure(client: Client, desired: dict[str, Any]) -> tuple[Any, bool]:
    """Make the child match ``desired``; return (the live object, whether a write happened)."""
    kind = _TYPED[desired["kind"]]
    meta = desired["metadata"]
    try:
        live = await client.get(kind, meta["name"], namespace=meta["namespace"])
    except NotFound:
        live = None
    if live is not None and is_subset(desired, to_dict(live)):
        return live, False
    stored = await client.apply(desired, field_manager=FIELD_MANAGER, force=True)
    return stored, True


class Seeding(Protocol):
    """What a restore asks of the children (``backup.restore.RestoreState``)."""

    @property
    def blocked(self) -> str | None:
        """Why no child may be applied yet (no backup to seed the pods from)."""
        ...

    def apply(self, children: list[dict[str, Any]]) -> None:
        """Add the restore init container to the StatefulSet among ``children``."""
        ...


def conflict(cluster: RedisCluster, kind: str, live: Any) -> str | None:
    """Why ``live`` (a child's name taken by an object this cluster does not control) may not be
    written, or None when the cluster controls it."""
    refs = getattr(live.metadata, "owner_references", None) or []
    if any(ref.controller and ref.uid == cluster.metadata.uid for ref in refs):
        return None
    return (
        f"{CONFLICT_PREFIX}{kind} {live.metadata.name} exists and is not controlled by this "
        "RedisCluster: it is not adopted, changed or deleted (rename or delete it)"
    )


async def apply_children(
    client: Client,
    recorder: EventRecorder,
    cluster: RedisCluster,
    desired: Callable[[], Awaitable[list[dict[str, Any]]]],
    restore: Seeding,
) -> str | None:
    """Write the children ``desired()`` gives that differ; return why the spec cannot be run, if it
    cannot (``desired`` is called only here: after a refused TLS Secret or user, not at all).
    A name some child could not carry (``api.name_problem``: admitted before the CRD's rule
    existed) is such a reason: nothing is written, instead of a write the apiserver refuses."""
    if (why := name_problem(cluster.name)) is not None:
        recorder.event(cluster, "Warning", "InvalidSpec", why)
        return why
    try:
        children = await desired()
    except InvalidSpec as exc:
        if not exc.reported:
            recorder.event(cluster, "Warning", "InvalidSpec", str(exc))
        return str(exc)
    if restore.blocked is not None:
        return None  # no pod may start before there is a backup to seed it (condition Restored)
    restore.apply(children)
    for child in children:  # never adopt: every name checked before anything is written
        meta = child["metadata"]
        try:
            live = await client.get(_TYPED[child["kind"]], meta["name"], namespace=meta["namespace"])
        except NotFound:
            continue
        if (why := conflict(cluster, child["kind"], live)) is not None:
            recorder.event(cluster, "Warning", "Conflict", why.removeprefix(CONFLICT_PREFIX))
            return why
    for child in children:
        set_controller_reference(cluster, child)
        await ensure(client, child)
    return None
