"""The options of every client verb, parsed once from its keywords.

Mirrors controller-runtime ``pkg/client/options.go``: ``GetOptions``, ``ListOptions``,
``CreateOptions``, ``UpdateOptions``, ``PatchOptions``, ``DeleteOptions``, ``DeleteAllOfOptions``
(and ``metav1.Preconditions``). The public call style stays keyword-based —
``client.list(Pod, namespace="ns", labels={"app": "redis"})`` — and the keywords each verb takes
are spelled once, as the ``*Kwargs`` ``TypedDict`` s below (``**options: Unpack[ListKwargs]`` in
the signatures). :class:`~pyctrl.client.interfaces.ReaderBase` and
:class:`~pyctrl.client.interfaces.WriterBase` build the option object from them, so every
implementation (apiserver, cache, split, fake) receives checked, immutable options::

    opts = ListOptions.build(namespace="ns", labels={"app": "redis"}, limit=50)
    opts.query()   # {"labelSelector": "app=redis", "fieldSelector": None, "limit": 50, ...}

Guarantees: a bad value (a negative ``limit``, an unknown propagation policy, ``force`` on a
patch that is not server-side apply, an apply without a field manager) raises ``ValueError`` when
the options are built, before anything is sent; ``kwargs()`` turns options back into the
keywords of the public verb (for a reader or writer known only by its Protocol).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypedDict, Unpack, cast

from pyctrl.client.patch import Patch, PatchType
from pyctrl.client.selectors import FieldSelector, Selector

__all__ = [
    "CreateOptions",
    "DeleteAllOfKwargs",
    "DeleteAllOfOptions",
    "DeleteKwargs",
    "DeleteOptions",
    "GetOptions",
    "ListKwargs",
    "ListOptions",
    "PatchKwargs",
    "PatchOptions",
    "Preconditions",
    "PropagationPolicy",
    "SelectorKwargs",
    "UpdateOptions",
    "WriteKwargs",
]

PropagationPolicy = Literal["Foreground", "Background", "Orphan"]
_POLICIES = ("Foreground", "Background", "Orphan")


def _as_kwargs(opts: Any, *leave_out: str) -> dict[str, Any]:
    """The fields of an option dataclass, named as the verb's keywords are."""
    return {f.name: getattr(opts, f.name) for f in fields(opts) if f.name not in leave_out}


class SelectorKwargs(TypedDict, total=False):
    """Which objects: ``labels`` (equality) and ``label_selector`` combine, as do the fields."""

    namespace: str | None
    labels: Mapping[str, str] | None
    label_selector: str | Selector | None
    fields: Mapping[str, str] | None
    field_selector: str | FieldSelector | None


class ListKwargs(SelectorKwargs, total=False):
    """The keywords of ``list`` (and ``watch``): the selection plus paging."""

    limit: int | None
    continue_: str | None


class WriteKwargs(TypedDict, total=False):
    """The keywords of ``create`` and ``update``."""

    dry_run: bool
    field_manager: str | None


class PatchKwargs(WriteKwargs, total=False):
    """The keywords of ``patch``: ``force`` only for server-side apply patches."""

    force: bool | None


class DeleteKwargs(TypedDict, total=False):
    """The keywords of ``delete``."""

    propagation_policy: PropagationPolicy | None
    preconditions: Preconditions | None
    grace_period_seconds: int | None
    dry_run: bool


class DeleteAllOfKwargs(SelectorKwargs, DeleteKwargs, total=False):
    """The keywords of ``delete_all_of``: a selection and the options of each deletion."""


@dataclass(frozen=True, slots=True)
class Preconditions:
    """Delete only if the object still has this uid / resourceVersion (else ``Conflict``)."""

    uid: str | None = None
    resource_version: str | None = None


@dataclass(frozen=True, slots=True)
class GetOptions:
    """controller-runtime ``GetOptions``; the namespace of the object key travels with it."""

    namespace: str | None = None


