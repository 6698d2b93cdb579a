"""Declarative controller set-up (controller-runtime ``pkg/builder``).

::

    ControllerBuilder(mgr)
        .for_(RedisCluster, predicates=[generation_changed])
        .owns(StatefulSet)
        .watches(Channel(events, enqueue_request_for_object()))
        .with_event_filter(lambda e: True)
        .with_options(max_concurrent_reconciles=4)
        .named("rediscluster")
        .complete(reconciler)

- ``for_(kind)``: reconcile objects of ``kind`` (each event enqueues the object itself);
- ``owns(kind)``: events of ``kind`` objects enqueue their controller owner of the ``for_`` kind;
- ``watches(kind_or_source, handler)``: any other kind with its handler, or a ready-made source;
- ``with_event_filter(p)``: a predicate applied to every kind watched by this builder (not to
  ready-made sources, which carry their own predicates);
- ``only_metadata=True`` on ``for_``/``owns``/``watches`` (controller-runtime
  ``builder.OnlyMetadata``): that kind is watched and cached as ``PartialObjectMetadata`` (its
  metadata only; see :mod:`pyctrl.cache`), and its events carry ``PartialObjectMetadata`` objects;
  the reconciler reads it with ``client.get(PartialObjectMetadata.of(kind), ...)``;
- on a manager with ``sharding`` (:mod:`pyctrl.sharding`), the ``for_`` kind is sharded: its
  events pass only for objects this member desires or holds, the reconciler runs behind the
  shard fence, and the member's own sources (membership re-enqueue, release notices) are added;
  ``with_options(sharded=False)`` opts a controller out (every member then reconciles everything);
- options keep the builder's chain flat (keyword options instead of method variants).

Misuse is reported by ``complete`` with ``BuilderError``: no ``for_`` and no name, ``for_`` given
twice, ``owns`` without ``for_``, a duplicate controller name, a reconciler without
``async def reconcile(self, request) -> Result``.

Webhooks (controller-runtime ``WebhookManagedBy``)::

    WebhookBuilder(mgr).for_(RedisCluster).with_defaulter(d).with_validator(v).complete()

registers ``/mutate-<group>-<version>-<kind>`` and/or ``/validate-<group>-<version>-<kind>`` on
``mgr.webhook_server`` (see ``mutate_path`` / ``validate_path``), and ``/convert`` when the
manager's scheme holds several versions of the kind (exactly one a ``pyctrl.conversion.Hub``, the
others convertible); ``complete`` reports a missing ``for_``, nothing to serve, or versions that
cannot be converted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from pyctrl.client.objects import PartialObjectMetadata
from pyctrl.client.restmapper import StaticRESTMapper
from pyctrl.client.scheme import Kind as KindType
from pyctrl.client.scheme import kind_gvk
from pyctrl.controller import Controller, ControllerError
from pyctrl.controller.controller import validate_reconciler
from pyctrl.handler import EventHandler, enqueue_request_for_object, enqueue_request_for_owner
from pyctrl.manager import ManagerProtocol, WebhookHost
from pyctrl.predicate import PredicateLike
from pyctrl.source import Kind, Source
from pyctrl.workqueue import Clock, RateLimiter

if TYPE_CHECKING:  # at run time imported by WebhookBuilder: controllers alone never load them
    from pyctrl.webhook import CustomDefaulter, CustomValidator

__all__ = [
    "CONVERT_PATH",
    "BuilderError",
    "ControllerBuilder",
    "WebhookBuilder",
    "mutate_path",
    "validate_path",
    "webhook_configurations",
]


class BuilderError(ControllerError):
    """The builder was used wrongly."""


@dataclass
class _Watch:
    kind_or_source: KindType | Source
    handler: EventHandler | None
    predicates: Sequence[PredicateLike]
    owner: bool = False
    only_controller: bool = True


class ControllerBuilder:
    def __init__(self, mgr: ManagerProtocol) -> None:
        self._mgr = mgr
        self._for: _Watch | None = None
        self._for_kind: KindType | None = None
        self._watches: list[_Watch] = []
        self._filters: list[PredicateLike] = []
        self._options: dict[str, Any] = {}
        self._name: str | None = None
        self._errors: list[str] = []
        self._sharded = True

    def for_(
        self, kind: KindType, *, predicates: Sequence[PredicateLike] = (), only_metadata: bool = False
    ) -> Self:
        if self._for is not None:
            self._errors.append("for_() may only be called once")
        self._for, self._for_kind = _Watch(_represented(kind, only_metadata), None, predicates), kind
        return self

    def owns(
        self,
        kind: KindType,
        *,
        predicates: Sequence[PredicateLike] = (),
        only_controller: bool = True,
        only_metadata: bool = False,
    ) -> Self:
        target = _represented(kind, only_metadata)
        self._watches.append(_Watch(target, None, predicates, owner=True, only_controller=only_controller))
        return self

    def watches(
        self,
        kind_or_source: KindType | Source,
        handler: EventHandler | None = None,
        *,
        predicates: Sequence[PredicateLike] = (),
        only_metadata: bool = False,
    ) -> Self:
        if isinstance(kind_or_source, Source):
            if only_metadata:
                self._errors.append(
                    f"watches({kind_or_source!r}, only_metadata=True): give a kind, not a source"
                )
            self._watches.append(_Watch(kind_or_source, handler, predicates))
        else:
            self._watches.append(_Watch(_represented(kind_or_source, only_metadata), handler, predicates))
        return self

    def with_event_filter(self, predicate: PredicateLike) -> Self:
        self._filters.append(predicate)
        return self

    def with_options(
        self,
        *,
        max_concurrent_reconciles: int | None = None,
        rate_limiter: RateLimiter[Any] | None = None,
        reconciliation_timeout: float | None = None,
        cache_sync_timeout: float | None = None,
        clock: Clock | None = None,
        sharded: bool | None = None,
    ) -> Self:
        if sharded is not None:
            self._sharded = sharded
        given = {
            "max_concurrent_reconciles": max_concurrent_reconciles,
            "rate_limiter": rate_limiter,
            "reconciliation_timeout": reconciliation_timeout,
            "cache_sync_timeout": cache_sync_timeout,
            "clock": clock,
        }
        self._options.update({k: v for k, v in given.items() if v is not None})
        return self

    def named(self, name: str) -> Self:
        self._name = name
        return self

    def complete(self, reconciler: object) -> Controller:
        """Validate, build the controller with its sources, and add it to the manager."""
        if self._errors:
            raise BuilderError("; ".join(self._errors))
        name = self._controller_name()
        if self._for_kind is None and any(w.owner for w in self._watches):
            raise BuilderError("owns() needs for_(kind): owned objects enqueue their owner of that kind")
        coordinator = getattr(self._mgr, "shard_coordinator", None) if self._sharded else None
        extra: list[Source] = []
        if coordinator is not None and self._for is not None:
            try:
                gate = coordinator.shard(
                    name, self._for.kind_or_source, validate_reconciler(name, reconciler)
                )
            except ValueError as exc:
                raise BuilderError(str(exc)) from exc
            extra = gate.sources([*self._for.predicates, *self._filters])
            self._for.predicates = [*self._for.predicates, gate.predicate()]
            reconciler = gate
        controller = Controller(name, reconciler, **self._options)
        sources = [self._source(watch) for watch in ([self._for] if self._for else []) + self._watches]
        sources += extra
        try:
            self._mgr.register_controller_name(name)
        except Exception as exc:  # ManagerError: the name is taken
            raise BuilderError(str(exc)) from exc
        for source in sources:
            controller.watch(source)
        self._mgr.add(controller)
        return controller

    def _controller_name(self) -> str:
        if self._name:
            return self._name
        if self._for_kind is None:
            raise BuilderError("call for_(kind) or named(name) before complete()")
        return kind_gvk(self._for_kind).kind.lower()

    def _source(self, watch: _Watch) -> Source:
        predicates = [*watch.predicates, *self._filters]
        target = watch.kind_or_source
        if isinstance(target, Source):
            if watch.handler is not None or watch.predicates:
                raise BuilderError(
                    f"watches({target!r}): give a ready-made source its handler and predicates"
                )
            return target
        if watch.owner:
            assert self._for_kind is not None
            handler: EventHandler = enqueue_request_for_owner(
                self._for_kind, only_controller=watch.only_controller
            )
        elif watch is self._for:
            handler = enqueue_request_for_object()
        elif watch.handler is None:
            raise BuilderError(f"watches({kind_gvk(target).kind}) needs an event handler")
        else:
            handler = watch.handler
        return Kind(self._mgr.cache, target, handler, predicates)


def _represented(kind: KindType, only_metadata: bool) -> KindType:
    """``kind``, or its metadata-only form (``PartialObjectMetadata.of(kind)``)."""
    return PartialObjectMetadata.of(kind) if only_metadata else kind


#: controller-runtime's conversion webhook path.
CONVERT_PATH = "/convert"


def _webhook_path(prefix: str, kind: KindType) -> str:
    gvk = kind_gvk(kind)  # the core group "" gives "/mutate--v1-pod", as in controller-runtime
    return f"/{prefix}-{gvk.group.replace('.', '-')}-{gvk.version}-{gvk.kind.lower()}"


def mutate_path(kind: KindType) -> str:
    """The defaulting webhook's path for ``kind`` (controller-runtime's ``generateMutatePath``)."""
    return _webhook_path("mutate", kind)


def validate_path(kind: KindType) -> str:
    """The validating webhook's path for ``kind`` (controller-runtime's ``generateValidatePath``)."""
    return _webhook_path("validate", kind)


class WebhookBuilder:
    """Defaulting, validating and conversion webhooks for one kind on the manager's webhook server."""

    def __init__(self, mgr: WebhookHost) -> None:
        self._mgr = mgr
        self._kind: KindType | None = None
        self._defaulter: CustomDefaulter | None = None
        self._validator: CustomValidator | None = None

    def for_(self, kind: KindType) -> Self:
        self._kind = kind
        return self

    def with_defaulter(self, defaulter: CustomDefaulter) -> Self:
        self._defaulter = defaulter
        return self

    def with_validator(self, validator: CustomValidator) -> Self:
        self._validator = validator
        return self

    def _convertible(self, kind: KindType) -> bool:
        """Several versions of the kind in the scheme: conversion is served (and must be sound)."""
        from pyctrl.conversion import ConversionError, versions_of

        gvk = kind_gvk(kind)
        scheme = self._mgr.scheme
        if sum((g.group, g.kind) == (gvk.group, gvk.kind) for g in scheme.known_kinds()) < 2:
            return False
        try:
            versions_of(scheme, kind)
        except ConversionError as exc:
            raise BuilderError(str(exc)) from exc
        return True

    def configurations(self, **options: Any) -> list[dict[str, Any]]:
        """:func:`webhook_configurations` for what this builder serves."""
        if self._kind is None:
            raise BuilderError("WebhookBuilder needs for_(kind)")
        return webhook_configurations(
            self._kind,
            defaulting=self._defaulter is not None,
            validating=self._validator is not None,
            **options,
        )

    def complete(self) -> list[str]:
        """Register the handlers; returns the paths served."""
        from pyctrl.webhook import ConversionHandler, with_custom_defaulter, with_custom_validator

        if self._kind is None:
            raise BuilderError("WebhookBuilder needs for_(kind)")
        convertible = self._convertible(self._kind)
        if self._defaulter is None and self._validator is None and not convertible:
            raise BuilderError(
                "WebhookBuilder needs with_defaulter() and/or with_validator(), or a kind with "
                "several versions (one a conversion Hub) in the manager's scheme"
            )
        server = self._mgr.webhook_server
        paths = []
        if convertible:
            paths.append(CONVERT_PATH)
            if CONVERT_PATH not in server.paths:  # one handler serves every kind of the scheme
                server.register(CONVERT_PATH, ConversionHandler(self._mgr.scheme))
        if self._defaulter is not None:
            paths.append(mutate_path(self._kind))
            server.register(paths[-1], with_custom_defaulter(self._kind, self._defaulter))
        if self._validator is not None:
            paths.append(validate_path(self._kind))
            server.register(paths[-1], with_custom_validator(self._kind, self._validator))
        return paths


