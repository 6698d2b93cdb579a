"""Container logs by instance (the kubelet's ``/var/log/pods/<pod>/<container>/<n>.log`` rotation,
kept in one file per container).

A container's stdout and stderr go, appended across restarts, to ``<pod dir>/<container>.log`` (the
file the ``pyctrl.dev/log-dir`` annotation points at). Beside it, ``.<container>.instances`` holds
one line per started instance: the log's size when that instance started. So the current
instance's log is the file from the last offset on, the previous instance's the bytes between the
last two offsets — what ``kubectl logs`` and ``kubectl logs --previous`` show.

Guarantees:
- ``begin_instance`` records where the next instance's output starts; a container that could not
  be started records nothing (as the kubelet keeps no log for it);
- ``instance_range(previous=False)`` is the latest instance's ``(start, None)`` (to the end of the
  file, still growing while it runs); ``previous=True`` the one before; ``None`` when there is no
  such instance;
- ``select`` applies ``tailLines`` (the last N lines, a final line without newline counted) and
  ``limitBytes`` (the first N bytes of what remains), as the kubelet's log options do.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["begin_instance", "instance_count", "instance_range", "log_size", "read_range", "select"]


def _index(log_path: Path) -> Path:
    return log_path.with_name(f".{log_path.stem}.instances")


def log_size(log_path: Path) -> int:
    try:
        return log_path.stat().st_size
    except FileNotFoundError:
        return 0


def begin_instance(log_path: Path, offset: int) -> None:
    """Record that an instance whose output starts at byte ``offset`` of ``log_path`` started."""
    with _index(log_path).open("a") as index:
        index.write(f"{offset}\n")


def _offsets(log_path: Path) -> list[int]:
    try:
        text = _index(log_path).read_text()
    except FileNotFoundError:
        return []
    return [int(line) for line in text.split() if line.isdigit()]


def instance_count(log_path: Path) -> int:
    return len(_offsets(log_path))


def instance_range(log_path: Path, *, previous: bool) -> tuple[int, int | None] | None:
    """(start, end or None for "to the end") of the latest instance's log, or of the one before."""
    offsets = _offsets(log_path)
    if previous:
        return (offsets[-2], offsets[-1]) if len(offsets) >= 2 else None
    return (offsets[-1], None) if offsets else None


def read_range(log_path: Path, start: int, end: int | None) -> bytes:
    try:
        with log_path.open("rb") as f:
            f.seek(start)
            return f.read() if end is None else f.read(max(end - start, 0))
    except FileNotFoundError:
        return b""


def select(data: bytes, *, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    """The last ``tail_lines`` lines of ``data``, then at most ``limit_bytes`` of them."""
    if tail_lines is not None:
        if tail_lines == 0:
            data = b""
        else:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-tail_lines:])
    if limit_bytes is not None:
        data = data[:limit_bytes]
    return data
