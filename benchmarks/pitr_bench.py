"""``python -m benchmarks.pitr_bench``: what continuous AOF archiving (``backup.archive``) costs a
master, how far it lags under load, and how fast a restore to a point in time (``backup.pitr``) is.

Per repetition, interleaved (off, on, off, on, ...), a fresh redis-server with the multi-part AOF
and ``#TS`` annotations (``appendfsync everysec``, as the operator runs it) takes ``redis-benchmark
-t set`` (``--requests`` SETs of ``--value-size`` bytes over ``--clients`` connections, random keys):

- **off**: no archiver;
- **on**: the archiver as its own process shipping to versitygw on loopback (segments every
  ``--archive-timeout`` seconds); its status file is sampled every 0.5 s during the load for the
  lag (``lagSeconds``), then the time until it has everything written (catch-up) is taken.

After the last "on" repetition, its archive is restored to its last archived second: the time of
``restore_to_time`` (download with SHA-256 checks, assembly, ``redis-check-aof``) and of
redis-server loading the result (the replay), per MiB of increments replayed, extrapolated
linearly to a GiB (stated as such: the dataset here is tens of MiB, not a GiB).

Printed: SET/s of each repetition, medians, ``RATIO archive_write_throughput_vs_off`` (median on /
median off), the lag (max and median of the samples, catch-up seconds) and the restore figures.
Nothing is asserted. Everything started is stopped, also on failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from examples.rediscluster.backup.aof import AppendOnlyFiles
from examples.rediscluster.backup.archive import ArchiveStore, archive_prefix
from examples.rediscluster.backup.pitr import restore_to_time
from pyctrl.envtest import poll_until
from pyctrl.envtest.objectstore import ObjectStore
from tests.backup._archiving import AOF_ARGS, CLUSTER, NAMESPACE, ArchiverProcess
from tests.rediscluster._servers import RedisServer

BUCKET = "pitr-bench"
MiB = 1024 * 1024


def _set_throughput(server: RedisServer, args: argparse.Namespace) -> float:
    out = subprocess.run(
        [
            "redis-benchmark",
            "-h",
            server.host,
            "-p",
            str(server.port),
            "-t",
            "set",
            "-n",
            str(args.requests),
            "-c",
            str(args.clients),
            "-d",
            str(args.value_size),
            "-r",
            "1000000",
            "--csv",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] == "SET":
            return float(cells[1])
    raise RuntimeError(f"no SET line in redis-benchmark's output: {out!r}")


@dataclass
class Figures:
    rps: dict[str, list[float]] = field(default_factory=lambda: {"off": [], "on": []})
    lags: list[float] = field(default_factory=list)
    catch_up: list[float] = field(default_factory=list)
    archiver: ArchiverProcess | None = None  # the last "on" run's


def _sample_lag(archiver: ArchiverProcess, done: threading.Event, into: list[float]) -> None:
    while not done.wait(0.5):
        lag = archiver.status().get("lagSeconds")
        if lag is not None:
            into.append(float(lag))


def _one_run(
    mode: str, rep: int, base: Path, s3: ObjectStore, args: argparse.Namespace, *, figures: Figures
) -> RedisServer:
    server = RedisServer(f"{mode}-{rep}", base / f"{mode}-{rep}", extra=AOF_ARGS)
    server.start()
    if mode == "off":
        figures.rps["off"].append(_set_throughput(server, args))
        return server
    archiver = ArchiverProcess(server.dir, s3, BUCKET, prefix=f"rep{rep}/", timeout=args.archive_timeout)
    archiver.start()
    try:
        poll_until("the base archived", lambda: archiver.last_archived() > 0, 60)
        done, sampled = threading.Event(), list[float]()
        sampler = threading.Thread(target=_sample_lag, args=(archiver, done, sampled), daemon=True)
        sampler.start()
        try:
            figures.rps["on"].append(_set_throughput(server, args))
        finally:
            done.set()
            sampler.join()
        end = time.time()
        poll_until("the archive to catch up", lambda: archiver.last_archived() >= end, 300)
        figures.catch_up.append(time.time() - end)
        figures.lags += sampled
    finally:
        archiver.stop()
    figures.archiver = archiver
    return server


def _restore(s3: ObjectStore, archiver: ArchiverProcess, base: Path, servers: list[RedisServer]) -> None:
    os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = s3.access_key, s3.secret_key
    store = ArchiveStore.connect(s3.endpoint, BUCKET, archive_prefix(archiver.prefix, NAMESPACE, CLUSTER))
    out = base / "restored"
    started = time.monotonic()
    result = restore_to_time(store, archiver.last_archived(), AppendOnlyFiles(out / "appendonlydir"))
    assembled = time.monotonic() - started
    restored = RedisServer("restored", out, extra=AOF_ARGS)
    servers.append(restored)
    started = time.monotonic()
    restored.start()
    loaded = time.monotonic() - started
    keys = restored.client().dbsize()
    restored.terminate()
    mib = result.replayed_bytes / MiB
    print(
        f"restore to the last archived second: {mib:.1f} MiB of increments ({result.increments} "
        f"file(s)), {keys:,} keys: download+check+assemble+cut {assembled:.2f} s, "
        f"redis-server load {loaded:.2f} s"
    )
    per_mib = (assembled + loaded) / mib
    print(
        f"restore time per MiB replayed: {per_mib:.3f} s; extrapolated linearly to 1 GiB: "
        f"{per_mib * 1024:.0f} s (measured on {mib:.0f} MiB, not on a GiB)"
    )


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.pitr_bench")
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--requests", type=int, default=300_000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--archive-timeout", type=float, default=5.0)
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pitr-bench-"))
    s3 = ObjectStore(base / "s3")
    s3.start()
    figures = Figures()
    servers: list[RedisServer] = []
    try:
        s3.create_bucket(BUCKET)
        for rep in range(args.repetitions):
            for mode in ("off", "on"):
                servers.append(_one_run(mode, rep, base, s3, args, figures=figures))
                servers[-1].terminate()
                print(f"rep {rep} {mode:>3}: {figures.rps[mode][-1]:,.0f} SET/s", flush=True)
        off, on = statistics.median(figures.rps["off"]), statistics.median(figures.rps["on"])
        print(f"median SET/s: off {off:,.0f}, on {on:,.0f}")
        print(
            f"archive lag under load (status lagSeconds, every 0.5 s): max {max(figures.lags):.1f} s, "
            f"median {statistics.median(figures.lags):.1f} s; caught up "
            f"{statistics.median(figures.catch_up):.1f} s after the load (median); segments every "
            f"{args.archive_timeout:g} s"
        )
        assert figures.archiver is not None
        _restore(s3, figures.archiver, base, servers)
        print(f"RATIO archive_write_throughput_vs_off {on / off:.3f}")
    finally:
        for server in servers:
            server.terminate()
        s3.cleanup()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
