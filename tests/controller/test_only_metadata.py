"""``owns``/``watches``/``for_(..., only_metadata=True)`` on the real control plane: the kind is
watched and cached as ``PartialObjectMetadata`` only (no full informer), its events enqueue as usual."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pyctrl.builder import BuilderError, ControllerBuilder
from pyctrl.client import ConfigMap, ObjectMeta, PartialObjectMetadata, Secret
from pyctrl.client.scheme import kind_gvk
from pyctrl.controllerutil import set_controller_reference
from pyctrl.handler import enqueue_requests_from_map_func
from pyctrl.reconcile import Request, Result
from pyctrl.source import Channel
from pyctrl.testing import eventually

from ._manager import new_manager, running

pytestmark = pytest.mark.controlplane


class Recorder:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.requests: list[Request] = []
        self.children: list[Any] = []

    async def reconcile(self, request: Request) -> Result:
        if request.name != "owner":
            return Result()  # e.g. the namespace's kube-root-ca.crt
        self.requests.append(request)
        child = await self.client.get(PartialObjectMetadata.of(Secret), "child", namespace=request.namespace)
        self.children.append(child)
        return Result()


def representations(mgr: Any) -> set[tuple[str, bool]]:
    """The (kind, metadata only?) pairs the manager's cache has informers for."""
    return {(gvk.kind, metadata_only) for gvk, metadata_only in mgr.cache._kinds}


async def test_an_owned_kind_watched_as_metadata_only_enqueues_its_owner(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    rec = Recorder(mgr.client)
    builder = ControllerBuilder(mgr).for_(ConfigMap).owns(Secret, only_metadata=True)
    builder.named(f"meta-owner-{namespace}").complete(rec)
    async with running(mgr):
        owner = await mgr.api_client.create(ConfigMap(metadata=ObjectMeta(name="owner", namespace=namespace)))
        child = Secret(metadata=ObjectMeta(name="child", namespace=namespace), data={"k": "dmFsdWU="})
        set_controller_reference(owner, child)
        child = await mgr.api_client.create(child)

        # once a reconcile has read the child, nothing requeues the owner: only an event can
        await eventually(lambda: rec.children, within=30, what="owner reconciled with its child")
        before = len(rec.requests)
        child.metadata.labels = {"touched": "yes"}
        await mgr.api_client.update(child)  # a change of the owned Secret: its owner is reconciled
        await eventually(lambda: len(rec.requests) > before, within=30, what="owner reconciled again")
        assert rec.children[-1].metadata.labels == {"touched": "yes"}
        assert representations(mgr) == {("ConfigMap", False), ("Secret", True)}  # no full Secret informer
        assert all(isinstance(c, PartialObjectMetadata) and c.kind == "Secret" for c in rec.children)
        assert all("data" not in c.model_dump(by_alias=True) for c in rec.children)


async def test_a_kind_watched_as_metadata_only_hands_partial_objects_to_its_handler(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    seen: list[Any] = []

    def to_owner(obj: Any) -> list[Request]:
        seen.append(obj)
        return [Request(name="owner", namespace=namespace)]

    rec = Recorder(mgr.client)
    handler = enqueue_requests_from_map_func(to_owner)
    builder = ControllerBuilder(mgr).for_(ConfigMap, only_metadata=True)
    builder.watches(Secret, handler, only_metadata=True).named(f"meta-watch-{namespace}").complete(rec)
    async with running(mgr):
        await mgr.api_client.create(Secret(metadata=ObjectMeta(name="child", namespace=namespace)))
        await eventually(lambda: rec.requests, within=30, what="mapped request reconciled")
        assert seen
        assert all(type(obj) is PartialObjectMetadata.of(Secret) for obj in seen)
        assert representations(mgr) == {("ConfigMap", True), ("Secret", True)}


async def test_only_metadata_of_a_ready_made_source_is_refused(kubeconfig: Path, namespace: str) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    source = Channel(asyncio.Queue(), enqueue_requests_from_map_func(lambda obj: []))
    builder = ControllerBuilder(mgr).for_(ConfigMap).watches(source, only_metadata=True)
    with pytest.raises(BuilderError, match=r"only_metadata=True\): give a kind, not a source"):
        builder.complete(Recorder(mgr.client))
    assert kind_gvk(PartialObjectMetadata.of(Secret)) == kind_gvk(Secret)
