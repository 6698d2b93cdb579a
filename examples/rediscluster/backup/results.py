"""The worker's results as a backup Job's pods report them (termination messages), pure.

Each worker container ends with one JSON line in its termination message (``worker``): the
main container's is the backup's result; in cluster mode each ``shard-<i>`` init container's is
that shard's. A container that crashed has its log tail there instead (``FallbackToLogsOnError``),
read as ``{"error": <tail>}``.
"""

from __future__ import annotations

import json
from typing import Any

from examples.rediscluster.api.backup import ShardBackup
from pyctrl.client import Pod

__all__ = ["result_of", "shard_results", "with_results"]


def _statuses(pod: Pod) -> list[Any]:
    """The pod's init and main container statuses."""
    if pod.status is None:
        return []
    return [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])]


def shard_results(pods: list[Pod]) -> dict[int, dict[str, Any]]:
    """Shard index -> the result of its ``shard-<i>`` container that succeeded (cluster mode)."""
    out: dict[int, dict[str, Any]] = {}
    for pod in pods:
        for status in (pod.status.init_container_statuses if pod.status else None) or []:
            terminated = (status.state or {}).get("terminated") or {}
            if terminated.get("exitCode") != 0:
                continue
            try:
                parsed = json.loads(str(terminated.get("message") or "").strip().splitlines()[-1])
            except (ValueError, IndexError):
                continue
            if isinstance(parsed, dict) and isinstance(parsed.get("shard"), int):
                out[parsed["shard"]] = parsed
    return out


def with_results(shards: list[ShardBackup], results: dict[int, dict[str, Any]]) -> list[ShardBackup]:
    return [
        s.model_copy(
            update={
                "location": results[s.index]["location"],
                "size_bytes": int(results[s.index]["sizeBytes"]),
                "sha256": results[s.index]["sha256"],
            }
        )
        if s.index in results
        else s
        for s in shards
    ]


def result_of(pods: list[Pod]) -> dict[str, Any] | None:
    """The worker's JSON from the newest terminated container of a Job's pods (None while none
    reported): the main container's on success, the failing (init) container's otherwise."""
    newest: tuple[str, dict[str, Any]] | None = None
    for pod in pods:
        for status in _statuses(pod):
            terminated = (status.state or {}).get("terminated") or {}
            message = str(terminated.get("message") or "").strip()
            if not message:
                continue
            try:
                parsed = json.loads(message.splitlines()[-1])
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):  # a crash: FallbackToLogsOnError put the log tail there
                parsed = {"error": message[-500:]}
            finished = str(terminated.get("finishedAt") or "")
            # finishedAt has a one-second resolution: on a tie the later container wins (statuses
            # are listed init containers first, in the order they ran, then the main container)
            if newest is None or finished >= newest[0]:
                newest = (finished, parsed)
    return None if newest is None else newest[1]
