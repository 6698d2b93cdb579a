"""What the user declares: the operator's kinds, ``redis.pyctrl.dev/v1alpha1``.

Mirrors a kubebuilder project's ``api/<version>/``: types only (spec, status, schema markers), no
controller logic. ``rediscluster`` holds the RedisCluster kind, ``backup`` the RedisBackup kind and
the backup-related parts of the RedisCluster spec, ``scheduling`` the pod-placement types of
``spec.affinity``/``tolerations``/``topologySpreadConstraints``. ``python -m pyctrl.crdgen`` renders
the CRDs from these modules (``[tool.pyctrl.crdgen]`` in pyproject.toml).

The public types of both kinds are re-exported here: ``from examples.rediscluster.api import
RedisCluster, RedisBackup``.
"""

from __future__ import annotations

from examples.rediscluster.api import backup, rediscluster
from examples.rediscluster.api.backup import *  # noqa: F403 (the public types of RedisBackup)
from examples.rediscluster.api.rediscluster import *  # noqa: F403 (the public types of RedisCluster)

__all__ = rediscluster.__all__ + backup.__all__
