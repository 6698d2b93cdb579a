"""Admission webhooks (controller-runtime ``pkg/webhook/admission``).

The apiserver POSTs an ``admission.k8s.io/v1`` ``AdmissionReview``; a :class:`Handler` turns its
:class:`AdmissionRequest` into an :class:`AdmissionResponse`. Users rarely write handlers: they
give a kind and a *defaulter* and/or a *validator* (controller-runtime's ``CustomDefaulter`` and
``CustomValidator``) to :func:`with_custom_defaulter` / :func:`with_custom_validator`, or to
``pyctrl.builder.WebhookBuilder``.

Guarantees:
- a defaulter receives a decoded object (typed for a class, a dict for a ``GroupVersionKind``)
  and mutates it in place; the response carries the JSON Patch from the object as decoded to the
  object as left, so only what the defaulter changed is patched (decoding alone never yields a
  patch);
- a validator returns warnings (or ``None``) to allow and raises to deny: an ``ApiError`` (e.g.
  ``Invalid`` with field causes) keeps its status code, reason, message and details, any other
  exception denies with 403 Forbidden and its message; the warnings of an allowed request reach
  the client (kubectl prints them);
- ``validate_delete`` receives the object being deleted (the review's ``oldObject``); a defaulter
  is not called for DELETE;
- an object that cannot be decoded into the kind is answered 400 (errored), never allowed.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import jsonpatch

from pyctrl.client.errors import ApiError
from pyctrl.client.scheme import Kind, decode, kind_gvk, to_dict

__all__ = [
    "AdmissionRequest",
    "AdmissionResponse",
    "CustomDefaulter",
    "CustomValidator",
    "Handler",
    "allowed",
    "denied",
    "errored",
    "patch_response_from_raw",
    "with_custom_defaulter",
    "with_custom_validator",
]

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(frozen=True)
class AdmissionRequest:
    """The ``request`` of an ``AdmissionReview`` (the fields a webhook decides on)."""

    uid: str
    kind: dict[str, str]  # group, version, kind
    resource: dict[str, str]
    operation: Operation
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    user_info: dict[str, Any] = field(default_factory=dict)
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    dry_run: bool = False

    @classmethod
    def from_review(cls, review: dict[str, Any]) -> AdmissionRequest:
        """Parse a review body; ``ValueError`` names what is missing or wrong."""
        if review.get("kind") != "AdmissionReview" or review.get("apiVersion") != "admission.k8s.io/v1":
            raise ValueError(
                f"expected an admission.k8s.io/v1 AdmissionReview, got "
                f"{review.get('apiVersion')!r} {review.get('kind')!r}"
            )
        req = review.get("request")
        if not isinstance(req, dict) or not req.get("uid") or not req.get("operation"):
            raise ValueError("the AdmissionReview has no request with a uid and an operation")
        return cls(
            uid=str(req["uid"]),
            kind=dict(req.get("kind") or {}),
            resource=dict(req.get("resource") or {}),
            operation=req["operation"],
            name=str(req.get("name") or ""),
            namespace=str(req.get("namespace") or ""),
            sub_resource=str(req.get("subResource") or ""),
            user_info=dict(req.get("userInfo") or {}),
            object=req.get("object"),
            old_object=req.get("oldObject"),
            dry_run=bool(req.get("dryRun")),
        )


@dataclass(frozen=True)
class AdmissionResponse:
    """What a handler decides: allowed or not, a status, an optional JSON Patch, warnings."""

    allowed: bool
    code: int = 200
    reason: str = ""
    message: str = ""
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def review(self, uid: str) -> dict[str, Any]:
        """The ``AdmissionReview`` body answering the request ``uid``."""
        status: dict[str, Any] = {"code": self.code}
        if self.reason:
            status["reason"] = self.reason
        if self.message:
            status["message"] = self.message
        if self.details:
            status["details"] = self.details
        response: dict[str, Any] = {"uid": uid, "allowed": self.allowed, "status": status}
        if self.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(
                jsonpatch.JsonPatch(self.patch).to_string().encode()
            ).decode()
        if self.warnings:
            response["warnings"] = list(self.warnings)
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def allowed(message: str = "", *, warnings: tuple[str, ...] = ()) -> AdmissionResponse:
    return AdmissionResponse(True, 200, message=message, warnings=warnings)


def denied(message: str, *, code: int = 403, reason: str = "Forbidden") -> AdmissionResponse:
    return AdmissionResponse(False, code, reason, message)


def errored(code: int, message: str) -> AdmissionResponse:
    """The request could not be handled (bad input: 400; a handler failure: 500)."""
    return AdmissionResponse(False, code, message=message)


def patch_response_from_raw(original: dict[str, Any], current: dict[str, Any]) -> AdmissionResponse:
    """Allowed, with the JSON Patch turning ``original`` into ``current``."""
    return AdmissionResponse(True, 200, patch=list(jsonpatch.make_patch(original, current)))


class Handler(Protocol):
    """controller-runtime ``admission.Handler``."""

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse: ...


class CustomDefaulter(Protocol):
    """controller-runtime ``admission.CustomDefaulter``: set defaults on ``obj`` in place."""

    async def default(self, obj: Any) -> None: ...


class CustomValidator(Protocol):
    """controller-runtime ``admission.CustomValidator``: return warnings to allow, raise to deny."""

    async def validate_create(self, obj: Any) -> list[str] | None: ...

    async def validate_update(self, old: Any, new: Any) -> list[str] | None: ...

    async def validate_delete(self, obj: Any) -> list[str] | None: ...


class _Decoding:
    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.description = kind_gvk(kind).kind

    def decode(self, raw: dict[str, Any] | None, what: str) -> Any:
        if raw is None:
            raise ValueError(f"the request has no {what}")
        try:
            return decode(self.kind, copy.deepcopy(raw))
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ValueError(f"cannot decode the {what} as {self.description}: {exc}") from exc


class _DefaulterHandler(_Decoding):
    def __init__(self, kind: Kind, defaulter: CustomDefaulter) -> None:
        super().__init__(kind)
        self.defaulter = defaulter

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        try:
            obj = self.decode(request.object, "object")
        except ValueError as exc:
            return errored(400, str(exc))
        baseline = to_dict(copy.deepcopy(obj))
        await self.defaulter.default(obj)
        return patch_response_from_raw(baseline, to_dict(obj))


class _ValidatorHandler(_Decoding):
    def __init__(self, kind: Kind, validator: CustomValidator) -> None:
        super().__init__(kind)
        self.validator = validator

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        try:
            match request.operation:
                case "CREATE":
                    call = self.validator.validate_create(self.decode(request.object, "object"))
                case "UPDATE":
                    old = self.decode(request.old_object, "oldObject")
                    call = self.validator.validate_update(old, self.decode(request.object, "object"))
                case "DELETE":
                    call = self.validator.validate_delete(self.decode(request.old_object, "oldObject"))
                case _:
                    return allowed()
        except ValueError as exc:
            return errored(400, str(exc))
        try:
            warnings = tuple(await call or ())
        except ApiError as exc:
            return AdmissionResponse(
                False, exc.code or 403, exc.reason or "Forbidden", exc.message, details=exc.details
            )
        except Exception as exc:  # a denial: the message is what the user sees
            return denied(str(exc) or type(exc).__name__)
        return allowed(warnings=warnings)


def with_custom_defaulter(kind: Kind, defaulter: CustomDefaulter) -> Handler:
    """A mutating handler calling ``defaulter.default`` on objects of ``kind``."""
    return _DefaulterHandler(kind, defaulter)


def with_custom_validator(kind: Kind, validator: CustomValidator) -> Handler:
    """A validating handler calling ``validator.validate_*`` on objects of ``kind``."""
    return _ValidatorHandler(kind, validator)
