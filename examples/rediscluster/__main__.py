"""``python -m examples.rediscluster``: run the RedisCluster operator.

Flags follow kubebuilder's generated ``main.go``: ``--kubeconfig``, ``--namespace`` (comma-separated
list, or all when omitted), ``--leader-elect``, ``--leader-election-id``,
``--leader-election-namespace``, ``--leader-elect-lease-duration``/``--leader-elect-renew-deadline``/
``--leader-elect-retry-period`` (seconds, default 15/10/2 as controller-runtime; refused unless
lease duration > renew deadline > 1.2 x retry period, as client-go), ``--metrics-bind-address``
(``:8443``), ``--metrics-secure``/``--no-metrics-secure`` (default on, as kubebuilder's ``main.go``:
HTTPS, every scrape authenticated with a TokenReview and authorized with a SubjectAccessReview for
``get`` on ``/metrics``; off: plain HTTP for anyone who reaches the port), ``--metrics-cert-dir``
(``tls.crt``/``tls.key``; default a self-signed certificate made at start),
``--health-probe-bind-address`` (``:8081``), ``--log-format json|text``, ``--log-level``,
``--max-concurrent-reconciles``, ``--no-warm-standby`` (a standby then starts its informers only
after winning the election), ``--webhook-port``/``--webhook-host``/``--webhook-cert-dir`` to serve the
validating webhook (off by default: it needs a serving certificate), and ``--redis-timeout`` (the
connect and socket timeout of every Redis command and health probe, default 1 s), and
``--min-backup-interval`` (seconds, default 300: a ``spec.backup.schedule`` whose runs come
closer is refused by the webhook and the schedule controller), ``--s3-endpoint-allowlist``
(comma-separated ``scheme://host[:port]`` or ``scheme://*.domain``: the only S3 endpoints
backups may use; default any), ``--shard-count N`` (N > 1: this
replica is one of N sharing the RedisClusters, see :mod:`pyctrl.sharding`; the
``--leader-elect-*`` timings and namespace apply to its member Lease; not with
``--leader-elect``), and ``--cluster-domain`` (the cluster's DNS domain, default
``cluster.local``: the exporter sidecar of a TLS cluster connects to its pod's stable name,
``<pod>.<name>-headless.<namespace>.svc.<domain>``), and the NetworkPolicies' peers:
``--network-policy-operator-namespace`` (the operator's own, empty for any),
``--network-policy-operator-labels`` and ``--network-policy-monitoring-namespaces`` (``k=v,...``).
Exit codes: 0 after a clean stop, 1 on a
runtime failure or lost leadership, 2 on bad configuration (unreadable kubeconfig, unreachable
apiserver, missing CRD).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys

from examples.rediscluster.backup import DEFAULT_IMAGE
from examples.rediscluster.backup.endpoints import EndpointAllowlist
from examples.rediscluster.backup.schedule import DEFAULT_MIN_INTERVAL
from examples.rediscluster.operator import OperatorOptions, run
from examples.rediscluster.shared.networkpolicy import parse_label_selector
from examples.rediscluster.shared.redis_admin import DEFAULT_IO_TIMEOUT
from examples.rediscluster.shared.resources import DEFAULT_CLUSTER_DOMAIN
from pyctrl.leaderelection import LeaderElectionConfig

_DOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> OperatorOptions:
    p = argparse.ArgumentParser(
        prog="python -m examples.rediscluster", description="The RedisCluster operator."
    )
    p.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig path (default: $KUBECONFIG, in-cluster, ~/.kube/config)",
    )
    p.add_argument(
        "--namespace",
        default=None,
        help="watch only these namespaces, comma-separated (default: all); the Role each needs "
        "is the ClusterRole's rules bound in that namespace",
    )
    p.add_argument("--leader-elect", action="store_true", help="enable leader election (one active replica)")
    p.add_argument("--leader-election-id", default="rediscluster-operator.redis.pyctrl.dev")
    p.add_argument("--leader-election-namespace", default=None, help="in-cluster namespace, else 'default'")
    # Kubernetes components' flag names (component-base); seconds, validated below as client-go does.
    p.add_argument("--leader-elect-lease-duration", dest="lease_duration", type=_positive, default=15.0)
    p.add_argument("--leader-elect-renew-deadline", dest="renew_deadline", type=_positive, default=10.0)
    p.add_argument("--leader-elect-retry-period", dest="retry_period", type=_positive, default=2.0)
    p.add_argument("--metrics-bind-address", default=":8443", help="'0' disables")
    p.add_argument(
        "--metrics-secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve /metrics over HTTPS to authenticated, authorized scrapers only (default: on)",
    )
    p.add_argument(
        "--metrics-cert-dir",
        default=None,
        help="tls.crt and tls.key of the secure metrics server (default: self-signed at start)",
    )
    p.add_argument("--health-probe-bind-address", default=":8081", help="'0' disables")
    p.add_argument("--log-format", choices=("text", "json"), default="text")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    p.add_argument("--max-concurrent-reconciles", type=int, default=4)
    p.add_argument(
        "--warm-standby",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --leader-elect, fill the caches before winning the election (default: on)",
    )
    p.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        help="serve the validating webhook on this port, e.g. 9443 (default 0: no webhook server)",
    )
    p.add_argument(
        "--webhook-host",
        default="",
        help="address the webhook server binds (default: every address; controller-runtime's Host)",
    )
    p.add_argument(
        "--webhook-cert-dir",
        default=None,
        help="tls.crt and tls.key of the webhook (default: <tmp>/k8s-webhook-server/serving-certs)",
    )
    p.add_argument(
        "--redis-timeout",
        type=_positive,
        default=DEFAULT_IO_TIMEOUT,
        help="connect/socket timeout in seconds of each Redis command and probe (default 1)",
    )
    p.add_argument(
        "--backup-image",
        default=DEFAULT_IMAGE,
        help=f"image of the backup Jobs and restore init containers (default {DEFAULT_IMAGE})",
    )
    p.add_argument(
        "--min-backup-interval",
        type=_positive,
        default=DEFAULT_MIN_INTERVAL,
        help="seconds: a backup schedule whose runs come closer is refused (default 300)",
    )
    p.add_argument(
        "--s3-endpoint-allowlist",
        default="",
        help="comma-separated scheme://host[:port] (or scheme://*.domain) S3 endpoints backups may "
        "use (default: any)",
    )
    p.add_argument(
        "--shard-count",
        type=int,
        default=1,
        help="replicas sharing the RedisClusters, each reconciling its part (default 1: no sharding)",
    )
    p.add_argument(
        "--cluster-domain",
        default=DEFAULT_CLUSTER_DOMAIN,
        help=f"the cluster's DNS domain, which Pods' stable names end in (default {DEFAULT_CLUSTER_DOMAIN})",
    )
    p.add_argument(
        "--network-policy-operator-namespace",
        default="",
        help="the operator's namespace, from which its pods may reach Redis (default: any namespace)",
    )
    p.add_argument(
        "--network-policy-operator-labels",
        default="app.kubernetes.io/name=rediscluster-operator",
        help="labels (k=v,...) of the operator's pods, which may reach Redis",
    )
    p.add_argument(
        "--network-policy-monitoring-namespaces",
        default="kubernetes.io/metadata.name=monitoring",
        help="labels (k=v,...) of the namespaces whose pods may scrape the exporter ('' for all)",
    )
    args = p.parse_args(argv)
    try:
        EndpointAllowlist.parse(args.s3_endpoint_allowlist.split(","))
    except ValueError as exc:
        p.error(f"--s3-endpoint-allowlist: {exc}")
    if not _DOMAIN.fullmatch(args.cluster_domain):
        p.error(
            f"--cluster-domain must be a DNS name such as {DEFAULT_CLUSTER_DOMAIN}, "
            f"not {args.cluster_domain!r}"
        )
    for flag in ("operator_labels", "monitoring_namespaces"):
        try:
            parse_label_selector(
                getattr(args, f"network_policy_{flag}"), f"--network-policy-{flag.replace('_', '-')}"
            )
        except ValueError as exc:
            p.error(str(exc))
    if args.shard_count < 1:
        p.error(f"--shard-count must be at least 1, got {args.shard_count}")
    if args.shard_count > 1 and args.leader_elect:
        p.error("--shard-count > 1 and --leader-elect exclude each other: sharded replicas all reconcile")
    try:
        LeaderElectionConfig(
            name=args.leader_election_id,
            namespace="-",  # where the Lease lives is known only at start
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
        )
    except ValueError as exc:
        p.error(f"--leader-elect-*: {exc}")
    return OperatorOptions(**vars(args))  # flag names (or their dest) are the option names


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
