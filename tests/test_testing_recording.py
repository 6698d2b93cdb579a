"""pyctrl.testing.recording_writes: writes recorded through the client's seams, nothing else."""

from __future__ import annotations

from typing import cast

import pytest

from pyctrl.client import Client, ConfigMap, ObjectMeta
from pyctrl.client.fake import FakeClient
from pyctrl.testing import Write, recording_writes


def cm(name: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace="ns"), data={"k": "v"})


async def test_the_fakes_writes_are_recorded_dry_runs_included_reads_and_other_contexts_not() -> None:
    client = FakeClient(cm("old"))
    await client.create(cm("before"))  # before recording: not recorded
    with recording_writes(client) as writes, recording_writes(client) as inner:
        await client.get(ConfigMap, "old", namespace="ns")
        await client.list(ConfigMap, namespace="ns")
        await client.create(cm("new"), dry_run=True)
        await client.delete(cm("old"))
    assert inner == [Write("POST", "ConfigMap ns/new"), Write("DELETE", "ConfigMap ns/old")]
    assert writes == []  # the inner context recorded them: recording is scoped, not global
    assert len(client.core.write_observers) == 1  # installed once however often it is used


def test_a_client_it_cannot_see_into_is_refused_by_name() -> None:
    class Elsewhere:
        pass

    with (
        pytest.raises(TypeError, match="cannot record the writes of Elsewhere"),
        recording_writes(cast(Client, Elsewhere())),
    ):
        pass
