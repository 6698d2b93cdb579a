"""Event filters (controller-runtime ``pkg/predicate``).

A predicate decides whether an event reaches the handler. It is either an object with
``create``/``update``/``delete``/``generic`` methods (``Predicate``) or a plain function taking an
event and returning a bool; ``as_predicate`` turns the latter into the former.

Built in (same semantics as controller-runtime):

- ``generation_changed``: updates pass only when ``metadata.generation`` changed (status-only
  writes, which leave the generation alone, are filtered out); other events pass;
- ``resource_version_changed``: updates pass only when ``resourceVersion`` changed (drops resyncs);
- ``label_changed`` / ``annotation_changed``: updates pass when labels / annotations changed;
- ``label_selector(selector)``: every event passes only if the object's labels match;
- ``and_``, ``or_``, ``not_``: combinators.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

from pyctrl import _access
from pyctrl.client.selectors import Selector
from pyctrl.event import CreateEvent, DeleteEvent, Event, GenericEvent, UpdateEvent, event_object

__all__ = [
    "Funcs",
    "Predicate",
    "PredicateLike",
    "and_",
    "annotation_changed",
    "as_predicate",
    "generation_changed",
    "label_changed",
    "label_selector",
    "not_",
    "or_",
    "resource_version_changed",
]


@runtime_checkable
class Predicate(Protocol):
    def create(self, event: CreateEvent) -> bool: ...
    def update(self, event: UpdateEvent) -> bool: ...
    def delete(self, event: DeleteEvent) -> bool: ...
    def generic(self, event: GenericEvent) -> bool: ...


PredicateLike: TypeAlias = Predicate | Callable[[Event], bool]


@dataclass(frozen=True)
class Funcs:
    """A predicate from optional per-event functions; a missing one lets the event pass."""

    create_func: Callable[[CreateEvent], bool] | None = None
    update_func: Callable[[UpdateEvent], bool] | None = None
    delete_func: Callable[[DeleteEvent], bool] | None = None
    generic_func: Callable[[GenericEvent], bool] | None = None

    def create(self, event: CreateEvent) -> bool:
        return self.create_func is None or self.create_func(event)

    def update(self, event: UpdateEvent) -> bool:
        return self.update_func is None or self.update_func(event)

    def delete(self, event: DeleteEvent) -> bool:
        return self.delete_func is None or self.delete_func(event)

    def generic(self, event: GenericEvent) -> bool:
        return self.generic_func is None or self.generic_func(event)


@dataclass(frozen=True)
class _FromFunction:
    fn: Callable[[Event], bool]

    def create(self, event: CreateEvent) -> bool:
        return self.fn(event)

    def update(self, event: UpdateEvent) -> bool:
        return self.fn(event)

    def delete(self, event: DeleteEvent) -> bool:
        return self.fn(event)

    def generic(self, event: GenericEvent) -> bool:
        return self.fn(event)


def as_predicate(p: PredicateLike) -> Predicate:
    """A ``Predicate`` from a predicate or a plain ``fn(event) -> bool``."""
    if isinstance(p, Predicate):
        return p
    if callable(p):
        return _FromFunction(p)
    raise TypeError(f"not a predicate: {p!r} (pass a Predicate or a function of an event)")


def passes(p: Predicate, event: Event) -> bool:
    """Dispatch ``event`` to the predicate method for its type."""
    match event:
        case CreateEvent():
            return p.create(event)
        case UpdateEvent():
            return p.update(event)
        case DeleteEvent():
            return p.delete(event)
        case GenericEvent():
            return p.generic(event)
    raise TypeError(f"not an event: {event!r}")


def _on_update(changed: Callable[[UpdateEvent], bool]) -> Funcs:
    return Funcs(update_func=changed)


#: Updates pass only when ``metadata.generation`` changed.
generation_changed = _on_update(
    lambda e: _access.generation(e.object_old) != _access.generation(e.object_new)
)
#: Updates pass only when ``metadata.resourceVersion`` changed.
resource_version_changed = _on_update(
    lambda e: _access.resource_version(e.object_old) != _access.resource_version(e.object_new)
)
#: Updates pass only when labels changed.
label_changed = _on_update(lambda e: _access.labels(e.object_old) != _access.labels(e.object_new))
#: Updates pass only when annotations changed.
annotation_changed = _on_update(
    lambda e: _access.annotations(e.object_old) != _access.annotations(e.object_new)
)


def label_selector(selector: str | Mapping[str, str] | Selector) -> Predicate:
    """Every event passes only when the object's labels match ``selector``."""
    sel = (
        selector
        if isinstance(selector, Selector)
        else Selector.parse(selector)
        if isinstance(selector, str)
        else Selector.from_labels(selector)
    )
    return _FromFunction(lambda e: sel.matches(_access.labels(event_object(e))))


def and_(*predicates: PredicateLike) -> Predicate:
    ps = [as_predicate(p) for p in predicates]
    return _FromFunction(lambda e: all(passes(p, e) for p in ps))


def or_(*predicates: PredicateLike) -> Predicate:
    ps = [as_predicate(p) for p in predicates]
    return _FromFunction(lambda e: any(passes(p, e) for p in ps))


def not_(predicate: PredicateLike) -> Predicate:
    p = as_predicate(predicate)
    return _FromFunction(lambda e: not passes(p, e))
