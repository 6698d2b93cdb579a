"""Object metadata and the base class of every typed object.

Mirrors apimachinery ``pkg/apis/meta/v1`` (``ObjectMeta``, ``OwnerReference``, ``LabelSelector``,
``Condition``) and controller-runtime's ``client.Object``.

Design choice (typed built-ins): light pydantic v2 models rather than kubernetes-asyncio's
generated models. The generated models deserialise in Python (about 10x slower than pydantic-core's
``model_validate_json``) and drop fields they do not know. These models:

- are lossless: every model has ``extra="allow"``, so a field pyctrl does not declare (a newer
  Kubernetes field, a field of an exotic volume source) survives read → modify → update;
- use snake_case attributes with the camelCase wire names as aliases (``metadata.resource_version``
  ↔ ``resourceVersion``), accept either spelling on construction, and always serialise camelCase;
- serialise without ``None`` values (``exclude_none``), so an unset optional field is omitted
  rather than sent as ``null``;
- keep timestamps as the RFC 3339 strings the apiserver sent (exact round-trip, no parsing cost).

A user CRD subclasses :class:`KubeObject`, sets ``gvk`` and declares ``spec``/``status``::

    class RedisCluster(KubeObject):
        gvk = GroupVersionKind("redis.pyctrl.io", "v1", "RedisCluster")
        spec: RedisClusterSpec
        status: RedisClusterStatus | None = None

``apiVersion`` and ``kind`` are filled from ``gvk`` when omitted (they are the fields' defaults).
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from pyctrl.client.gvk import GroupVersionKind

__all__ = [
    "Condition",
    "KubeModel",
    "KubeObject",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "PartialObjectMetadata",
    "is_metadata_only",
]


# Values a deep copy shares instead of copying (immutable; exact types, not subclasses).
_IMMUTABLE = frozenset({str, int, float, bool, type(None), bytes})


def _deep_copy(value: Any) -> Any:
    """A deep copy of a field's value that is not immutable: JSON-shaped data is copied without
    ``copy.deepcopy``'s per-value memo and dispatch; anything else falls back to it."""
    cls = type(value)
    if cls is dict:
        return {k: v if type(v) in _IMMUTABLE else _deep_copy(v) for k, v in value.items()}
    if cls is list:
        return [v if type(v) in _IMMUTABLE else _deep_copy(v) for v in value]
    if isinstance(value, KubeModel):
        return value.__deepcopy__()
    return copy.deepcopy(value)


