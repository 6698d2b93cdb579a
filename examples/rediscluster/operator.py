"""Wiring of the RedisCluster operator on pyctrl's public API (kubebuilder's ``main.go``).

The manager owns the client, cache, servers and leader election; one controller reconciles
RedisCluster objects, triggered by: the RedisCluster itself (spec changes, deletion — not its own
status writes), its children (StatefulSet, ConfigMap, Services, PodDisruptionBudget, through their
controller ownerReference), its Pods (by the instance label) and the background health prober
(a Channel source at ``FAILOVER_PRIORITY``: failover work is handed out before routine requests;
the settled 30 s look-again is requeued at ``LOW_PRIORITY``), which runs only on the elected
leader. With ``--shard-count`` > 1 each replica reconciles only the RedisClusters it holds in the
sharding ring, and its prober and slot mover act only on those: a cluster handed to another
replica (or deleted) is forgotten by every room before the other replica may claim it (the
fence's release hook). With ``webhook_port`` set, the manager also serves the validating webhook
(``webhook.py``) and ``/readyz`` waits for it.

Least privilege: Secrets are neither cached nor watched (``disable_cache_for=[Secret]``: any read
is a GET of one named Secret), so the generated RBAC grants Secrets get/create/patch and no
list/watch — the operator cannot enumerate the cluster's Secrets. The Secrets a spec names are
read on every reconcile; a rotated certificate or password is picked up at the cluster's next
reconcile (at the latest its settled look-again), a missing one is looked for again every
``SECRET_POLL`` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.backup import RedisBackup
from examples.rediscluster.api.v1beta1 import RedisClusterV1beta1
from examples.rediscluster.backup import DEFAULT_IMAGE
from examples.rediscluster.backup.controllers import add_backup_controllers
from examples.rediscluster.backup.endpoints import EndpointAllowlist
from examples.rediscluster.backup.schedule import DEFAULT_MIN_INTERVAL
from examples.rediscluster.cluster.mover import SlotMover
from examples.rediscluster.controller import RedisClusterReconciler
from examples.rediscluster.replication.decision import FAILOVER_PRIORITY
from examples.rediscluster.replication.nodeloss import Node
from examples.rediscluster.replication.prober import ClusterKey, HealthProber
from examples.rediscluster.shared.networkpolicy import NetworkPolicy, PolicyPeers, parse_label_selector
from examples.rediscluster.shared.redis_admin import DEFAULT_IO_TIMEOUT
from examples.rediscluster.shared.resources import DEFAULT_CLUSTER_DOMAIN
from examples.rediscluster.webhook import RedisClusterValidator
from pyctrl import ControllerBuilder, Manager, Request, WebhookBuilder, _access, load_config, setup_logging
from pyctrl.cache import CacheOptions
from pyctrl.client import ConfigMap, Pod, Secret, Service, StatefulSet
from pyctrl.client.errors import ConfigError, KubernetesError, TransportError, UnknownKind
from pyctrl.client.objects import PodDisruptionBudget
from pyctrl.client.scheme import default_scheme
from pyctrl.event import GenericEvent, UpdateEvent
from pyctrl.handler import enqueue_request_for_object, enqueue_requests_from_map_func, with_priority
from pyctrl.leaderelection import LeaderElectionLost
from pyctrl.log import get_logger
from pyctrl.manager.filters import with_authentication_and_authorization
from pyctrl.predicate import Funcs, label_selector
from pyctrl.sharding import ShardingOptions
from pyctrl.source import Channel
from pyctrl.webhook import Server, WebhookError

__all__ = ["Operator", "OperatorOptions", "build_operator", "run"]

log = get_logger("rediscluster.operator")


@dataclass(frozen=True)
class OperatorOptions:
    kubeconfig: str | None = None
    namespace: str | None = None
    leader_elect: bool = False
    leader_election_id: str = "rediscluster-operator.redis.pyctrl.dev"
    leader_election_namespace: str | None = None
    metrics_bind_address: str = ":8443"
    #: HTTPS with TokenReview + SubjectAccessReview (controller-runtime's secure metrics)
    metrics_secure: bool = True
    metrics_cert_dir: str | None = None
    health_probe_bind_address: str = ":8081"
    log_format: str = "text"
    log_level: str = "info"
    max_concurrent_reconciles: int = 4
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    webhook_port: int = 0
    webhook_host: str = ""
    webhook_cert_dir: str | None = None
    redis_timeout: float = DEFAULT_IO_TIMEOUT
    warm_standby: bool = True
    backup_image: str = DEFAULT_IMAGE
    #: seconds: a backup schedule whose runs come closer is refused (webhook and controller)
    min_backup_interval: float = DEFAULT_MIN_INTERVAL
    #: comma-separated ``scheme://host[:port]`` (or ``*.domain``) S3 endpoints backups may use; empty: any
    s3_endpoint_allowlist: str = ""
    shard_count: int = 1
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    #: the NetworkPolicies' peers (``shared.networkpolicy.PolicyPeers``): the operator's namespace
    #: (empty: any), its pods' labels and the monitoring namespaces' labels (``k=v,...``)
    network_policy_operator_namespace: str = ""
    network_policy_operator_labels: str = "app.kubernetes.io/name=rediscluster-operator"
    network_policy_monitoring_namespaces: str = "kubernetes.io/metadata.name=monitoring"

    def policy_peers(self) -> PolicyPeers:
        """The NetworkPolicies' peers; ValueError naming the option that does not parse."""
        return PolicyPeers(
            operator_namespace=self.network_policy_operator_namespace or None,
            operator_pod_labels=parse_label_selector(
                self.network_policy_operator_labels, "--network-policy-operator-labels"
            ),
            monitoring_namespace_labels=parse_label_selector(
                self.network_policy_monitoring_namespaces, "--network-policy-monitoring-namespaces"
            ),
        )


