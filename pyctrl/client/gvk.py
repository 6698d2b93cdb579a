"""Group/version/kind and group/version/resource identifiers.

Mirrors apimachinery ``pkg/runtime/schema`` (``GroupVersionKind``, ``GroupVersionResource``).
Guarantees: both are immutable and hashable; ``GroupVersionKind.from_api_version`` and
``api_version`` round-trip (the core group is the empty string and renders as ``v1``).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["GroupVersionKind", "GroupVersionResource"]


class GroupVersionKind(NamedTuple):
    """A kind's identity: ``GroupVersionKind("apps", "v1", "StatefulSet")``."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` field value: ``v1`` for the core group, ``group/version`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GroupVersionKind:
        """Split an ``apiVersion`` (``apps/v1`` or ``v1``) and pair it with ``kind``."""
        if not api_version or not kind or api_version.count("/") > 1:
            raise ValueError(f"invalid apiVersion/kind: {api_version!r}/{kind!r}")
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


class GroupVersionResource(NamedTuple):
    """A REST resource: ``GroupVersionResource("apps", "v1", "statefulsets")``."""

    group: str
    version: str
    resource: str

    def __str__(self) -> str:
        gv = f"{self.group}/{self.version}" if self.group else self.version
        return f"{gv}, Resource={self.resource}"
