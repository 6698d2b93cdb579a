"""Authentication and authorization of the metrics endpoint by the apiserver.

Mirrors controller-runtime ``pkg/metrics/filters.WithAuthenticationAndAuthorization`` (used with
``metricsserver.Options{SecureServing: true, FilterProvider: ...}``): every request must carry
``Authorization: Bearer <token>``; the token is authenticated with a ``TokenReview`` and the
user it names is authorized with a ``SubjectAccessReview`` for the non-resource URL of the
request (``/metrics``) and the request's verb (the HTTP method in lower case: ``get``), as the
apiserver authorizes its own non-resource URLs. kubebuilder's ``metrics-reader`` ClusterRole
(``nonResourceURLs: ["/metrics"], verbs: ["get"]``) is what a scraper is bound to; the manager's
own ServiceAccount needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``.

Guarantees:

- no token, a malformed ``Authorization`` header, a token the apiserver does not authenticate,
  or a TokenReview that fails: ``401 Unauthorized``, the handler is not called;
- an authenticated user RBAC does not allow: ``403 Forbidden`` naming the user, path and verb;
  a SubjectAccessReview that fails: ``500``; the handler is not called in either case;
- decisions are cached as in controller-runtime (``DelegatingAuthenticatorConfig.CacheTTL`` 1 min,
  ``DelegatingAuthorizerConfig`` allow 5 min, deny 30 s), at most ``max_entries`` of each kind
  (the oldest dropped first); tokens are cached by their SHA-256, never kept or logged;
- the clock is injected (:class:`~pyctrl.workqueue.Clock`), so the cache is tested without sleeping.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pyctrl.client.interfaces import Client
from pyctrl.log import get_logger
from pyctrl.workqueue import Clock, RealClock

if TYPE_CHECKING:  # imported where a server is built (pyctrl._httpserver says why)
    from aiohttp import web

__all__ = ["AuthFilter", "Filter", "FilterProvider", "UserInfo", "with_authentication_and_authorization"]

Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


class Filter(Protocol):
    """An aiohttp middleware (controller-runtime ``metricsserver.Filter``): answers the request
    itself or passes it to ``handler``."""

    def __call__(self, request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]: ...


#: controller-runtime ``metricsserver.Options.FilterProvider``: the filter, given the manager's client.
FilterProvider = Callable[[Client], Filter]

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class UserInfo:
    """Who a token belongs to (``TokenReview.status.user``)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class _TTLCache(Generic[K, V]):
    """At most ``size`` entries, each valid until its own expiry; the oldest dropped first."""

    def __init__(self, clock: Clock, size: int) -> None:
        self._clock, self._size = clock, size
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        found = self._entries.get(key)
        if found is None:
            return None
        if found[0] <= self._clock.now():
            del self._entries[key]
            return None
        return found[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        self._entries[key] = (self._clock.now() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


class AuthFilter:
    """The middleware (see the module docstring); ``await filter(request, handler)``."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        token_ttl: float = 60.0,
        allow_ttl: float = 300.0,
        deny_ttl: float = 30.0,
        max_entries: int = 1024,
    ) -> None:
        self.client = client
        self.token_ttl, self.allow_ttl, self.deny_ttl = token_ttl, allow_ttl, deny_ttl
        clock = clock or RealClock()
        self._tokens: _TTLCache[str, UserInfo] = _TTLCache(clock, max_entries)
        self._decisions: _TTLCache[tuple[UserInfo, str, str], tuple[bool, str]] = _TTLCache(
            clock, max_entries
        )
        self.log = get_logger("pyctrl.metrics.filters")

    async def authenticate(self, token: str) -> UserInfo | None:
        """The user ``token`` belongs to (TokenReview), or None when it is not authenticated."""
        key = hashlib.sha256(token.encode()).hexdigest()
        user = self._tokens.get(key)
        if user is not None:
            return user
        body: dict[str, Any] = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        review = await self.client.create(body)
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        info = status.get("user") or {}
        extra = info.get("extra") or {}
        user = UserInfo(
            username=info.get("username", ""),
            uid=info.get("uid", ""),
            groups=tuple(info.get("groups") or ()),
            extra=tuple(sorted((k, tuple(v)) for k, v in extra.items())),
        )
        self._tokens.put(key, user, self.token_ttl)  # only successes, as client-go's token cache
        return user

    async def authorize(self, user: UserInfo, path: str, verb: str) -> tuple[bool, str]:
        """(allowed, the authorizer's reason) for ``user`` on the non-resource URL ``path``."""
        key = (user, path, verb)
        decision = self._decisions.get(key)
        if decision is not None:
            return decision
        spec: dict[str, Any] = {
            "user": user.username,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body: dict[str, Any] = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        review = await self.client.create(body)
        status = review.get("status") or {}
        decision = (
            bool(status.get("allowed")),
            str(status.get("reason") or status.get("evaluationError") or ""),
        )
        self._decisions.put(key, decision, self.allow_ttl if decision[0] else self.deny_ttl)
        return decision

    async def __call__(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        from aiohttp import web

        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return web.Response(status=401, text="Unauthorized: a bearer token is required\n")
        try:
            user = await self.authenticate(token)
        except Exception as exc:  # the apiserver could not review it: not authenticated
            self.log.error("TokenReview failed", error=str(exc))
            return web.Response(status=401, text="Unauthorized\n")
        if user is None:
            return web.Response(status=401, text="Unauthorized\n")
        verb = request.method.lower()
        try:
            allowed, reason = await self.authorize(user, request.path, verb)
        except Exception as exc:
            self.log.error("SubjectAccessReview failed", error=str(exc), user=user.username)
            return web.Response(status=500, text="Internal Server Error: authorization failed\n")
        if not allowed:
            why = f": {reason}" if reason else ""
            text = f"Forbidden (user={user.username}, verb={verb}, path={request.path}){why}\n"
            return web.Response(status=403, text=text)
        return await handler(request)


def with_authentication_and_authorization(client: Client) -> AuthFilter:
    """controller-runtime ``filters.WithAuthenticationAndAuthorization``: the
    :data:`FilterProvider` of the secure metrics server (``Manager(metrics_filter_provider=...)``)."""
    return AuthFilter(client)