class KubeModel(BaseModel):
    """Base of every typed (sub-)structure: camelCase aliases, unknown fields kept."""

    model_config = ConfigDict(
        extra="allow",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        # validators and serializers are built on a model's first use, not when its class is
        # defined: a program uses a few of the built-in kinds (measured: the pyctrl peer's import
        # 0.805 -> 0.758 CPU s, 54.4 -> 52.6 MiB, 9 interleaved runs)
        defer_build=True,
    )

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        """``copy.deepcopy`` / ``model_copy(deep=True)``: what pydantic's does (fields, extra
        fields, the set of fields set, private attributes), with the JSON-shaped field values copied
        by a walk that shares immutable values and skips ``copy.deepcopy``'s per-value memo and
        dispatch (the copy a reconcile takes for ``MergeFrom(original)``). A sub-object shared by
        two fields is copied twice rather than once: typed objects decoded from JSON share none.
        """
        if getattr(self, "__pydantic_private__", None) is not None:
            return super().__deepcopy__(memo)
        cls = type(self)
        new = cls.__new__(cls)
        immutable = _IMMUTABLE
        fields = {k: v if type(v) in immutable else _deep_copy(v) for k, v in self.__dict__.items()}
        extra = self.__pydantic_extra__
        setattr_ = object.__setattr__
        setattr_(new, "__dict__", fields)
        setattr_(new, "__pydantic_extra__", None if extra is None else _deep_copy(extra))
        setattr_(new, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        setattr_(new, "__pydantic_private__", None)
        return new


class OwnerReference(KubeModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[dict[str, Any]] | None = None


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(KubeModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class ObjectReference(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class Condition(KubeModel):
    """``metav1.Condition``, and the base of the built-in kinds' own condition types (``PodCondition``,
    ``JobCondition``), which share its fields (``observed_generation`` stays unset on those)."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None


class KubeObject(KubeModel):
    """A typed top-level object (controller-runtime ``client.Object``). Subclasses set ``gvk``."""

    gvk: ClassVar[GroupVersionKind]

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        # apiVersion and kind default to the class's gvk: field defaults, not a "before" model
        # validator, which would make pydantic-core build a dict of every JSON document before
        # validating it (measured: a ConfigMap's model_validate_json 36-47 µs with one, 22-26
        # without, under load; every cache read, event and response decodes so)
        super().__pydantic_init_subclass__(**kwargs)
        gvk = cls.__dict__.get("gvk")
        if isinstance(gvk, GroupVersionKind):
            fields = cls.__pydantic_fields__
            for name, value in (("api_version", gvk.api_version), ("kind", gvk.kind)):
                field = copy.copy(fields[name])  # the parent's FieldInfo stays as it is
                field.default = value
                fields[name] = field
            if cls.__pydantic_complete__:  # built already: build again with the defaults
                cls.model_rebuild(force=True)

    @property
    def name(self) -> str:
        """``metadata.name`` (empty string when unset)."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` (empty string for cluster-scoped or unset)."""
        return self.metadata.namespace or ""


class PartialObjectMetadata(KubeObject):
    """``metav1.PartialObjectMetadata``: only the TypeMeta and ObjectMeta of an object of some kind.

    Name the metadata-only form of a kind with :meth:`of` wherever a kind is taken (reads, watches,
    the cache, ``owns``/``watches(..., only_metadata=True)`` build it for you)::

        secrets = await client.list(PartialObjectMetadata.of(Secret), namespace="ns")
        secrets.items[0].kind           # "Secret": TypeMeta is the kind's, as controller-runtime sets it
        secrets.items[0].metadata.labels

    The apiserver sends such objects when asked for the ``PartialObjectMetadata(List)``
    representation (``Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1``),
    so a list of 4 KiB Secrets transfers and caches only their metadata.

    Reads only (get, list, watch, the cache, event handlers). Unlike controller-runtime's
    metadata client, writes are not metadata-only: a write of such an object (a label patch)
    reaches the kind's resource and its answer, the full object, is what it is decoded from.
    """

    #: The ``apiVersion`` and ``kind`` the apiserver gives the metadata-only representation.
    API_VERSION: ClassVar[str] = "meta.k8s.io/v1"
    _of: ClassVar[dict[GroupVersionKind, type[PartialObjectMetadata]]] = {}

    @classmethod
    def of(cls, kind: type[KubeObject] | GroupVersionKind) -> type[PartialObjectMetadata]:
        """The metadata-only kind of ``kind`` (one class per GVK; ``of`` of one is itself)."""
        if isinstance(kind, type) and issubclass(kind, PartialObjectMetadata) and "gvk" in kind.__dict__:
            return kind
        if isinstance(kind, GroupVersionKind):
            gvk = kind
        elif (
            isinstance(kind, type)
            and issubclass(kind, KubeObject)
            and isinstance(getattr(kind, "gvk", None), GroupVersionKind)
        ):
            gvk = kind.gvk
        else:
            raise TypeError(f"PartialObjectMetadata.of({kind!r}): pass a typed kind or a GroupVersionKind")
        found = PartialObjectMetadata._of.get(gvk)
        if found is None:
            name = f"PartialObjectMetadata[{gvk.kind}]"
            found = type(
                name, (PartialObjectMetadata,), {"gvk": gvk, "__qualname__": name, "__module__": __name__}
            )
            PartialObjectMetadata._of[gvk] = found
        return found

    @model_validator(mode="before")
    @classmethod
    def _kind_type_meta(cls, data: Any) -> Any:
        # The apiserver answers with apiVersion meta.k8s.io/v1, kind PartialObjectMetadata; the
        # object stands for one of its kind, so it gets that kind's TypeMeta (controller-runtime's
        # metadata informers and client set the GVK the same way).
        gvk = cls.__dict__.get("gvk")
        if isinstance(data, dict) and isinstance(gvk, GroupVersionKind):
            data = {**data, "apiVersion": gvk.api_version, "kind": gvk.kind}
            data.pop("api_version", None)
        return data


def is_metadata_only(kind: object) -> TypeGuard[type[PartialObjectMetadata]]:
    """Whether ``kind`` is a metadata-only kind (``PartialObjectMetadata.of(...)``)."""
    return isinstance(kind, type) and issubclass(kind, PartialObjectMetadata)
