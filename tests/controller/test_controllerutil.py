"""pyctrl.controllerutil on the fake client: create-or-update/patch results, owner references,
finalizers."""

from __future__ import annotations

from typing import Any

import pytest

from pyctrl.client.fake import FakeClient
from pyctrl.client.objects import ConfigMap, Namespace, ObjectMeta
from pyctrl.controllerutil import (
    AlreadyOwnedError,
    OperationResult,
    add_finalizer,
    contains_finalizer,
    create_or_patch,
    create_or_update,
    remove_finalizer,
    set_controller_reference,
    set_owner_reference,
)
from pyctrl.testing import recording_writes

from ._util import Widget, widget


def cm(name: str = "cfg", **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace="ns"), data=data or None)


def set_data(key: str, value: str) -> Any:
    def mutate(obj: ConfigMap) -> None:
        obj.data = {**(obj.data or {}), key: value}

    return mutate


async def test_create_or_update_creates_then_updates_then_writes_nothing_when_unchanged() -> None:
    client = FakeClient()
    with recording_writes(client) as writes:
        stored, result = await create_or_update(client, cm(), set_data("a", "1"))
        assert result is OperationResult.CREATED
        assert stored.data == {"a": "1"}
        stored, result = await create_or_update(client, cm(), set_data("a", "2"))
        assert result is OperationResult.UPDATED
        assert stored.data == {"a": "2"}
        before = len(writes)
        stored, result = await create_or_update(client, cm(), set_data("a", "2"))
        assert result is OperationResult.UNCHANGED
        assert len(writes) == before
    assert (await client.get(ConfigMap, "cfg", namespace="ns")).data == {"a": "2"}


async def test_create_or_update_refuses_a_mutation_of_the_name() -> None:
    client = FakeClient(cm())

    def rename(obj: ConfigMap) -> None:
        obj.metadata.name = "other"

    with pytest.raises(ValueError, match="name or namespace"):
        await create_or_update(client, cm(), rename)


def scale(size: int | None = None, phase: str | None = None) -> Any:
    def mutate(w: Widget) -> None:
        if size is not None:
            w.spec.size = size
        if phase is not None:
            w.status = {"phase": phase}

    return mutate


async def test_create_or_patch_reports_each_kind_of_change_and_writes_status_through_the_subresource() -> (
    None
):
    client = FakeClient(status_subresource=[Widget])
    _, result = await create_or_patch(client, widget("ns", "w"), scale(2))
    assert result is OperationResult.CREATED
    with recording_writes(client) as writes:
        _, result = await create_or_patch(client, widget("ns", "w"), scale(2))
        assert result is OperationResult.UNCHANGED
        assert writes == []
        _, result = await create_or_patch(client, widget("ns", "w"), scale(3))
        assert result is OperationResult.UPDATED
        _, result = await create_or_patch(client, widget("ns", "w"), scale(phase="Ready"))
        assert result is OperationResult.UPDATED_STATUS_ONLY
        stored, result = await create_or_patch(client, widget("ns", "w"), scale(4, "Scaling"))
        assert result is OperationResult.UPDATED_STATUS
    assert (stored.spec.size, stored.status) == (4, {"phase": "Scaling"})
    fresh = await client.get(Widget, "w", namespace="ns")
    assert (fresh.spec.size, fresh.status) == (4, {"phase": "Scaling"})


def owner(name: str = "w", namespace: str = "ns") -> Widget:
    w = widget(namespace, name)
    w.metadata.uid = f"uid-{name}"
    return w


def test_set_controller_reference_marks_the_controller_and_blocks_owner_deletion() -> None:
    child = cm()
    set_controller_reference(owner(), child)
    set_controller_reference(owner(), child)  # idempotent
    (ref,) = child.metadata.owner_references or []
    assert (ref.api_version, ref.kind, ref.name, ref.uid) == ("test.pyctrl.dev/v1", "Widget", "w", "uid-w")
    assert (ref.controller, ref.block_owner_deletion) == (True, True)


def test_a_second_controller_raises_already_owned_but_plain_owners_may_be_added() -> None:
    child = cm()
    set_controller_reference(owner("first"), child)
    with pytest.raises(AlreadyOwnedError, match="Widget first"):
        set_controller_reference(owner("second"), child)
    set_owner_reference(owner("second"), child)
    refs = child.metadata.owner_references or []
    assert [(r.name, r.controller) for r in refs] == [("first", True), ("second", None)]


def test_owner_references_work_on_unstructured_objects() -> None:
    child: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns"},
    }
    set_controller_reference(owner(), child)
    assert child["metadata"]["ownerReferences"][0]["controller"] is True


@pytest.mark.parametrize(
    ("child", "message"),
    [
        (ConfigMap(metadata=ObjectMeta(name="c", namespace="elsewhere")), "cross-namespace"),
        (Namespace(metadata=ObjectMeta(name="cluster-scoped")), "cluster-scoped"),
    ],
)
def test_owner_references_across_namespaces_or_scopes_are_refused(child: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        set_controller_reference(owner(), child)


def test_an_owner_without_a_uid_is_refused() -> None:
    with pytest.raises(ValueError, match="uid"):
        set_owner_reference(widget("ns", "unsaved"), cm())


@pytest.mark.parametrize("make", [cm, lambda: {"metadata": {"name": "d"}}], ids=["typed", "dict"])
def test_finalizer_helpers_report_whether_they_changed_anything(make: Any) -> None:
    obj = make()
    assert not contains_finalizer(obj, "pyctrl.dev/cleanup")
    assert add_finalizer(obj, "pyctrl.dev/cleanup") is True
    assert add_finalizer(obj, "pyctrl.dev/cleanup") is False
    assert contains_finalizer(obj, "pyctrl.dev/cleanup")
    assert remove_finalizer(obj, "pyctrl.dev/cleanup") is True
    assert remove_finalizer(obj, "pyctrl.dev/cleanup") is False
    assert not contains_finalizer(obj, "pyctrl.dev/cleanup")
