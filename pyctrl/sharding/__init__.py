"""Sharding a controller's objects over manager replicas (no controller-runtime counterpart;
multicluster-runtime's sharded coordinator and kubernetes-controller-sharding are the models).

``Manager(config, sharding=ShardingOptions(ring="my-operator"))`` makes the manager a member of
the ring; every controller built with ``ControllerBuilder`` on it then reconciles only the
``for_`` objects this member holds (see :mod:`pyctrl.sharding.coordinator` for the protocol and
why no object is reconciled by two members at once). Modules:

- :mod:`pyctrl.sharding.hashing`     -- rendezvous hashing: which member owns a key
- :mod:`pyctrl.sharding.membership`  -- member Leases and the live set, on the observer's clock
- :mod:`pyctrl.sharding.coordinator` -- ``ShardingOptions``, ``ShardCoordinator``, the fence
"""

from pyctrl.sharding.coordinator import (
    OWNER_ANNOTATION_PREFIX,
    ShardCoordinator,
    ShardedReconciler,
    ShardFenced,
    ShardingOptions,
)
from pyctrl.sharding.hashing import object_key, rendezvous_owner
from pyctrl.sharding.membership import RING_LABEL, Peers, member_lease_name

__all__ = [
    "OWNER_ANNOTATION_PREFIX",
    "RING_LABEL",
    "Peers",
    "ShardCoordinator",
    "ShardFenced",
    "ShardedReconciler",
    "ShardingOptions",
    "member_lease_name",
    "object_key",
    "rendezvous_owner",
]
