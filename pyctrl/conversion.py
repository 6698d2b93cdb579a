"""Conversion between the versions of a kind (controller-runtime ``pkg/conversion``).

A kind served in several versions names one version the *hub* (usually the storage version; it
subclasses :class:`Hub`) and makes every other version :class:`Convertible` to and from it.
The conversion webhook (``pyctrl.webhook.conversion``) then turns any version into any other
through the hub: ``spoke → hub → spoke``.

Contract of a converter:
- ``convert_to(self) -> hub`` returns a new hub object holding what ``self`` holds;
  ``convert_from(cls, hub) -> Self`` (a classmethod) the reverse;
- they convert ``spec`` and ``status``; ``metadata`` is carried over by the webhook as it came
  (the apiserver refuses conversions that change anything in metadata but labels and
  annotations), so converters need not copy it;
- a field one version cannot represent belongs in an annotation, so that a round trip
  ``spoke → hub → spoke`` loses nothing (the apiserver stores only the storage version).
"""

from __future__ import annotations

from typing import Any, Protocol, Self, runtime_checkable

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import KubeObject
from pyctrl.client.scheme import Scheme, kind_gvk

__all__ = ["ConversionError", "Convertible", "Hub", "versions_of"]


class ConversionError(ValueError):
    """The versions of a kind cannot be converted (no hub, two hubs, a version not convertible)."""


class Hub:
    """Marker mixin of the hub version (controller-runtime ``conversion.Hub``)."""


@runtime_checkable
class Convertible(Protocol):
    """A non-hub version (controller-runtime ``conversion.Convertible``)."""

    def convert_to(self) -> Any: ...

    @classmethod
    def convert_from(cls, hub: Any) -> Self: ...


def versions_of(scheme: Scheme, kind: type[KubeObject] | GroupVersionKind) -> dict[str, type[KubeObject]]:
    """version → class of every registered version of ``kind``'s group and kind; checks that
    exactly one is the hub and every other one is convertible (controller-runtime
    ``IsConvertible``), else :class:`ConversionError` naming the problem."""
    gvk = kind_gvk(kind)
    found = {
        g.version: cls
        for g in scheme.known_kinds()
        if (g.group, g.kind) == (gvk.group, gvk.kind) and (cls := scheme.type_for(g)) is not None
    }
    if len(found) < 2:
        raise ConversionError(
            f"{gvk.kind}.{gvk.group}: register at least two versions in the scheme to convert "
            f"(found {sorted(found) or 'none'})"
        )
    hubs = sorted(v for v, cls in found.items() if issubclass(cls, Hub))
    if len(hubs) != 1:
        raise ConversionError(
            f"{gvk.kind}.{gvk.group}: exactly one version must be a Hub, got {hubs or 'none'}"
        )
    spokes = [v for v, cls in found.items() if v != hubs[0] and not _is_convertible(cls)]
    if spokes:
        raise ConversionError(
            f"{gvk.kind}.{gvk.group}: version(s) {sorted(spokes)} need convert_to() and the classmethod "
            "convert_from(hub)"
        )
    return found


def _is_convertible(cls: type[KubeObject]) -> bool:
    return callable(getattr(cls, "convert_to", None)) and callable(getattr(cls, "convert_from", None))