#: The sharding ring of the operator's replicas (``--shard-count`` > 1; see :mod:`pyctrl.sharding`).
SHARDING_RING = "rediscluster-operator"


class ProberRunnable:
    """Runs the health prober while this replica leads (standbys probe nothing)."""

    needs_leader_election = True

    def __init__(self, prober: HealthProber) -> None:
        self.prober = prober

    async def start(self, stop: asyncio.Event) -> None:
        await self.prober.start()
        try:
            await stop.wait()
        finally:
            await self.prober.stop()


def _spec_or_lifecycle_changed(event: UpdateEvent) -> bool:
    """The RedisCluster's own status writes do not trigger it; spec, deletion and finalizers do."""
    old, new = event.object_old, event.object_new
    return (
        _access.generation(old) != _access.generation(new)
        or old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        or old.metadata.finalizers != new.metadata.finalizers
        or old.metadata.annotations != new.metadata.annotations
    )


def _pod_to_cluster(pod: Any) -> list[Request]:
    instance = _access.labels(pod).get("app.kubernetes.io/instance")
    return [Request(_access.namespace(pod), instance)] if instance else []


@dataclass(frozen=True)
class Operator:
    """The assembled operator: its manager, reconciler and prober."""

    manager: Manager
    reconciler: RedisClusterReconciler
    prober: HealthProber


