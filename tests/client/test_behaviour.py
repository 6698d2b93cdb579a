"""One behavioural suite, run against the fake client and the real apiserver (``backend`` fixture)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import pytest

from pyctrl.client import (
    AlreadyExists,
    ConfigMap,
    Conflict,
    GroupVersionKind,
    Invalid,
    MergeFrom,
    NotFound,
    ObjectMeta,
    PartialObjectMetadata,
    PatchType,
    Preconditions,
    RawPatch,
    Scale,
    Secret,
    Service,
    UnknownKind,
    UnsupportedMediaType,
)
from pyctrl.client.objects import ServicePort, ServiceSpec
from pyctrl.client.scheme import kind_gvk
from pyctrl.client.watch import WatchBase
from tests.client.support import Backend, Widget, WidgetSpec, WidgetStatus

CM_GVK = GroupVersionKind("", "v1", "ConfigMap")


def cm(ns: str, name: str, labels: dict[str, str] | None = None, **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=ns, labels=labels), data=data or None)


def widget(ns: str, name: str, **spec: object) -> Widget:
    return Widget(metadata=ObjectMeta(name=name, namespace=ns), spec=WidgetSpec.model_validate(spec))


async def test_create_returns_the_stored_object_with_uid_and_resource_version(backend: Backend) -> None:
    created = await backend.client.create(cm(backend.namespace, "a", x="1"))
    assert created.metadata.uid
    assert created.metadata.resource_version
    got = await backend.client.get(ConfigMap, "a", namespace=backend.namespace)
    assert got.data == {"x": "1"}
    assert got.metadata.uid == created.metadata.uid


async def test_create_of_an_existing_name_raises_already_exists(backend: Backend) -> None:
    await backend.client.create(cm(backend.namespace, "dup"))
    with pytest.raises(AlreadyExists, match='"dup" already exists'):
        await backend.client.create(cm(backend.namespace, "dup"))


async def test_get_of_a_missing_object_raises_not_found_with_the_status_message(backend: Backend) -> None:
    with pytest.raises(NotFound) as info:
        await backend.client.get(ConfigMap, "missing", namespace=backend.namespace)
    assert info.value.code == 404
    assert '"missing" not found' in info.value.message


async def test_update_with_a_stale_resource_version_raises_conflict(backend: Backend) -> None:
    first = await backend.client.create(cm(backend.namespace, "c", v="1"))
    first.data = {"v": "2"}
    second = await backend.client.update(first)
    assert second.metadata.resource_version != first.metadata.resource_version
    first.data = {"v": "3"}
    with pytest.raises(Conflict, match="has been modified"):
        await backend.client.update(first)
    got = await backend.client.get(ConfigMap, "c", namespace=backend.namespace)
    assert got.data == {"v": "2"}


async def test_unstructured_objects_work_by_group_version_kind(backend: Backend) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u", "namespace": backend.namespace}}
    created = await backend.client.create({**obj, "data": {"k": "v"}})
    assert isinstance(created, dict)
    assert created["data"] == {"k": "v"}
    got = await backend.client.get(CM_GVK, "u", namespace=backend.namespace)
    assert got["kind"] == "ConfigMap"
    listed = await backend.client.list(CM_GVK, namespace=backend.namespace, fields={"metadata.name": "u"})
    assert [(i["apiVersion"], i["kind"], i["metadata"]["name"]) for i in listed] == [("v1", "ConfigMap", "u")]


async def test_list_filters_by_label_selector_and_field_selector(backend: Backend) -> None:
    ns = backend.namespace
    for name, tier in (("l1", "web"), ("l2", "db"), ("l3", "web")):
        await backend.client.create(cm(ns, name, {"tier": tier, "app": "shop"}))
    web = await backend.client.list(ConfigMap, namespace=ns, labels={"tier": "web"})
    assert sorted(c.name for c in web) == ["l1", "l3"]
    not_web = await backend.client.list(ConfigMap, namespace=ns, label_selector="app=shop,tier notin (web)")
    assert [c.name for c in not_web] == ["l2"]
    by_name = await backend.client.list(ConfigMap, namespace=ns, field_selector="metadata.name=l3")
    assert [c.name for c in by_name] == ["l3"]


async def test_paging_through_1000_objects_with_limit_100_returns_each_exactly_once(backend: Backend) -> None:
    ns = backend.namespace
    names = [f"p{i:04d}" for i in range(1000)]
    sem = asyncio.Semaphore(50)

    async def make(name: str) -> None:
        async with sem:
            await backend.client.create(cm(ns, name, {"set": "paging"}))

    await asyncio.gather(*(make(n) for n in names))
    seen: list[str] = []
    pages = 0
    token: str | None = None
    while True:
        page = await backend.client.list(
            ConfigMap, namespace=ns, labels={"set": "paging"}, limit=100, continue_=token
        )
        pages += 1
        assert len(page) <= 100
        seen.extend(c.name for c in page)
        token = page.continue_
        if token is None:
            break
    assert pages == 10
    assert sorted(seen) == names


async def test_merge_from_patch_sends_only_the_difference(backend: Backend) -> None:
    original = await backend.client.create(cm(backend.namespace, "m", a="1", b="2"))
    modified = original.model_copy(deep=True)
    modified.data = {"a": "1", "c": "3"}
    patched = await backend.client.patch(modified, MergeFrom(original))
    assert patched.data == {"a": "1", "c": "3"}


async def test_merge_from_with_optimistic_lock_raises_conflict_on_a_stale_original(backend: Backend) -> None:
    original = await backend.client.create(cm(backend.namespace, "ol", a="1"))
    bumped = original.model_copy(deep=True)
    bumped.data = {"a": "2"}
    await backend.client.update(bumped)
    stale = original.model_copy(deep=True)
    stale.data = {"a": "3"}
    with pytest.raises(Conflict):
        await backend.client.patch(stale, MergeFrom(original, optimistic_lock=True))


async def test_json_patch_applies_operations_and_a_failing_test_op_rejects_it(backend: Backend) -> None:
    obj = await backend.client.create(cm(backend.namespace, "j", a="1"))
    ops = [{"op": "add", "path": "/data/b", "value": "2"}, {"op": "remove", "path": "/data/a"}]
    patched = await backend.client.patch(obj, RawPatch(PatchType.JSON, ops))
    assert patched.data == {"b": "2"}
    with pytest.raises(Invalid):
        await backend.client.patch(
            obj, RawPatch(PatchType.JSON, [{"op": "test", "path": "/data/b", "value": "x"}])
        )


async def test_strategic_merge_patch_merges_keyed_lists_of_built_in_kinds(backend: Backend) -> None:
    svc = Service(
        metadata=ObjectMeta(name="s", namespace=backend.namespace),
        spec=ServiceSpec(ports=[ServicePort(name="a", port=80)], selector={"app": "x"}),
    )
    created = await backend.client.create(svc)
    patch = {"spec": {"ports": [{"name": "b", "port": 81}]}}
    patched = await backend.client.patch(created, RawPatch(PatchType.STRATEGIC_MERGE, patch))
    assert patched.spec is not None
    assert sorted(p.port for p in patched.spec.ports or []) == [80, 81]


async def test_strategic_merge_patch_is_refused_for_custom_resources(backend: Backend) -> None:
    w = await backend.client.create(widget(backend.namespace, "smp", replicas=1))
    with pytest.raises(UnsupportedMediaType):
        await backend.client.patch(w, RawPatch(PatchType.STRATEGIC_MERGE, {"spec": {"size": 2}}))


async def test_server_side_apply_conflicts_between_managers_and_force_takes_ownership(
    backend: Backend,
) -> None:
    ns = backend.namespace
    await backend.client.apply(cm(ns, "ssa", owner="alice"), field_manager="alice")
    with pytest.raises(Conflict) as info:
        await backend.client.apply(cm(ns, "ssa", owner="bob"), field_manager="bob")
    assert any(c.field == ".data.owner" and "alice" in c.message for c in info.value.causes)
    forced = await backend.client.apply(cm(ns, "ssa", owner="bob"), field_manager="bob", force=True)
    assert forced.data == {"owner": "bob"}
    # alice lost the field: re-applying her old value now conflicts with bob
    with pytest.raises(Conflict):
        await backend.client.apply(cm(ns, "ssa", owner="alice"), field_manager="alice")


async def test_server_side_apply_removes_fields_the_manager_stops_applying(backend: Backend) -> None:
    ns = backend.namespace
    await backend.client.apply(cm(ns, "ssa2", a="1", b="2"), field_manager="m")
    again = await backend.client.apply(cm(ns, "ssa2", a="1"), field_manager="m")
    assert again.data == {"a": "1"}


async def test_update_keeps_the_status_and_status_update_keeps_the_spec(backend: Backend) -> None:
    w = await backend.client.create(widget(backend.namespace, "st", replicas=1, color="red"))
    w.status = WidgetStatus(phase="Ready", replicas=1)
    with_status = await backend.client.status().update(w)
    assert with_status.status == WidgetStatus(phase="Ready", replicas=1)
    with_status.spec = WidgetSpec(replicas=1, color="blue")
    with_status.status = WidgetStatus(phase="Broken")
    updated = await backend.client.update(with_status)
    assert updated.spec is not None
    assert updated.spec.color == "blue"
    assert updated.status == WidgetStatus(phase="Ready", replicas=1)
    updated.spec = WidgetSpec(replicas=1, color="green")
    updated.status = WidgetStatus(phase="Done", replicas=1)
    status_written = await backend.client.status().update(updated)
    assert status_written.spec is not None
    assert status_written.spec.color == "blue"
    assert status_written.status is not None
    assert status_written.status.phase == "Done"


async def test_generation_increases_on_spec_changes_only(backend: Backend) -> None:
    w = await backend.client.create(widget(backend.namespace, "gen", replicas=1))
    assert w.metadata.generation == 1
    w.status = WidgetStatus(phase="x")
    w = await backend.client.status().update(w)
    assert w.metadata.generation == 1
    assert w.spec is not None
    w.spec.replicas = 2
    w = await backend.client.update(w)
    assert w.metadata.generation == 2


async def test_delete_with_a_finalizer_marks_the_object_until_the_finalizer_is_removed(
    backend: Backend,
) -> None:
    ns = backend.namespace
    obj = cm(ns, "fin")
    obj.metadata.finalizers = ["test.pyctrl.io/hold"]
    created = await backend.client.create(obj)
    await backend.client.delete(created)
    marked = await backend.client.get(ConfigMap, "fin", namespace=ns)
    assert marked.metadata.deletion_timestamp
    marked.metadata.finalizers = []
    await backend.client.update(marked)
    with pytest.raises(NotFound):
        await backend.client.get(ConfigMap, "fin", namespace=ns)


async def test_delete_with_a_mismatched_precondition_raises_conflict(backend: Backend) -> None:
    created = await backend.client.create(cm(backend.namespace, "pre"))
    with pytest.raises(Conflict, match="does not match the UID in record"):
        await backend.client.delete(
            created, preconditions=Preconditions(uid="00000000-0000-0000-0000-000000000000")
        )
    await backend.client.delete(created, preconditions=Preconditions(uid=created.metadata.uid))
    with pytest.raises(NotFound):
        await backend.client.get(ConfigMap, "pre", namespace=backend.namespace)


async def test_dry_run_writes_are_answered_but_not_persisted(backend: Backend) -> None:
    answered = await backend.client.create(cm(backend.namespace, "dry", a="1"), dry_run=True)
    assert answered.data == {"a": "1"}
    with pytest.raises(NotFound):
        await backend.client.get(ConfigMap, "dry", namespace=backend.namespace)
    real = await backend.client.create(cm(backend.namespace, "dry", a="1"))
    await backend.client.delete(real, dry_run=True)
    assert (await backend.client.get(ConfigMap, "dry", namespace=backend.namespace)).data == {"a": "1"}


async def test_delete_all_of_deletes_exactly_the_selected_objects(backend: Backend) -> None:
    ns = backend.namespace
    for name, group in (("d1", "x"), ("d2", "x"), ("d3", "y")):
        await backend.client.create(cm(ns, name, {"group": group}))
    await backend.client.delete_all_of(ConfigMap, namespace=ns, labels={"group": "x"})
    left = await backend.client.list(ConfigMap, namespace=ns, label_selector="group")
    assert [c.name for c in left] == ["d3"]


async def test_scale_subresource_reads_and_writes_spec_replicas(backend: Backend) -> None:
    w = await backend.client.create(widget(backend.namespace, "sc", replicas=2))
    scale = await backend.client.subresource("scale").get(w, Scale)
    assert scale.spec is not None
    assert scale.spec.replicas == 2
    scale.spec.replicas = 5
    await backend.client.subresource("scale").update(w, scale)
    got = await backend.client.get(Widget, "sc", namespace=backend.namespace)
    assert got.spec is not None
    assert got.spec.replicas == 5


async def test_writes_never_modify_their_argument(backend: Backend) -> None:
    obj = cm(backend.namespace, "arg", a="1")
    before = obj.model_dump()
    await backend.client.create(obj)
    assert obj.model_dump() == before


async def test_delete_options_are_accepted_and_background_deletion_removes_the_object(
    backend: Backend,
) -> None:
    created = await backend.client.create(cm(backend.namespace, "bg"))
    await backend.client.delete(created, propagation_policy="Background", grace_period_seconds=0)
    with pytest.raises(NotFound):
        await backend.client.get(ConfigMap, "bg", namespace=backend.namespace)
    with pytest.raises(ValueError, match="propagation_policy"):
        await backend.client.delete(created, propagation_policy="Sometimes")  # type: ignore[arg-type]


async def test_status_apply_changes_only_the_status(backend: Backend) -> None:
    w = await backend.client.create(widget(backend.namespace, "sa", color="red"))
    w.spec = WidgetSpec(color="blue")
    w.status = WidgetStatus(phase="Ready")
    w.metadata.managed_fields = None
    w.metadata.resource_version = None
    applied = await backend.client.status().apply(w, field_manager="ctrl")
    assert applied.spec == WidgetSpec(color="red")
    assert applied.status == WidgetStatus(phase="Ready")


# -- metadata-only reads (PartialObjectMetadata) ---------------------------------------------------


def secret(ns: str, name: str, labels: dict[str, str] | None = None) -> Secret:
    return Secret(metadata=ObjectMeta(name=name, namespace=ns, labels=labels), data={"key": "c2VjcmV0"})


async def test_metadata_only_get_and_list_return_only_metadata_with_the_kinds_type_meta(
    backend: Backend,
) -> None:
    ns = backend.namespace
    created = await backend.client.create(secret(ns, "s1", {"app": "x"}))
    await backend.client.create(secret(ns, "s2", {"app": "y"}))
    meta_kind = PartialObjectMetadata.of(Secret)
    got = await backend.client.get(meta_kind, "s1", namespace=ns)
    assert isinstance(got, PartialObjectMetadata)
    assert (got.api_version, got.kind) == ("v1", "Secret")
    assert got.metadata.uid == created.metadata.uid
    assert got.metadata.labels == {"app": "x"}
    assert "data" not in got.model_dump(by_alias=True)  # the payload never arrived
    listed = await backend.client.list(meta_kind, namespace=ns, labels={"app": "y"})
    assert [(s.kind, s.name, s.metadata.labels) for s in listed.items] == [("Secret", "s2", {"app": "y"})]
    assert all("data" not in s.model_dump(by_alias=True) for s in listed.items)
    assert listed.resource_version
    with pytest.raises(NotFound):
        await backend.client.get(meta_kind, "missing", namespace=ns)


async def test_a_metadata_only_watch_streams_partial_objects(backend: Backend) -> None:
    ns = backend.namespace
    start = (await backend.client.list(PartialObjectMetadata.of(Secret), namespace=ns)).resource_version
    await backend.client.create(secret(ns, "w", {"app": "x"}))
    watcher = cast(WatchBase, backend.client)  # ApiClient and FakeClient both are
    events = watcher.watch(PartialObjectMetadata.of(Secret), namespace=ns, resource_version=start)
    async with contextlib.aclosing(events):
        async for event in events:
            if event.type == "BOOKMARK":
                continue
            assert event.type == "ADDED"
            assert (event.object.kind, event.object.name) == ("Secret", "w")
            assert event.object.metadata.labels == {"app": "x"}
            assert "data" not in event.object.model_dump(by_alias=True)
            break


def test_the_metadata_only_kind_of_a_kind_is_one_class_and_needs_a_kind() -> None:
    assert PartialObjectMetadata.of(Secret) is PartialObjectMetadata.of(Secret)
    assert PartialObjectMetadata.of(PartialObjectMetadata.of(Secret)) is PartialObjectMetadata.of(Secret)
    assert PartialObjectMetadata.of(CM_GVK).gvk == CM_GVK
    with pytest.raises(UnknownKind, match=r"use PartialObjectMetadata.of\(kind\)"):
        kind_gvk(PartialObjectMetadata)
    with pytest.raises(TypeError, match="pass a typed kind or a GroupVersionKind"):
        PartialObjectMetadata.of(cast(Any, "Secret"))
