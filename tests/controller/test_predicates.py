"""pyctrl.predicate: each built-in predicate and combinator, on typed objects and dicts."""

from __future__ import annotations

from typing import Any

import pytest

from pyctrl.client.objects import ConfigMap, ObjectMeta
from pyctrl.event import CreateEvent, DeleteEvent, Event, GenericEvent, UpdateEvent
from pyctrl.predicate import (
    Funcs,
    and_,
    annotation_changed,
    as_predicate,
    generation_changed,
    label_changed,
    label_selector,
    not_,
    or_,
    passes,
    resource_version_changed,
)


def cm(generation: int = 1, rv: str = "1", labels: dict[str, str] | None = None, **ann: str) -> ConfigMap:
    meta = ObjectMeta(
        name="a",
        namespace="ns",
        generation=generation,
        resource_version=rv,
        labels=labels,
        annotations=ann or None,
    )
    return ConfigMap(metadata=meta)


def as_dict(obj: ConfigMap) -> dict[str, Any]:
    return obj.model_dump(by_alias=True, exclude_none=True)


ALL_KINDS_OF_EVENT: list[Event] = [
    CreateEvent(cm()),
    DeleteEvent(cm()),
    GenericEvent(cm()),
]


@pytest.mark.parametrize("event", ALL_KINDS_OF_EVENT, ids=lambda e: type(e).__name__)
def test_update_predicates_let_create_delete_and_generic_events_pass(event: Event) -> None:
    for p in (generation_changed, resource_version_changed, label_changed, annotation_changed):
        assert passes(p, event)


def test_generation_changed_drops_status_only_updates_and_passes_spec_changes() -> None:
    assert not passes(generation_changed, UpdateEvent(cm(1, "1"), cm(1, "2")))
    assert passes(generation_changed, UpdateEvent(cm(1, "1"), cm(2, "3")))


def test_generation_changed_reads_unstructured_dicts_too() -> None:
    assert not passes(generation_changed, UpdateEvent(as_dict(cm(1, "1")), as_dict(cm(1, "2"))))
    assert passes(generation_changed, UpdateEvent(as_dict(cm(1, "1")), as_dict(cm(2, "2"))))


def test_resource_version_changed_drops_resyncs() -> None:
    assert not passes(resource_version_changed, UpdateEvent(cm(rv="5"), cm(rv="5")))
    assert passes(resource_version_changed, UpdateEvent(cm(rv="5"), cm(rv="6")))


def test_label_changed_passes_only_label_changes() -> None:
    assert not passes(label_changed, UpdateEvent(cm(labels={"a": "1"}), cm(rv="2", labels={"a": "1"})))
    assert passes(label_changed, UpdateEvent(cm(labels={"a": "1"}), cm(labels={"a": "2"})))
    assert passes(label_changed, UpdateEvent(cm(), cm(labels={"a": "1"})))


def test_annotation_changed_passes_only_annotation_changes() -> None:
    assert not passes(annotation_changed, UpdateEvent(cm(x="1"), cm(rv="2", x="1")))
    assert passes(annotation_changed, UpdateEvent(cm(x="1"), cm(x="2")))


@pytest.mark.parametrize("selector", ["app=redis,tier!=cache", {"app": "redis"}])
def test_label_selector_filters_every_event_type(selector: Any) -> None:
    p = label_selector(selector)
    match, other = cm(labels={"app": "redis"}), cm(labels={"app": "web"})
    for make in (CreateEvent, DeleteEvent, GenericEvent):
        assert passes(p, make(match))
        assert not passes(p, make(other))
    assert passes(p, UpdateEvent(other, match))  # judged on the new object
    assert not passes(p, UpdateEvent(match, other))


def test_plain_functions_are_predicates() -> None:
    p = as_predicate(lambda e: isinstance(e, CreateEvent))
    assert passes(p, CreateEvent(cm()))
    assert not passes(p, DeleteEvent(cm()))


def test_funcs_lets_events_without_a_function_pass() -> None:
    p = Funcs(create_func=lambda e: False)
    assert not passes(p, CreateEvent(cm()))
    assert passes(p, UpdateEvent(cm(), cm()))
    assert passes(p, DeleteEvent(cm()))
    assert passes(p, GenericEvent(cm()))


def test_and_or_not_combine_predicates_and_functions() -> None:
    spec_change = UpdateEvent(cm(1, "1"), cm(2, "2"))
    status_change = UpdateEvent(cm(1, "1"), cm(1, "2"))
    never = lambda e: False  # noqa: E731
    assert passes(and_(generation_changed, resource_version_changed), spec_change)
    assert not passes(and_(generation_changed, resource_version_changed), status_change)
    assert passes(or_(generation_changed, label_changed, resource_version_changed), status_change)
    assert not passes(or_(generation_changed, never), status_change)
    assert passes(not_(generation_changed), status_change)
    assert not passes(not_(generation_changed), spec_change)


def test_a_non_predicate_is_rejected_with_a_clear_error() -> None:
    with pytest.raises(TypeError, match="not a predicate"):
        as_predicate(42)  # type: ignore[arg-type]