def webhook_configurations(
    kind: KindType,
    *,
    defaulting: bool,
    validating: bool,
    service: tuple[str, str] = ("webhook-service", "system"),
    failure_policy: str = "Fail",
    namespace_selector: dict[str, Any] | None = None,
    timeout_seconds: int = 10,
) -> list[dict[str, Any]]:
    """The Mutating/ValidatingWebhookConfigurations calling ``service`` = (name, namespace) at
    the paths ``WebhookBuilder`` serves for ``kind`` — controller-gen's webhook manifests, made
    from code instead of markers. Names follow kubebuilder (``m<kind>.<group>`` /
    ``v<kind>.<group>``); defaulting covers CREATE and UPDATE, validation also DELETE; the
    resource is the CRD model's plural (``crd = CRDMeta(...)``) or a built-in's."""
    gvk = kind_gvk(kind)
    meta = getattr(kind, "crd", None)
    plural = getattr(meta, "plural", "") or StaticRESTMapper().mapping_sync(gvk).resource.resource
    served = [
        ("MutatingWebhookConfiguration", "m", mutate_path(kind), ["CREATE", "UPDATE"], defaulting),
        (
            "ValidatingWebhookConfiguration",
            "v",
            validate_path(kind),
            ["CREATE", "UPDATE", "DELETE"],
            validating,
        ),
    ]
    configs = []
    for config_kind, prefix, path, operations, wanted in served:
        if not wanted:
            continue
        name = f"{prefix}{gvk.kind.lower()}.{gvk.group or 'core'}"
        webhook: dict[str, Any] = {
            "name": name,
            "clientConfig": {"service": {"name": service[0], "namespace": service[1], "path": path}},
            "rules": [
                {
                    "apiGroups": [gvk.group],
                    "apiVersions": [gvk.version],
                    "operations": operations,
                    "resources": [plural],
                }
            ],
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": failure_policy,
            "timeoutSeconds": timeout_seconds,
        }
        if namespace_selector is not None:
            webhook["namespaceSelector"] = namespace_selector
        configs.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": config_kind,
                "metadata": {"name": name},
                "webhooks": [webhook],
            }
        )
    return configs
