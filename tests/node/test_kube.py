"""apiserver access: list+watch informer semantics (re-watch, re-list on 410 with deletions) and
the transport against the real apiserver (errors, watch events, 410 after compaction)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from pyctrl.client.errors import ApiError, api_error_from_status
from pyctrl.envtest.node.kube import Informer, Kube
from tests.node.helpers import read


def obj(uid: str, version: str, value: str = "") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": version}, "data": {"v": value}}


class ScriptedKube:
    """Answers list calls from ``lists`` and watch calls from ``watches``, in order."""

    def __init__(
        self, lists: list[list[dict[str, Any]]], watches: list[list[dict[str, Any]] | ApiError]
    ) -> None:
        self.lists, self.watches = lists, watches
        self.watch_versions: list[str] = []
        self.done = asyncio.Event()

    async def get(self, path: str, **query: Any) -> dict[str, Any]:
        items = self.lists.pop(0)
        version = max((int(i["metadata"]["resourceVersion"]) for i in items), default=1)
        return {"metadata": {"resourceVersion": str(version)}, "items": items}

    async def watch(self, path: str, query: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        self.watch_versions.append(query["resourceVersion"])
        if not self.watches:
            self.done.set()
            await asyncio.Event().wait()
        script = self.watches.pop(0)
        if isinstance(script, ApiError):
            raise script
        for event in script:
            yield event


async def run_informer(kube: ScriptedKube) -> list[tuple[str | None, str | None]]:
    seen: list[tuple[str | None, str | None]] = []

    def handler(old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        seen.append((None if old is None else old["data"]["v"], None if new is None else new["data"]["v"]))

    informer = Informer(kube, "/x", handler)  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(kube.done.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return seen


async def test_the_informer_rewatches_from_the_last_version_and_relists_on_410_with_deletions() -> None:
    kube = ScriptedKube(
        lists=[[obj("a", "1", "a1"), obj("b", "2", "b1")], [obj("a", "9", "a2"), obj("c", "9", "c1")]],
        watches=[
            [
                {"type": "MODIFIED", "object": obj("a", "5", "a1'")},
                {"type": "BOOKMARK", "object": obj("", "6")},
            ],
            api_error_from_status({"code": 410, "reason": "Expired", "message": "too old resource version"}),
        ],
    )
    seen = await run_informer(kube)
    assert seen == [
        (None, "a1"),
        (None, "b1"),
        ("a1", "a1'"),
        ("b1", None),  # deleted while disconnected: noticed on the re-list
        ("a1'", "a2"),
        (None, "c1"),
    ]
    assert kube.watch_versions == ["2", "6", "9"]


async def test_a_watch_deletion_is_delivered_with_the_last_known_object() -> None:
    kube = ScriptedKube(
        lists=[[obj("a", "1", "a1")]],
        watches=[[{"type": "DELETED", "object": obj("a", "3", "a-final")}]],
    )
    assert await run_informer(kube) == [(None, "a1"), ("a1", None)]


@pytest.mark.controlplane
async def test_the_transport_reports_api_errors_and_streams_watch_events(kube: Kube, namespace: str) -> None:
    with pytest.raises(ApiError) as missing:
        await kube.get(f"/api/v1/namespaces/{namespace}/configmaps/absent")
    assert missing.value.code == 404
    assert 'configmaps "absent" not found' in missing.value.message
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    version = (await kube.get(path))["metadata"]["resourceVersion"]
    await kube.request("POST", path, body={"metadata": {"name": "one"}, "data": {"k": "v"}})
    events = kube.watch(path, {"resourceVersion": version, "timeoutSeconds": 10})
    event = await asyncio.wait_for(anext(events), 10)
    await events.aclose()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "one")


@pytest.fixture
async def fake_apiserver() -> AsyncIterator[Kube]:
    """A plain-HTTP server answering a watch with a split event, then an ERROR 410 event."""

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        first = json.dumps({"type": "ADDED", "object": obj("a", "5", "x")}).encode() + b"\n"
        await response.write(first[:10])  # an event split over two chunks
        await response.write(first[10:])
        gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
        await response.write(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
        return response

    app = web.Application()
    app.router.add_get("/watch", watch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    kube = Kube(ApiClient(Configuration(host=f"http://127.0.0.1:{port}")))
    try:
        yield kube
    finally:
        await kube.close()
        await runner.cleanup()


async def test_a_watch_error_event_is_raised_as_an_api_error_with_its_code(fake_apiserver: Kube) -> None:
    seen: list[str] = []

    async def consume() -> None:
        async for event in fake_apiserver.watch("/watch", {"resourceVersion": "1", "timeoutSeconds": 10}):
            seen.append(event["object"]["data"]["v"])

    with pytest.raises(ApiError) as gone:
        await consume()
    assert seen == ["x"]
    assert (gone.value.code, gone.value.reason) == (410, "Expired")


def rewrite(path: Path, text: str) -> None:
    """Write ``text``; the modification time differs from the previous one even on coarse clocks."""
    before = path.stat().st_mtime if path.exists() else 0.0
    path.write_text(text)
    if path.stat().st_mtime == before:
        os.utime(path, (before + 1, before + 1))


@pytest.mark.controlplane
async def test_a_changed_kubeconfig_is_reloaded_after_a_connection_error(
    kubeconfig: Path, tmp_path: Path
) -> None:
    good = read(kubeconfig)
    server = next(line.split()[-1] for line in good.splitlines() if "server:" in line)
    moved = tmp_path / "kubeconfig"
    rewrite(moved, good.replace(server, "https://127.0.0.1:9"))  # nothing listens there
    kube = await Kube.from_kubeconfig(str(moved))
    try:
        with pytest.raises(aiohttp.ClientConnectionError):
            await kube.get("/version")
        assert not await kube.reload_if_changed()  # unchanged file: nothing to do
        rewrite(moved, good)
        assert await kube.reload_if_changed()
        assert kube.host == server
        assert (await kube.get("/version"))["gitVersion"].startswith("v1.")
    finally:
        await kube.close()
