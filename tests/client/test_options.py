"""The verbs' option objects: keywords parsed once, bad values refused before anything is sent."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pyctrl.client import (
    ApiClient,
    Apply,
    ConfigMap,
    DeleteAllOfOptions,
    DeleteOptions,
    HTTPRequest,
    HTTPTransport,
    ListOptions,
    MergeFrom,
    ObjectMeta,
    PatchOptions,
    PatchType,
    Preconditions,
    RawPatch,
    Selector,
    Transport,
    UpdateOptions,
    load_kubeconfig,
)
from pyctrl.client.fake import FakeClient


def test_list_options_combine_labels_with_the_selector_and_render_the_query() -> None:
    opts = ListOptions.build(namespace="ns", labels={"app": "redis"}, label_selector="tier in (a,b)", limit=5)
    assert opts.query() == {
        "labelSelector": "tier in (a,b),app=redis",
        "fieldSelector": None,
        "limit": 5,
        "continue": None,
    }
    assert ListOptions.build(**opts.kwargs()) == opts
    assert opts.page(2, "tok") == ListOptions(
        opts.namespace, opts.label_selector, opts.field_selector, 2, "tok"
    )


def test_patch_options_are_checked_against_the_patch_type() -> None:
    with pytest.raises(ValueError, match="force applies only to server-side apply"):
        PatchOptions.build(RawPatch(PatchType.MERGE, {}), force=True)
    with pytest.raises(ValueError, match="needs a field_manager"):
        PatchOptions.build(Apply)
    opts = PatchOptions.build(Apply, field_manager="me", force=True, dry_run=True)
    assert opts.query() == {"dryRun": "All", "fieldManager": "me", "force": True}
    assert UpdateOptions().query() == {"dryRun": None, "fieldManager": None}


def test_delete_options_refuse_bad_values_and_render_the_body() -> None:
    with pytest.raises(ValueError, match="propagation_policy must be"):
        DeleteOptions(propagation_policy="Sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grace_period_seconds must be >= 0"):
        DeleteOptions(grace_period_seconds=-1)
    body = DeleteOptions("Foreground", Preconditions(uid="u"), 0, True).body()
    assert body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u"},
        "gracePeriodSeconds": 0,
        "dryRun": ["All"],
    }


def test_delete_all_of_options_split_the_selection_from_the_deletion_and_refuse_unknown_keywords() -> None:
    opts = DeleteAllOfOptions.build(namespace="ns", labels={"a": "b"}, propagation_policy="Orphan")
    assert opts.list_options == ListOptions.build(namespace="ns", labels={"a": "b"})
    assert opts.delete_options == DeleteOptions(propagation_policy="Orphan")
    assert DeleteAllOfOptions.build(**opts.kwargs()) == opts
    with pytest.raises(TypeError, match="unexpected keyword arguments: namespce"):
        DeleteAllOfOptions.build(namespce="ns")  # type: ignore[call-arg]


async def test_a_bad_keyword_fails_in_every_client_before_anything_is_written() -> None:
    client = FakeClient()
    cm = ConfigMap(metadata=ObjectMeta(name="a", namespace="ns"))
    with pytest.raises(TypeError):
        await client.create(cm, dryrun=True)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="limit must be >= 0"):
        await client.list(ConfigMap, limit=-1)
    with pytest.raises(ValueError, match="force applies only"):
        await client.patch(cm, MergeFrom(cm), force=True)
    assert not (await client.list(ConfigMap)).items


class _Seen:
    """A transport of the seam: records each request, then hands it to the real transport."""

    def __init__(self, inner: HTTPTransport) -> None:
        self.inner = inner
        self.requests: list[tuple[str, str, Mapping[str, Any]]] = []
        self.streams: list[tuple[str, str, Mapping[str, Any]]] = []

    async def send(self, request: HTTPRequest) -> bytes:
        self.requests.append((request.method, request.path, dict(request.params or {})))
        return await self.inner.send(request)

    def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        self.streams.append((request.method, request.path, dict(request.params or {})))
        return self.inner.stream(request)


@pytest.mark.controlplane
async def test_every_request_of_the_verbs_goes_through_the_injected_transport(
    kubeconfig: Path, namespace: str
) -> None:
    config = await load_kubeconfig(kubeconfig)
    real = Transport(config)
    seen = _Seen(real)
    try:
        async with ApiClient(config, transport=seen) as client:
            cm = ConfigMap(metadata=ObjectMeta(name="seam", namespace=namespace), data={"k": "v"})
            created = await client.create(cm, field_manager="seam-test")
            await client.get(ConfigMap, "seam", namespace=namespace)
            await client.list(ConfigMap, namespace=namespace, labels={"app": "x"}, limit=3)
            applied = ConfigMap(metadata=ObjectMeta(name="seam", namespace=namespace), data={"k2": "w"})
            await client.apply(applied, field_manager="seam-apply")
            await client.delete(created, propagation_policy="Background")
            since = created.metadata.resource_version or ""
            events = client.watch(ConfigMap, namespace=namespace, resource_version=since, timeout_seconds=30)
            seen_types: list[str] = []
            async with contextlib.aclosing(events):
                async for event in events:
                    seen_types.append(event.type)
                    if event.type == "DELETED":
                        break
    finally:
        await real.close()
    verbs = [(m, p.rsplit("/", 1)[-1]) for m, p, _ in seen.requests if not p.startswith("/api/v1?")]
    assert ("POST", "configmaps") in verbs
    assert verbs[-4:] == [("GET", "seam"), ("GET", "configmaps"), ("PATCH", "seam"), ("DELETE", "seam")]
    assert {"fieldManager": "seam-test", "dryRun": None} in [p for m, _, p in seen.requests if m == "POST"]
    assert seen.requests[-3][2]["labelSelector"] == str(Selector.from_labels({"app": "x"}))
    assert seen_types == ["MODIFIED", "DELETED"]  # the watch's events, through the same seam:
    [(method, path, params)] = seen.streams
    assert (method, path) == ("GET", f"/api/v1/namespaces/{namespace}/configmaps")
    assert params["watch"] is True
    assert params["resourceVersion"] == since
