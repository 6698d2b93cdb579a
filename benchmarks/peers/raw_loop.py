"""The raw peer: the practical limit for Python on this apiserver, with no framework at all.

Plain aiohttp: list the namespace's Items (paged), then watch from the list's resourceVersion;
every object whose ``status.observed`` differs from the mark followed by ``spec.value`` is queued
once (a dedup set) and ``--concurrency`` workers merge-patch ``{"status": {"observed": mark + value}}``
on the status subresource.
The newest copy of each object (from the list and the watch) is what a worker acts on. A watch
that ends is resumed from the last resourceVersion; a 410 Gone re-lists. No pyctrl, no retries, no
rate limit; orjson for JSON, as a performance-minded hand-written loop would.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from benchmarks.peers import parse_args

_PATH = "/apis/bench.pyctrl.dev/v1/namespaces/{ns}/items"


def _connection(kubeconfig: str) -> tuple[str, ssl.SSLContext]:
    """Server URL and TLS context of the current context (client-certificate users only)."""
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
    ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
    ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    return str(cluster["server"]).rstrip("/"), ctx


class RawLoop:
    def __init__(self, session: aiohttp.ClientSession, base: str, concurrency: int, mark: str) -> None:
        self.session = session
        self.base = base
        self.concurrency = concurrency
        self.mark = mark
        self.latest: dict[str, dict[str, Any]] = {}
        self.queued: set[str] = set()
        self.queue: asyncio.Queue[str] = asyncio.Queue()

    def observe(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.latest[name] = obj
        observed = (obj.get("status") or {}).get("observed")
        if observed != self.mark + obj["spec"]["value"] and name not in self.queued:
            self.queued.add(name)
            self.queue.put_nowait(name)

    async def worker(self) -> None:
        while True:
            name = await self.queue.get()
            self.queued.discard(name)
            obj = self.latest.get(name)
            if obj is None:
                continue
            observed = self.mark + obj["spec"]["value"]
            if (obj.get("status") or {}).get("observed") == observed:
                continue
            body = orjson.dumps({"status": {"observed": observed}})
            headers = {"Content-Type": "application/merge-patch+json"}
            async with self.session.patch(f"{self.base}/{name}/status", data=body, headers=headers) as r:
                data = await r.read()
            if r.status == 200:
                self.observe(orjson.loads(data))

    async def list_all(self) -> str:
        cont = ""
        while True:
            params = {"limit": "500", **({"continue": cont} if cont else {})}
            async with self.session.get(self.base, params=params) as r:
                r.raise_for_status()
                doc = orjson.loads(await r.read())
            for obj in doc["items"]:
                self.observe(obj)
            cont = doc["metadata"].get("continue") or ""
            if not cont:
                return str(doc["metadata"]["resourceVersion"])

    async def watch(self, rv: str) -> str | None:
        """Stream events from ``rv``; the last resourceVersion, or None after 410 Gone."""
        params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with self.session.get(self.base, params=params, timeout=timeout) as r:
            r.raise_for_status()
            async for line in r.content:
                event = orjson.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    return None if obj.get("code") == 410 else rv
                rv = obj["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.observe(obj)
                elif event["type"] == "DELETED":
                    self.latest.pop(obj["metadata"]["name"], None)
        return rv

    async def run(self) -> None:
        workers = [asyncio.create_task(self.worker()) for _ in range(self.concurrency)]
        try:
            rv: str | None = None
            while True:
                rv = await self.list_all() if rv is None else rv
                rv = await self.watch(rv)
        finally:
            for w in workers:
                w.cancel()


async def main() -> None:
    args = parse_args("raw_loop")
    server, ctx = _connection(args.kubeconfig)
    connector = aiohttp.TCPConnector(ssl=ctx, limit=0)
    async with aiohttp.ClientSession(connector=connector, headers={"Accept": "application/json"}) as s:
        await RawLoop(s, server + _PATH.format(ns=args.namespace), args.concurrency, args.mark).run()


if __name__ == "__main__":
    asyncio.run(main())
