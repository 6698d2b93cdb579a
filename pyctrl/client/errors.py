"""Every error pyctrl's client and cache raise.

Hierarchy::

    KubernetesError                      base of everything below
    ├── ConfigError                      no usable kubeconfig / in-cluster configuration
    ├── TransportError                   the apiserver could not be reached or the stream broke
    │   └── RequestTimeout               no complete answer within the client-side timeout
    ├── UnknownKind                      GVK not in the scheme, or not served by the apiserver
    ├── ApiError                         the apiserver answered with a failure ``Status``
    │   ├── BadRequest                   400
    │   ├── Unauthorized                 401
    │   ├── Forbidden                    403
    │   ├── NotFound                     404
    │   ├── MethodNotAllowed             405
    │   ├── NotAcceptable                406 (e.g. a representation the server does not serve)
    │   ├── AlreadyExists                409, reason AlreadyExists
    │   ├── Conflict                     409, reason Conflict (stale resourceVersion, apply conflict)
    │   ├── Gone                         410, reason Gone (resourceVersion too old)
    │   │   └── Expired                  410, reason Expired (continue token / watch too old)
    │   ├── RequestEntityTooLarge        413
    │   ├── UnsupportedMediaType         415
    │   ├── Invalid                      422 (``causes`` names the fields)
    │   ├── TooManyRequests              429 (``retry_after`` from Retry-After / details)
    │   ├── InternalError                500
    │   ├── ServiceUnavailable           503
    │   └── ServerTimeout                500 reason ServerTimeout, 504 reason Timeout
    └── CacheError                       the informer cache cannot answer
        ├── CacheNotStarted              read before ``Cache.start()``
        ├── CacheSyncTimeout             ``wait_for_cache_sync`` ran out of time
        └── FieldNotIndexed              list by a field nobody registered with ``index_field``

Mirrors apimachinery ``pkg/api/errors`` (``IsNotFound``, ``IsConflict``…): instead of predicate
functions each failure ``reason`` is a class, so ``except NotFound`` replaces ``IsNotFound(err)``.
Guarantees:

- the HTTP layer is translated exactly once, at the REST boundary (``pyctrl.client.rest``), with
  ``raise … from exc`` so the aiohttp cause stays visible;
- an :class:`ApiError` carries the apiserver ``Status`` as sent: ``message``, ``reason``, ``code``,
  ``details`` and the field ``causes`` (list of :class:`StatusCause`);
- the class is chosen by ``reason`` first and by HTTP code second, as apimachinery does, so an
  unknown reason with a known code still gets a precise class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "CacheError",
    "CacheNotStarted",
    "CacheSyncTimeout",
    "ConfigError",
    "Conflict",
    "Expired",
    "FieldNotIndexed",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "KubernetesError",
    "MethodNotAllowed",
    "NotAcceptable",
    "NotFound",
    "RequestEntityTooLarge",
    "RequestTimeout",
    "ServerTimeout",
    "ServiceUnavailable",
    "StatusCause",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "UnknownKind",
    "UnsupportedMediaType",
    "api_error_from_status",
    "failure_status",
]


class KubernetesError(Exception):
    """Base of every pyctrl client and cache error."""


class ConfigError(KubernetesError):
    """No usable configuration: missing or malformed kubeconfig, unknown context, not in a pod."""


class TransportError(KubernetesError):
    """The apiserver could not be reached, or a response/stream broke off."""


class RequestTimeout(TransportError):
    """The client-side request timeout elapsed."""


class UnknownKind(KubernetesError):
    """A kind is neither registered in the scheme nor served by the apiserver (no REST mapping)."""


class CacheError(KubernetesError):
    """The informer cache cannot answer the read."""


class CacheNotStarted(CacheError):
    """The cache was read before ``start()``."""


class CacheSyncTimeout(CacheError):
    """Informers did not finish their initial list in time."""


class FieldNotIndexed(CacheError):
    """A cached list used a field selector on a field without an index (see ``index_field``)."""


@dataclass(frozen=True, slots=True)
class StatusCause:
    """One entry of ``Status.details.causes``: which field is wrong and why."""

    reason: str
    message: str
    field: str


class ApiError(KubernetesError):
    """The apiserver answered with a failure ``metav1.Status``.

    A subclass declared with the HTTP ``code`` it stands for or the Status ``reasons`` that select
    it (default: its own name) is registered for :func:`api_error_from_status`, which looks classes
    up by reason first, then by code (``code_fallback=False``: that code belongs to another class).
    A subclass declared without either is not looked up.
    """

    #: HTTP code this class stands for (the actual response code is in :attr:`code`).
    default_code: ClassVar[int] = 0

    def __init_subclass__(
        cls, *, code: int | None = None, reasons: tuple[str, ...] | None = None, code_fallback: bool = True
    ) -> None:
        super().__init_subclass__()
        if code is None and reasons is None:
            return
        if code is not None:
            cls.default_code = code
            if code_fallback:
                _BY_CODE[code] = cls
        for reason in (cls.__name__,) if reasons is None else reasons:
            _BY_REASON[reason] = cls

    def __init__(self, status: dict[str, Any], *, code: int | None = None) -> None:
        self.status: dict[str, Any] = status
        self.code: int = int(status.get("code") or code or self.default_code)
        self.reason: str = str(status.get("reason") or "")
        self.message: str = str(status.get("message") or f"HTTP {self.code}")
        details = status.get("details") or {}
        self.details: dict[str, Any] = details if isinstance(details, dict) else {}
        self.causes: list[StatusCause] = [
            StatusCause(
                reason=str(c.get("reason", "")),
                message=str(c.get("message", "")),
                field=str(c.get("field", "")),
            )
            for c in self.details.get("causes") or []
            if isinstance(c, dict)
        ]
        super().__init__(self.message)

    def __str__(self) -> str:
        label = f"{self.code} {self.reason}".strip()
        return f"{self.message} ({label})"


_BY_REASON: dict[str, type[ApiError]] = {}
_BY_CODE: dict[int, type[ApiError]] = {}


class BadRequest(ApiError, code=400): ...


class Unauthorized(ApiError, code=401): ...


class Forbidden(ApiError, code=403): ...


class NotFound(ApiError, code=404): ...


class MethodNotAllowed(ApiError, code=405): ...


class AlreadyExists(ApiError, code=409, code_fallback=False):
    """409 with reason AlreadyExists (a bare 409 is a :class:`Conflict`)."""


class Conflict(ApiError, code=409):
    """409: a stale ``resourceVersion`` or a server-side apply conflict."""


class Gone(ApiError, code=410):
    """The requested resourceVersion is older than what the apiserver keeps: relist."""


class Expired(Gone, reasons=("Expired",)):
    """Reason ``Expired``: a continue token or watch resourceVersion expired."""


class NotAcceptable(ApiError, code=406):
    """406: the server cannot answer in the representation asked for (the ``Accept`` header)."""


class RequestEntityTooLarge(ApiError, code=413): ...


class UnsupportedMediaType(ApiError, code=415): ...


class Invalid(ApiError, code=422):
    """422: the object failed validation; :attr:`causes` names the fields."""


class TooManyRequests(ApiError, code=429):
    """429: the apiserver asks the client to back off for :attr:`retry_after` seconds."""

    def __init__(
        self, status: dict[str, Any], *, code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(status, code=code)
        seconds = self.details.get("retryAfterSeconds")
        self.retry_after: float | None = retry_after if retry_after is not None else _float(seconds)


class InternalError(ApiError, code=500): ...


class ServiceUnavailable(ApiError, code=503): ...


class ServerTimeout(ApiError, code=504, reasons=("ServerTimeout", "Timeout")):
    """500 with reason ServerTimeout, or 504 (reason Timeout): the apiserver gave up in time."""


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def failure_status(reason: str, code: int, message: str, **details: Any) -> dict[str, Any]:
    """A failure ``metav1.Status`` as the apiserver writes it (for fakes and caches that answer
    in its place)."""
    return {
        "kind": "Status",
        "status": "Failure",
        "reason": reason,
        "code": code,
        "message": message,
        "details": details,
    }


def api_error_from_status(
    status: Any, code: int | None = None, *, retry_after: float | None = None
) -> ApiError:
    """Build the typed error for a failure ``Status`` (or any error body) answered with ``code``.

    ``status`` that is not a ``Status`` object (a proxy's HTML page, an empty body) still yields the
    class for ``code``, with the body as message.
    """
    if not isinstance(status, dict) or status.get("kind") not in ("Status", None):
        status = {"message": str(status)[:500] if status else "", "code": code}
    cls = _BY_REASON.get(str(status.get("reason") or ""))
    effective = int(status.get("code") or code or 0)
    if cls is None:
        cls = _BY_CODE.get(effective, ApiError)
    if cls is TooManyRequests:
        return TooManyRequests(status, code=effective, retry_after=retry_after)
    return cls(status, code=effective)
