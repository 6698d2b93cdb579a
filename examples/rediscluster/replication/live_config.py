"""Live configuration: the ``redisConfig`` settings Redis changes at run time, set with ``CONFIG SET``.

No upstream counterpart in controller-runtime (it is the Redis side of a ConfigMap reload). The
directives are the explicit list ``resources.LIVE_KEYS`` (all in ``redisconf.ALLOWED``), each sent
as the canonical name and the arguments ``redisconf.check`` parsed, as one ``CONFIG SET`` value;
the pod template's config hash leaves them out, so changing only them restarts no pod, while
redis.conf (the ConfigMap) keeps them for the next start.

Guarantees of :meth:`LiveConfig.apply`:

- every pod that answers gets every live setting of the spec, once per Redis process: what was
  applied is remembered per pod with the Redis ``run_id``, so a restarted redis-server (new run id)
  gets them again, a converged cluster costs no Redis command, and an operator restart sets them
  once more (``CONFIG SET`` of the same value is harmless);
- they are applied before any child is written: a value Redis refuses (its own validation) is a
  Warning Event ``ConfigRejected`` naming ``spec.redisConfig[<directive>]``, never the value, and
  the reconciler treats the spec as invalid (``InvalidSpec``: no child written, so the ConfigMap
  never holds a redis.conf a restarted pod could not boot with; the pods that already took the
  earlier settings of the list keep them until the spec is fixed); it is not retried until the
  spec changes;
- the Event ``ConfigApplied`` names the directives and how many pods got them.

A live directive removed from ``redisConfig`` keeps its running value until the pod restarts
(Redis has no "reset to the default" for one directive).
"""

from __future__ import annotations

import hashlib

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.replication.observe import Observed
from examples.rediscluster.shared.redis_admin import RedisAdminError, RedisCommandError
from examples.rediscluster.shared.resources import live_settings
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = ["LiveConfig"]

log = get_logger("rediscluster")


class LiveConfig:
    """Applies the live ``redisConfig`` settings of each cluster to its pods (module docstring)."""

    def __init__(self, recorder: EventRecorder) -> None:
        self.recorder = recorder
        #: (namespace, cluster, pod) -> (run id, digest of the settings) last applied or refused
        self._applied: dict[tuple[str, str, str], tuple[str, str]] = {}
        #: (namespace, cluster) -> (digest, why) of settings Redis refused
        self._refused: dict[tuple[str, str], tuple[str, str]] = {}

    async def apply(self, cluster: RedisCluster, observed: Observed) -> str | None:
        """Set the live settings on the pods that lack them; return why Redis refused one, if it did."""
        settings = live_settings(cluster.spec)
        digest = hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()
        refused = self._refused.get((cluster.namespace, cluster.name))
        if refused is not None and refused[0] == digest:
            return refused[1]
        done: list[str] = []
        for n in observed.nodes:
            if n.redis is None or n.ip is None or n.redis.loading:
                continue
            key = (cluster.namespace, cluster.name, n.pod)
            if self._applied.get(key) == (n.redis.run_id, digest):
                continue
            try:
                for directive, args in settings.items():
                    # one CONFIG SET value: the arguments redisconf parsed, never the raw text; a
                    # value that tokenizes to several words stays ONE value (Redis splits it
                    # itself for multi-argument directives), so it can never name a second
                    # directive the way "CONFIG SET a 1 dir /x" would
                    await observed.connection(n.pod).configure({directive: " ".join(args)})
            except RedisCommandError as exc:
                message = f"spec.redisConfig[{directive}] was refused by Redis on {n.pod}: {exc}"
                self._refused[(cluster.namespace, cluster.name)] = (digest, message)
                self.recorder.event(cluster, "Warning", "ConfigRejected", message)
                log.info("Live configuration refused", cluster=cluster.name, pod=n.pod, directive=directive)
                return message
            except RedisAdminError:
                continue  # not answering now: the next reconcile tries again
            self._applied[key] = (n.redis.run_id, digest)
            done += [n.pod] if settings else []
        self._refused.pop((cluster.namespace, cluster.name), None)
        if done:
            message = f"CONFIG SET {', '.join(settings)} on {len(done)} pod(s), no restart"
            self.recorder.event(cluster, "Normal", "ConfigApplied", message)
        return None

    def forget(self, namespace: str, name: str) -> None:
        for key in [k for k in self._applied if k[:2] == (namespace, name)]:
            del self._applied[key]
        self._refused.pop((namespace, name), None)
