"""The NetworkPolicy of a RedisCluster on the real apiserver (issue 24): what the operator keeps
for each cluster, owned by it, deleted with ``networkPolicy.enabled: false`` and made again when
it is turned back on; the CRD refuses a ``clients`` entry that selects nothing.

The local node does not enforce NetworkPolicy (every pod shares the host's loopback network), so
this tests the object the apiserver stores, not the traffic: enforcing it needs a network plugin
with NetworkPolicy support (Calico, Cilium...) on real nodes, which this environment does not run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.shared.networkpolicy import PolicyPeers, network_policy
from pyctrl.client.errors import Invalid, NotFound
from pyctrl.envtest import Environment
from pyctrl.testing import eventually
from tests.operator.conftest import Cluster, OperatorFactory

pytestmark = pytest.mark.controlplane

SHOP = {
    "namespaceSelector": {"matchLabels": {"team": "shop"}},
    "podSelector": {"matchLabels": {"app": "web"}},
}


def policy(env: Environment, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return dict(env.http.get(f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/{name}"))
    except NotFound:
        return None


async def test_each_cluster_gets_an_owned_network_policy_letting_in_only_its_peers(
    start_operator: OperatorFactory, cluster_factory: Callable[[str], Cluster], envtest: Environment
) -> None:
    await start_operator(
        network_policy_operator_namespace="redis-operator",
        network_policy_operator_labels="app.kubernetes.io/name=rediscluster-operator,app.kubernetes.io/instance=r1",
        network_policy_monitoring_namespaces="monitoring=prometheus",
    )
    c = cluster_factory("np")
    uid = c.create(replicas=1, networkPolicy={"clients": [SHOP]})["metadata"]["uid"]
    np = await eventually(
        lambda: _async(policy(envtest, c.namespace, "np")), within=60, what="the NetworkPolicy", interval=0.2
    )
    (owner,) = np["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "RedisCluster",
        "np",
        uid,
        True,
    )
    own = {"matchLabels": {"app.kubernetes.io/instance": "np", "app.kubernetes.io/name": "redis"}}
    assert np["spec"]["podSelector"] == own
    assert np["spec"]["policyTypes"] == ["Ingress"]  # egress stays open (backups reach S3)
    redis, metrics = np["spec"]["ingress"]  # replication mode: no bus port
    assert redis["ports"] == [{"protocol": "TCP", "port": 6379}]
    assert redis["from"] == [
        {"podSelector": own},  # the cluster's own pods
        {
            "podSelector": {  # its backup and restore Jobs
                "matchLabels": {
                    "app.kubernetes.io/managed-by": "pyctrl-rediscluster",
                    "redis.pyctrl.dev/cluster": "np",
                }
            }
        },
        {  # the operator's pods, in its namespace
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "redis-operator"}},
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "rediscluster-operator",
                    "app.kubernetes.io/instance": "r1",
                }
            },
        },
        {"podSelector": {"matchLabels": {"redis.pyctrl.dev/client": "np"}}},  # the documented client label
        SHOP,  # spec.networkPolicy.clients
    ]
    assert metrics == {
        "ports": [{"protocol": "TCP", "port": 9121}],
        "from": [{"namespaceSelector": {"matchLabels": {"monitoring": "prometheus"}}}],
    }

    # turned off: the operator deletes its policy; turned on again: made again
    patch = {"spec": {"networkPolicy": {"enabled": False}}}
    c.envtest.http.request("PATCH", f"{c.base}/np", patch, content_type="application/merge-patch+json")
    await eventually(
        lambda: _async(policy(envtest, c.namespace, "np") is None),
        within=60,
        what="its deletion",
        interval=0.2,
    )
    patch = {"spec": {"networkPolicy": {"enabled": True}}}
    c.envtest.http.request("PATCH", f"{c.base}/np", patch, content_type="application/merge-patch+json")
    await eventually(
        lambda: _async(policy(envtest, c.namespace, "np")), within=60, what="the policy again", interval=0.2
    )

    # a clients entry that selects nothing is refused by the CRD, naming why
    with pytest.raises(Invalid, match="needs podSelector or namespaceSelector"):
        cluster_factory("np-bad").create(replicas=1, networkPolicy={"clients": [{}]})

    # cluster mode without the exporter: the bus port from the cluster's own pods only, no metrics
    # rule; the apiserver accepts the object as it is (server-side dry run)
    sharded = RedisCluster.model_validate(
        {
            "metadata": {"name": "shards", "namespace": c.namespace},
            "spec": {"mode": "cluster", "monitoring": {"exporter": False}},
        }
    )
    body = network_policy(sharded, PolicyPeers())
    stored = envtest.http.request(
        "POST", f"/apis/networking.k8s.io/v1/namespaces/{c.namespace}/networkpolicies?dryRun=All", body
    )
    redis, bus = stored["spec"]["ingress"]
    assert bus == {
        "ports": [{"protocol": "TCP", "port": 16379}],
        "from": [
            {
                "podSelector": {
                    "matchLabels": {"app.kubernetes.io/instance": "shards", "app.kubernetes.io/name": "redis"}
                }
            }
        ],
    }
    operator_peer = redis["from"][2]  # no operator namespace configured: its pods in any namespace
    assert operator_peer == {
        "namespaceSelector": {},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "rediscluster-operator"}},
    }


async def _async(value: Any) -> Any:
    return value