def build_operator(config: Any, options: OperatorOptions) -> Operator:
    s3_endpoints = EndpointAllowlist.parse(options.s3_endpoint_allowlist.split(","))  # ValueError: bad entry
    scheme = default_scheme.copy()
    scheme.add(RedisCluster)
    scheme.add(RedisClusterV1beta1)  # with the hub above: the webhook server also serves /convert
    scheme.add(Node)
    scheme.add(RedisBackup)
    scheme.add(NetworkPolicy)
    cache_options: CacheOptions = {}
    namespaces = [ns.strip() for ns in (options.namespace or "").split(",") if ns.strip()]
    if namespaces:
        cache_options["default_namespaces"] = namespaces
    webhook_server = (
        Server(host=options.webhook_host, port=options.webhook_port, cert_dir=options.webhook_cert_dir)
        if options.webhook_port
        else None
    )
    mgr = Manager(
        config,
        webhook_server=webhook_server,
        scheme=scheme,
        cache_options=cache_options,
        disable_cache_for=[Secret],
        metrics_bind_address=options.metrics_bind_address,
        metrics_secure_serving=options.metrics_secure,
        metrics_filter_provider=with_authentication_and_authorization if options.metrics_secure else None,
        metrics_cert_dir=options.metrics_cert_dir if options.metrics_secure else None,
        health_probe_bind_address=options.health_probe_bind_address,
        leader_election=options.leader_elect,
        leader_election_id=options.leader_election_id,
        leader_election_namespace=options.leader_election_namespace,
        lease_duration=options.lease_duration,
        renew_deadline=options.renew_deadline,
        retry_period=options.retry_period,
        leader_election_release_on_cancel=True,
        warm_standby=options.warm_standby,
        sharding=ShardingOptions(
            ring=SHARDING_RING,
            namespace=options.leader_election_namespace,
            lease_duration=options.lease_duration,
            renew_deadline=options.renew_deadline,
            retry_period=options.retry_period,
        )
        if options.shard_count > 1
        else None,
    )
    # The prober's notifications (a master down, a pod that stops or starts answering) go to the
    # workqueue at FAILOVER_PRIORITY, ahead of every routine request: with many clusters on one
    # operator a failover does not wait for the fleet's reconciles. The slot mover's are routine.
    health: asyncio.Queue[GenericEvent] = asyncio.Queue()
    moves: asyncio.Queue[GenericEvent] = asyncio.Queue()

    def notifier(events: asyncio.Queue[GenericEvent]) -> Callable[[ClusterKey], None]:
        def notify(key: ClusterKey) -> None:
            events.put_nowait(GenericEvent({"metadata": {"namespace": key[0], "name": key[1]}}))

        return notify

    prober = HealthProber(notifier(health))
    mgr.add(ProberRunnable(prober))
    slot_mover = SlotMover(notifier(moves))  # cluster mode's background resharding, leader only
    mgr.add(slot_mover)
    reconciler = RedisClusterReconciler(
        mgr.client,
        mgr.api_reader,
        mgr.get_event_recorder_for("rediscluster-operator"),
        prober,
        slot_mover,
        io_timeout=options.redis_timeout,
        backup_image=options.backup_image,
        cluster_domain=options.cluster_domain,
        policy_peers=options.policy_peers(),
    )
    (
        ControllerBuilder(mgr)
        .for_(RedisCluster, predicates=[Funcs(update_func=_spec_or_lifecycle_changed)])
        .owns(StatefulSet)
        .owns(ConfigMap)
        .owns(Service)
        .owns(PodDisruptionBudget)
        .owns(NetworkPolicy)
        .watches(
            Pod,
            enqueue_requests_from_map_func(_pod_to_cluster),
            predicates=[label_selector({"app.kubernetes.io/managed-by": "pyctrl-rediscluster"})],
        )
        .watches(Channel(health, with_priority(enqueue_request_for_object(), FAILOVER_PRIORITY)))
        .watches(Channel(moves, enqueue_request_for_object()))
        .with_options(max_concurrent_reconciles=options.max_concurrent_reconciles)
        .named("rediscluster")
        .complete(reconciler)
    )
    if mgr.shard_coordinator is not None:  # a cluster handed to another replica: stop probing it
        mgr.shard_coordinator.gate("rediscluster").on_release(reconciler.release)
    add_backup_controllers(
        mgr,
        options.backup_image,
        cluster_predicates=[Funcs(update_func=_spec_or_lifecycle_changed)],
        max_concurrent_reconciles=options.max_concurrent_reconciles,
        min_backup_interval=options.min_backup_interval,
        s3_endpoints=s3_endpoints,
    )
    if webhook_server is not None:
        validator = RedisClusterValidator(
            min_backup_interval=options.min_backup_interval, s3_endpoints=s3_endpoints
        )
        WebhookBuilder(mgr).for_(RedisCluster).with_validator(validator).complete()
        mgr.add_readyz_check("webhook", webhook_server.started_checker())
    return Operator(mgr, reconciler, prober)


async def run(options: OperatorOptions, stop: asyncio.Event | None = None) -> int:
    """Run until stopped; the process exit code (see ``__main__``)."""
    setup_logging(options.log_format, options.log_level.upper())
    try:
        config = await load_config(options.kubeconfig)
    except ConfigError as exc:
        log.error("Cannot load the Kubernetes configuration", error=str(exc))
        return 2
    mgr = build_operator(config, options).manager
    try:
        await mgr.api_client.mapping(RedisCluster)
    except UnknownKind:
        log.error(
            "The RedisCluster CRD is not installed: kubectl apply -f crds/redis.pyctrl.dev_redisclusters.yaml"
        )
        await mgr.api_client.close()
        return 2
    except (TransportError, KubernetesError) as exc:
        log.error("Cannot reach the apiserver", host=config.host, error=str(exc))
        await mgr.api_client.close()
        return 2
    try:
        await mgr.start(stop)
    except LeaderElectionLost as exc:
        log.error("Leader election lost; exiting", error=str(exc))
        return 1
    except WebhookError as exc:  # no serving certificate, or the port is taken: configuration
        log.error("Cannot serve the webhook", error=str(exc))
        return 2
    except Exception as exc:
        log.error("Operator failed", error=str(exc), exc_info=exc)
        return 1
    return 0
