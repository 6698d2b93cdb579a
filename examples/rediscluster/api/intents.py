"""The day-2 intents an SRE writes on a RedisCluster as annotations (``kubectl rediscluster``
writes them), parsed into typed values; pure, no I/O.

- ``redis.pyctrl.dev/fenced-pods``: a JSON list of pod names. A fenced pod is never master nor
  promoted, wears the role label ``fenced`` (which neither the ``-master`` nor the ``-replicas``
  Service selects) and keeps running — replicating the master — for inspection; fencing the
  master hands it over first (a planned switchover). Replication mode only.
- ``redis.pyctrl.dev/switchover-to``: a pod name; a planned switchover (``FAILOVER TO``) to it,
  after which the operator removes the annotation (the Event ``SwitchoverDone`` or
  ``SwitchoverRefused`` says what came of it). Replication mode only.
- ``redis.pyctrl.dev/hibernation``: ``on`` or ``off``; ``on`` stops every pod after a final sync
  and keeps the volumes (phase ``Hibernated``), refused without persistence; replication mode only.

In ``mode: cluster`` the operator does not act on them: the condition ``Intents`` (False,
``UnsupportedInClusterMode``) names those set (:func:`unsupported_in_cluster_mode`), with a
Warning Event of that reason when the message changes; ``kubectl rediscluster`` refuses to write
them on a cluster-mode RedisCluster.

A malformed value raises :class:`InvalidIntent`, whose message names the annotation and the value
(the reconciler reports it as ``InvalidSpec``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Final

from examples.rediscluster.api.rediscluster import RedisCluster

__all__ = [
    "FENCED_LABEL",
    "FENCED_PODS",
    "HIBERNATION",
    "SWITCHOVER_TO",
    "InvalidIntent",
    "fenced_pods",
    "hibernation",
    "switchover_to",
    "unsupported_in_cluster_mode",
]

HIBERNATION: Final = "redis.pyctrl.dev/hibernation"
FENCED_PODS: Final = "redis.pyctrl.dev/fenced-pods"
SWITCHOVER_TO: Final = "redis.pyctrl.dev/switchover-to"
#: the role label value of a fenced pod (the Services select ``master`` and ``replica``)
FENCED_LABEL: Final = "fenced"


class InvalidIntent(ValueError):
    """An intent annotation that cannot be understood (the message names it and its value)."""


def _annotation(cluster: RedisCluster, key: str) -> str | None:
    value = (cluster.metadata.annotations or {}).get(key)
    return value if value else None


def fenced_pods(cluster: RedisCluster) -> frozenset[str]:
    """The fenced pods (empty without the annotation)."""
    text = _annotation(cluster, FENCED_PODS)
    if text is None:
        return frozenset()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidIntent(f"annotation {FENCED_PODS} must be a JSON list of pod names, not {text!r}")
    return frozenset(value)


def switchover_to(cluster: RedisCluster) -> str | None:
    """The pod a planned switchover is asked to (None: none asked)."""
    text = _annotation(cluster, SWITCHOVER_TO)
    return text.strip() if text is not None else None


def hibernation(cluster: RedisCluster) -> bool:
    """True when hibernation is asked (``on``); ``off`` or no annotation: False."""
    text = _annotation(cluster, HIBERNATION)
    if text is None or text.strip().lower() == "off":
        return False
    if text.strip().lower() == "on":
        return True
    raise InvalidIntent(f"annotation {HIBERNATION} must be 'on' or 'off', not {text!r}")


def _asked(cluster: RedisCluster, key: str) -> bool:
    """The annotation asks for something (``hibernation: off`` and ``fenced-pods: []`` do not)."""
    text = _annotation(cluster, key)
    if text is None:
        return False
    if key == HIBERNATION:
        return text.strip().lower() != "off"
    if key == FENCED_PODS:
        with contextlib.suppress(json.JSONDecodeError):
            return bool(json.loads(text) != [])
    return True


def unsupported_in_cluster_mode(cluster: RedisCluster) -> str | None:
    """The message of a cluster-mode RedisCluster carrying intents it does not act on (None: none;
    ``hibernation: off`` and an empty fenced list ask for nothing, so they are not named)."""
    present = [key for key in (HIBERNATION, FENCED_PODS, SWITCHOVER_TO) if _asked(cluster, key)]
    if not present:
        return None
    return (
        f"mode: cluster does not act on {', '.join(present)} yet (replication mode only): "
        "nothing was stopped, fenced or switched over; remove the annotation(s)"
    )
