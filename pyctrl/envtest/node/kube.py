"""apiserver access for the local node, over kubernetes-asyncio's authenticated transport.

The node deliberately does not use ``pyctrl.client``: the test infrastructure stays independent of
the code under test. Objects are plain JSON dicts (as the apiserver sends them).

Guarantees:
- ``request`` returns the decoded JSON body of a 2xx answer and raises the client's typed
  :class:`~pyctrl.client.errors.ApiError` (``NotFound``, ``Conflict``…: ``code``, ``reason`` and
  the apiserver's ``message``; the only module of ``pyctrl.client`` the node uses) otherwise;
  connection errors propagate as ``OSError`` /
  ``aiohttp.ClientError``;
- ``watch`` yields each event (``{"type", "object"}``) of one watch request until the server ends it;
  an ``ERROR`` event is raised as ``ApiError`` with its code (410 when the resourceVersion is too old);
- after a connection error the kubeconfig file is re-read if it changed since it was loaded (an
  apiserver restarted on another port), so the node follows the control plane;
- ``Informer`` (client-go ``Reflector`` + store, trimmed): list, then watch from the list's
  resourceVersion with bookmarks; re-watch from the last seen version when a watch ends; re-list
  on 410 Gone; back off 0.8 s doubling to 30 s on errors. The handler sees every change as
  ``(old, new)`` with ``None`` for absent, including deletions noticed only on a re-list.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncGenerator, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio.config import new_client_from_config

from pyctrl.client.errors import ApiError, api_error_from_status

__all__ = ["ApiError", "Informer", "Kube"]

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"


def _api_error(code: int, message: str, reason: str = "") -> ApiError:
    """The client's typed error (``NotFound``, ``Conflict``…) for a failure the apiserver sent."""
    return api_error_from_status({"kind": "Status", "code": code, "message": message, "reason": reason}, code)


class Kube:
    def __init__(self, api_client: Any, kubeconfig: str | None = None) -> None:
        self._api = api_client
        self._kubeconfig = kubeconfig
        self._loaded = _mtime(kubeconfig)
        self._retired: list[Any] = []

    @classmethod
    async def from_kubeconfig(cls, path: str) -> Kube:
        return cls(await new_client_from_config(config_file=path, persist_config=False), path)

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    async def reload_if_changed(self) -> bool:
        """Switch to the kubeconfig's current contents if the file changed (say, the apiserver
        moved to another port); called after connection errors. True when it reloaded."""
        if self._kubeconfig is None or (mtime := _mtime(self._kubeconfig)) == self._loaded:
            return False
        try:
            api = await new_client_from_config(config_file=self._kubeconfig, persist_config=False)
        except Exception as exc:  # half-written file: keep the old client, try again next time
            log.warning("reloading kubeconfig %s failed: %s", self._kubeconfig, exc)
            return False
        self._loaded = mtime
        self._retired.append(self._api)  # requests in flight keep it; closed in close()
        self._api = api
        log.info("kubeconfig %s changed; now talking to %s", self._kubeconfig, self.host)
        return True

    async def close(self) -> None:
        for api in [*self._retired, self._api]:
            await api.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None,
        body: Any,
        content_type: str,
        limit: Any,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        resp: aiohttp.ClientResponse = await self._api.call_api(
            path,
            method,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=limit,
        )
        if resp.status >= 300:
            text = await resp.text()
            resp.release()
            try:
                decoded = json.loads(text)
                raise _api_error(resp.status, decoded.get("message", text), decoded.get("reason", ""))
            except ValueError:
                raise _api_error(resp.status, text) from None
        return resp

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        seconds: float = 30.0,
    ) -> dict[str, Any]:
        """One request; ``seconds`` bounds it as a whole."""
        resp = await self._send(
            method, path, query=query, body=body, content_type=content_type, limit=seconds
        )
        try:
            data: dict[str, Any] = await resp.json(content_type=None)
        finally:
            resp.release()
        return data

    async def get(self, path: str, **query: Any) -> dict[str, Any]:
        return await self.request("GET", path, query=query)

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body=body, content_type=MERGE_PATCH)

    async def watch(self, path: str, query: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        params = dict(query, watch="true", allowWatchBookmarks="true")
        limit = aiohttp.ClientTimeout(
            total=None, sock_connect=10, sock_read=int(params["timeoutSeconds"]) + 30
        )
        resp = await self._send(
            "GET", path, query=params, body=None, content_type="application/json", limit=limit
        )
        buffer = b""
        try:
            async for chunk in resp.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event: dict[str, Any] = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object", {})
                        raise _api_error(
                            int(status.get("code", 500)), status.get("message", ""), status.get("reason", "")
                        )
                    yield event
        finally:
            resp.release()


def _mtime(path: str | None) -> float:
    try:
        return os.stat(path).st_mtime if path else 0.0
    except OSError:
        return 0.0


Handler = Callable[[dict[str, Any] | None, dict[str, Any] | None], None]


class Informer:
    """List + watch of one collection (optionally field-selected), keyed by uid."""

    def __init__(self, kube: Kube, path: str, handler: Handler, *, field_selector: str | None = None) -> None:
        self.kube, self.path, self.handler, self.field_selector = kube, path, handler, field_selector
        self.store: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()

    def _apply(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        try:
            self.handler(old, new)
        except Exception:
            log.exception("handler for %s failed", self.path)

    async def _list(self) -> str:
        listing = await self.kube.get(self.path, fieldSelector=self.field_selector)
        fresh = {o["metadata"]["uid"]: o for o in listing.get("items", [])}
        for uid in [u for u in self.store if u not in fresh]:
            self._apply(self.store.pop(uid), None)
        for uid, obj in fresh.items():
            old = self.store.get(uid)
            self.store[uid] = obj
            self._apply(old, obj)
        self.synced.set()
        return str(listing["metadata"]["resourceVersion"])

    async def run(self) -> None:
        version: str | None = None
        delay = 0.8
        while True:
            try:
                if version is None:
                    version = await self._list()
                query = {
                    "fieldSelector": self.field_selector,
                    "resourceVersion": version,
                    "timeoutSeconds": 300,
                }
                async for event in self.kube.watch(self.path, query):
                    obj = event["object"]
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event["type"] == "BOOKMARK":
                        continue
                    uid = obj["metadata"]["uid"]
                    old = self.store.get(uid)
                    if event["type"] == "DELETED":
                        self.store.pop(uid, None)
                        self._apply(old, None)
                    else:
                        self.store[uid] = obj
                        self._apply(old, obj)
                delay = 0.8
            except ApiError as exc:
                if exc.code == 410:
                    version = None
                    continue
                log.warning("watch %s: %s; retrying in %.1fs", self.path, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
            except (OSError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                if await self.kube.reload_if_changed():
                    delay = 0.8
                    continue
                log.warning("watch %s: %s; retrying in %.1fs", self.path, exc or type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
