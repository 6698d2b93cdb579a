"""The public names of pyctrl.client and pyctrl.cache are exactly their ``__all__``."""

from __future__ import annotations

import importlib
import types

import pytest

PUBLIC = ["pyctrl.client", "pyctrl.cache", "pyctrl.client.fake", "pyctrl.client.objects"]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_lists_every_public_name_and_each_resolves(name: str) -> None:
    module = importlib.import_module(name)
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