@dataclass(frozen=True)
class ListOptions:
    """controller-runtime ``ListOptions``: normalised list/watch filters."""

    namespace: str | None = None
    label_selector: Selector = field(default_factory=Selector)
    field_selector: FieldSelector = field(default_factory=FieldSelector)
    limit: int | None = None
    continue_: str | None = None

    @classmethod
    def build(
        cls,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        label_selector: str | Selector | None = None,
        fields: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ListOptions:
        """Combine ``labels`` (equality) with ``label_selector``, ``fields`` with ``field_selector``."""
        sel = Selector.parse(label_selector) if isinstance(label_selector, str) else label_selector
        reqs = (*(sel.requirements if sel else ()), *Selector.from_labels(labels or {}).requirements)
        fsel = FieldSelector.parse(field_selector) if isinstance(field_selector, str) else field_selector
        clauses = (*(fsel.clauses if fsel else ()), *FieldSelector.from_fields(fields or {}).clauses)
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        return cls(
            namespace or None, Selector(reqs), FieldSelector(clauses), limit or None, continue_ or None
        )

    def page(self, limit: int | None, continue_: str | None) -> ListOptions:
        """The same selection, one page of it."""
        return ListOptions(self.namespace, self.label_selector, self.field_selector, limit, continue_)

    def kwargs(self) -> ListKwargs:
        """These options as keyword arguments of ``Reader.list`` (to hand them to another reader)."""
        return cast(ListKwargs, _as_kwargs(self))

    def query(self) -> dict[str, Any]:
        """The query parameters for the apiserver."""
        return {
            "labelSelector": str(self.label_selector) or None,
            "fieldSelector": str(self.field_selector) or None,
            "limit": self.limit,
            "continue": self.continue_,
        }


@dataclass(frozen=True, slots=True)
class _WriteOptions:
    dry_run: bool = False
    field_manager: str | None = None

    def kwargs(self) -> WriteKwargs:
        return cast(WriteKwargs, _as_kwargs(self))

    def query(self) -> dict[str, Any]:
        """The query parameters for the apiserver (``dryRun=All`` for a dry run)."""
        return {"dryRun": "All" if self.dry_run else None, "fieldManager": self.field_manager}


@dataclass(frozen=True, slots=True)
class CreateOptions(_WriteOptions):
    """controller-runtime ``CreateOptions``."""


@dataclass(frozen=True, slots=True)
class UpdateOptions(_WriteOptions):
    """controller-runtime ``UpdateOptions``."""


@dataclass(frozen=True, slots=True)
class PatchOptions(_WriteOptions):
    """controller-runtime ``PatchOptions``; :meth:`build` checks them against the patch's type."""

    force: bool | None = None

    @classmethod
    def build(cls, patch: Patch, **options: Unpack[PatchKwargs]) -> PatchOptions:
        """The options of ``patch`` (keywords as for ``Writer.patch``), checked against its type."""
        opts = cls(**options) if options else _NO_PATCH_OPTIONS  # most patches: one shared object
        if opts.force is not None and patch.patch_type is not PatchType.APPLY:
            raise ValueError("force applies only to server-side apply patches")
        if patch.patch_type is PatchType.APPLY and not opts.field_manager:
            raise ValueError("server-side apply needs a field_manager")
        return opts

    def kwargs(self) -> PatchKwargs:
        return cast(PatchKwargs, _as_kwargs(self))

    def query(self) -> dict[str, Any]:
        return {
            "dryRun": "All" if self.dry_run else None,
            "fieldManager": self.field_manager,
            "force": self.force,
        }


_NO_PATCH_OPTIONS = PatchOptions()


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    """controller-runtime ``DeleteOptions``; :meth:`body` is the ``metav1.DeleteOptions`` sent."""

    propagation_policy: PropagationPolicy | None = None
    preconditions: Preconditions | None = None
    grace_period_seconds: int | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.propagation_policy is not None and self.propagation_policy not in _POLICIES:
            raise ValueError(
                f"propagation_policy must be Foreground, Background or Orphan: {self.propagation_policy!r}"
            )
        if self.grace_period_seconds is not None and self.grace_period_seconds < 0:
            raise ValueError(f"grace_period_seconds must be >= 0, got {self.grace_period_seconds}")

    def kwargs(self) -> DeleteKwargs:
        return cast(DeleteKwargs, _as_kwargs(self))

    def body(self) -> dict[str, Any]:
        """The ``metav1.DeleteOptions`` request body."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if self.propagation_policy is not None:
            body["propagationPolicy"] = self.propagation_policy
        if self.preconditions is not None:
            pre = {"uid": self.preconditions.uid, "resourceVersion": self.preconditions.resource_version}
            body["preconditions"] = {k: v for k, v in pre.items() if v}
        if self.grace_period_seconds is not None:
            body["gracePeriodSeconds"] = self.grace_period_seconds
        if self.dry_run:
            body["dryRun"] = ["All"]
        return body


@dataclass(frozen=True, slots=True)
class DeleteAllOfOptions:
    """controller-runtime ``DeleteAllOfOptions``: which objects, and how each is deleted."""

    list_options: ListOptions
    delete_options: DeleteOptions

    @classmethod
    def build(cls, **options: Unpack[DeleteAllOfKwargs]) -> DeleteAllOfOptions:
        unknown = options.keys() - DeleteAllOfKwargs.__optional_keys__
        if unknown:
            raise TypeError(f"delete_all_of() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
        selection = ListOptions.build(
            namespace=options.get("namespace"),
            labels=options.get("labels"),
            label_selector=options.get("label_selector"),
            fields=options.get("fields"),
            field_selector=options.get("field_selector"),
        )
        delete = DeleteOptions(
            options.get("propagation_policy"),
            options.get("preconditions"),
            options.get("grace_period_seconds"),
            options.get("dry_run", False),
        )
        return cls(selection, delete)

    def kwargs(self) -> DeleteAllOfKwargs:
        selection = _as_kwargs(self.list_options, "limit", "continue_")
        return cast(DeleteAllOfKwargs, selection | _as_kwargs(self.delete_options))
