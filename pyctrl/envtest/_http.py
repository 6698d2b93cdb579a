"""A minimal synchronous HTTPS client for envtest's own admin calls.

envtest must work before (and independently of) ``pyctrl.client``: it waits for ``/readyz``,
installs CRDs, creates namespaces. This is a thin wrapper over ``urllib`` with the admin client
certificate; it is not a general Kubernetes client. A non-2xx answer raises the client's typed
:class:`~pyctrl.client.errors.ApiError` (``NotFound``, ``Invalid``…), with the request in a note.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyctrl.client.errors import ApiError, api_error_from_status

__all__ = ["AdminHTTP", "ApiError", "poll_until"]

_ATTEMPTS = 5


def _api_error(method: str, path: str, code: int, body: str) -> ApiError:
    """The client's typed error for a non-2xx answer, noting the request."""
    status: Any = body
    with contextlib.suppress(ValueError):
        status = json.loads(body)
    error = api_error_from_status(status, code)
    error.add_note(f"{method} {path}")
    return error


class AdminHTTP:
    """Requests against ``server`` authenticated with a client certificate."""

    def __init__(self, server: str, ca: Path, cert: Path, key: Path) -> None:
        self.server = server.rstrip("/")
        self._ctx = ssl.create_default_context(cafile=str(ca))
        self._ctx.load_cert_chain(str(cert), str(key))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        timeout: float = 10.0,
    ) -> Any:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        for attempt in range(_ATTEMPTS):
            try:
                with urllib.request.urlopen(req, context=self._ctx, timeout=timeout) as resp:
                    raw = resp.read()
                break
            except urllib.error.HTTPError as exc:
                raise _api_error(method, path, exc.code, exc.read().decode(errors="replace")) from exc
            except urllib.error.URLError as exc:
                # Refused or reset before the request was read (an apiserver restarting or
                # overloaded): nothing was processed, so trying again is safe.
                if not isinstance(exc.reason, ConnectionError) or attempt == _ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def get(self, path: str) -> Any:
        return self.request("GET", path)


def poll_until(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    *,
    interval: float = 0.1,
    on_timeout: Callable[[], str] = lambda: "",
) -> None:
    """Call ``check`` until it returns True; raise TimeoutError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{on_timeout()}")
        time.sleep(interval)
