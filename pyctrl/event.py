"""Events delivered by sources to predicates and handlers (controller-runtime ``pkg/event``).

``CreateEvent.is_in_initial_list`` is True for objects of an informer's initial list (not for
objects created later), so handlers can enqueue them at low priority. A ``DeleteEvent`` whose
``delete_state_unknown`` is True carries the last known state of an object whose deletion was
missed while the watch was down (client-go's ``DeletedFinalStateUnknown``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ["CreateEvent", "DeleteEvent", "Event", "GenericEvent", "UpdateEvent"]


@dataclass(frozen=True, slots=True)
class _ObjectEvent:
    """An event about one object (all but ``UpdateEvent``, which carries the old and the new)."""

    object: Any


@dataclass(frozen=True, slots=True)
class CreateEvent(_ObjectEvent):
    """The object appeared: created, or listed when the informer (re)started."""

    is_in_initial_list: bool = False


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    """The object changed from ``object_old`` to ``object_new`` (a resync delivers equal ones)."""

    object_old: Any
    object_new: Any


@dataclass(frozen=True, slots=True)
class DeleteEvent(_ObjectEvent):
    """The object was deleted (its last known state; see ``delete_state_unknown``)."""

    delete_state_unknown: bool = False


@dataclass(frozen=True, slots=True)
class GenericEvent(_ObjectEvent):
    """An event from outside the cluster (a ``Channel`` source), naming an object to reconcile."""


Event: TypeAlias = CreateEvent | UpdateEvent | DeleteEvent | GenericEvent


def event_type(event: Event) -> str:
    """ "create", "update", "delete" or "generic"."""
    return type(event).__name__.removesuffix("Event").lower()


def event_object(event: Event) -> Any:
    """The object an event is about (the new object for updates)."""
    return event.object_new if isinstance(event, UpdateEvent) else event.object
