"""The public names of pyctrl.client and pyctrl.cache are exactly their ``__all__``."""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

from pyctrl.cache import Cache
from pyctrl.client import ApiClient, Client, Reader, Writer
from pyctrl.client.fake import FakeClient
from pyctrl.client.split import SplitClient

PUBLIC = ["pyctrl.client", "pyctrl.cache", "pyctrl.client.fake", "pyctrl.client.objects"]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_lists_every_public_name_and_each_resolves(name: str) -> None:
    module = importlib.import_module(name)
    for public_name in module.__all__:  # binds the names a lazy package imports on first read
        getattr(module, public_name)
    exported = set(module.__all__)
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType) and n != "annotations"
    }
    assert public == exported
    assert module.__all__ == sorted(module.__all__)


def test_the_core_names_are_public() -> None:
    from pyctrl import cache, client

    for name in (
        "ApiClient",
        "Client",
        "Reader",
        "Writer",
        "StatusWriter",
        "Scheme",
        "load_config",
        "NotFound",
        "Conflict",
        "MergeFrom",
        "GroupVersionKind",
        "KubeObject",
    ):
        assert name in client.__all__
    for name in ("Cache", "Informer", "DeletedFinalStateUnknown", "Store", "Watcher", "ByObject"):
        assert name in cache.__all__


def _static_conformance(api: ApiClient, fake: FakeClient, split: SplitClient, cache: Cache) -> list[Reader]:
    """mypy checks that every implementation satisfies the protocols (never called)."""
    clients: list[Client] = [api, fake, split]
    return [*clients, cache]


@pytest.mark.parametrize("impl", [ApiClient, FakeClient, SplitClient])
def test_every_client_implements_every_protocol_method_with_the_same_parameters(impl: type) -> None:
    for proto in (Reader, Writer):
        for name, member in vars(proto).items():
            if name.startswith("_") or not callable(member):
                continue
            ours = getattr(impl, name)
            assert inspect.iscoroutinefunction(ours) or inspect.isasyncgenfunction(ours), (
                f"{impl.__name__}.{name}"
            )
            theirs = inspect.signature(member).parameters
            mine = inspect.signature(ours).parameters
            if list(theirs) == ["args", "kwds"] or any(p.kind is p.VAR_KEYWORD for p in mine.values()):
                continue  # overloaded: mypy checks these signatures (see _static_conformance)
            assert list(mine) == list(theirs), f"{impl.__name__}.{name}"
    for name in ("status", "subresource"):
        assert callable(getattr(impl, name))
