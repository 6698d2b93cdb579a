"""Informer acceptance on the real control plane: 410 relists, apiserver restarts, list modes."""

from __future__ import annotations

import pytest

from pyctrl.cache import Cache, CacheSyncTimeout
from pyctrl.client import ApiClient, ConfigMap, ObjectMeta, load_kubeconfig
from pyctrl.client.errors import Forbidden
from pyctrl.envtest import Environment
from tests.cache.support import Recorder, informer_for
from tests.client.conftest import RestartApiserver
from tests.client.support import Backend, eventually

pytestmark = pytest.mark.controlplane


def cm(ns: str, name: str, v: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=ns), data={"v": v})


async def test_a_forced_410_relists_with_missed_deletes_as_tombstones_and_no_event_lost(
    real_backend: Backend, restart_apiserver: RestartApiserver
) -> None:
    client, ns = real_backend.client, real_backend.namespace
    gone = await client.create(cm(ns, "gone", "1"))
    kept = await client.create(cm(ns, "kept", "1"))
    rec = Recorder()
    informer = await informer_for(real_backend)
    informer.add_event_handler(rec)
    try:
        informer.start()
        assert await informer.wait_for_sync(20)
        await informer.stop()
        await client.delete(gone)
        kept.data = {"v": "2"}
        await client.update(kept)
        await client.create(cm(ns, "fresh", "1"))
        # a restart empties the watch cache and compaction the etcd history: the watch from the
        # informer's resourceVersion now fails with 410 and the informer must relist
        await restart_apiserver(compact=True)
        informer.start()

        async def converged() -> None:
            assert ("delete", "gone", "1", True) in rec.events
            assert ("update", "kept", "1", "2") in rec.events
            assert ("add", "fresh", "1", False) in rec.events

        await eventually(converged, within=60)
        live = await client.list(ConfigMap, namespace=ns)
        cached = informer.store.list(namespace=ns)
        assert len(cached) == len(live)
        assert informer.store.get(ns, "gone") is None
    finally:
        await informer.stop()


async def test_the_cache_survives_an_apiserver_restart_mid_watch_and_converges(
    api: ApiClient, namespace: str, restart_apiserver: RestartApiserver
) -> None:
    before = await api.create(cm(namespace, "before", "1"))
    async with Cache(api) as cache:
        assert (await cache.get(ConfigMap, "before", namespace=namespace)).data == {"v": "1"}
        await restart_apiserver()
        before.data = {"v": "2"}
        await api.update(before)
        await api.create(cm(namespace, "after", "1"))

        async def converged() -> None:
            cached = {c.name: c.data for c in await cache.list(ConfigMap, namespace=namespace)}
            assert cached.get("before") == {"v": "2"}
            assert cached.get("after") == {"v": "1"}

        await eventually(converged, within=60)


@pytest.mark.parametrize("watch_list", [True, False], ids=["streaming-list", "paged-list"])
async def test_both_initial_list_modes_sync_the_same_content(real_backend: Backend, watch_list: bool) -> None:
    client, ns = real_backend.client, real_backend.namespace
    for i in range(7):
        await client.create(cm(ns, f"o{i}", str(i)))
    async with await informer_for(real_backend, watch_list=watch_list, page_size=3) as informer:
        assert await informer.wait_for_sync(20)
        assert informer.watcher.watch_list is watch_list
        live = {c.name for c in await client.list(ConfigMap, namespace=ns)}
        assert {k[1] for k in informer.store.all_keys()} == live


async def test_a_kind_the_identity_may_not_list_fails_the_read_and_unsynced_names_the_forbidden(
    envtest: Environment, namespace: str
) -> None:
    user = f"cache-nobody-{namespace}"
    kubeconfig = envtest.add_user(user)
    client = ApiClient(await load_kubeconfig(kubeconfig))
    async with client, Cache(client, sync_timeout=2, default_namespaces=[namespace]) as cache:
        with pytest.raises(CacheSyncTimeout, match="did not sync"):
            await cache.get(ConfigMap, "x", namespace=namespace)
        (informer,) = (await cache.get_informer(ConfigMap)).informers.values()
        assert isinstance(informer.last_error, Forbidden)
        (line,) = cache.unsynced()
        assert line.startswith(f"informer for ConfigMap in {namespace}: Forbidden: ")
        assert f'User "{user}" cannot list resource "configmaps"' in line
        # Granted the list, the informer syncs (with its failure backoff) and the error is gone.
        rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]
        envtest.http.request(
            "POST",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
            {"metadata": {"name": "reader"}, "rules": rules},
        )
        envtest.http.request(
            "POST",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
            {
                "metadata": {"name": "reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            },
        )
        assert await informer.wait_for_sync(60)
        assert informer.last_error is None
        assert cache.unsynced() == []
