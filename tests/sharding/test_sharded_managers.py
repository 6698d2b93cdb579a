"""Three sharded manager processes (tests/sharding/member_process.py) on the real control plane,
30 ConfigMaps: each is reconciled by exactly one member, the one rendezvous hashing picks; a
SIGKILLed member's objects move to the others within the lease duration plus a margin; a member
that joins takes over its objects, each released (the fence's release hook) by its previous
holder before the newcomer reconciles it; a deleted object is released by its holder; and over
the whole run no ConfigMap is ever reconciled by two members at once (every reconcile's begin and
end are recorded on the system-wide monotonic clock; a killed member's open reconcile ends at the
kill).

Short timings (lease duration 6 s, renew deadline 4 s, retry period 1 s). MARGIN covers a loaded
machine: the survivors' list of the ring (one retry period), the claim, the informer's delivery
and the first reconcile; the measured takeover is printed (``-s``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pyctrl.envtest import Environment, poll_until
from pyctrl.envtest._process import pid_alive
from pyctrl.sharding import object_key, rendezvous_owner

pytestmark = pytest.mark.controlplane

LEASE, RENEW, RETRY = 6.0, 4.0, 1.0
MARGIN = 10.0
OBJECTS = 30
REPO = Path(__file__).parents[2]


@dataclass
class Member:
    identity: str
    proc: subprocess.Popen[bytes]
    out: Path

    def facts(self) -> list[tuple[str, float, str]]:
        if not self.out.exists():
            return []
        lines = [line.split() for line in self.out.read_text().splitlines()]
        return [(p[0], float(p[1]), p[2] if len(p) > 2 else "") for p in lines if len(p) >= 2]

    def reconciled(self, after: float = 0.0) -> dict[str, list[float]]:
        out: dict[str, list[float]] = defaultdict(list)
        for fact, t, name in self.facts():
            if fact == "begin" and t > after:
                out[name].append(t)
        return out

    def log(self) -> str:
        return (self.out.parent / f"{self.identity}.log").read_text(errors="replace")[-3000:]


@pytest.fixture
def spawn(kubeconfig: Path, namespace: str, tmp_path: Path) -> Iterator[Callable[[str], Member]]:
    """Start member processes; every one is killed and reaped in teardown, checked by pid."""
    started: list[Member] = []

    def start(identity: str) -> Member:
        out, log = tmp_path / f"{identity}.facts", (tmp_path / f"{identity}.log").open("wb")
        argv = [sys.executable, "-m", "tests.sharding.member_process", "--kubeconfig", str(kubeconfig)]
        argv += ["--namespace", namespace, "--identity", identity, "--out", str(out)]
        argv += ["--timings", f"{LEASE},{RENEW},{RETRY}"]
        proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        started.append(Member(identity, proc, out))
        return started[-1]

    try:
        yield start
    finally:
        for m in started:
            if m.proc.poll() is None:
                m.proc.kill()
            m.proc.wait(timeout=30)
        alive = [m.proc.pid for m in started if pid_alive(m.proc.pid)]
        assert not alive, f"member processes left running: {alive}"


def overlaps(members: list[Member], killed: dict[str, float]) -> list[str]:
    """Reconciles of one object by two members at once (intervals [begin, end] that intersect)."""
    intervals: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for m in members:
        open_: dict[str, float] = {}
        for fact, t, name in m.facts():
            if fact == "begin":
                open_[name] = t
            elif fact == "end" and name in open_:
                intervals[name].append((open_.pop(name), t, m.identity))
        for name, begun in open_.items():  # still running: until now, or until the kill
            intervals[name].append((begun, killed.get(m.identity, time.monotonic()), m.identity))
    bad = []
    for name, spans in intervals.items():
        spans.sort()
        latest = spans[0]  # the span reaching furthest so far
        for span in spans[1:]:
            if span[0] < latest[1] and span[2] != latest[2]:
                bad.append(f"{name}: {latest[2]} {latest[:2]} and {span[2]} {span[:2]}")
            if span[1] > latest[1]:
                latest = span
    return bad


def test_three_members_share_thirty_objects_and_a_killed_members_objects_move_without_overlap(
    envtest: Environment, namespace: str, spawn: Callable[[str], Member]
) -> None:
    names = [f"object-{i:02d}" for i in range(OBJECTS)]
    for name in names:
        envtest.http.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            {"metadata": {"name": name, "labels": {"shard-test": "yes"}}},
        )
    members = [spawn(identity) for identity in ("member-a", "member-b", "member-c")]
    ids = [m.identity for m in members]
    owner = {n: rendezvous_owner(object_key(namespace, n), ids) for n in names}

    def annotated_as_hashed() -> bool:
        for m in members:
            assert m.proc.poll() is None, f"{m.identity} exited: {m.log()}"
        items = envtest.http.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")["items"]
        held = {i["metadata"]["name"]: (i["metadata"].get("annotations") or {}) for i in items}
        return all(held[n].get("shard.pyctrl.io/recording") == owner[n] for n in names)

    poll_until(
        "every object claimed by its rendezvous owner",
        annotated_as_hashed,
        120,
        interval=0.2,
        on_timeout=lambda: "".join(f"\n{m.identity}: {m.log()}" for m in members),
    )
    steady = time.monotonic()

    def each_reconciled_twice_since(t: float, by: list[Member]) -> bool:
        counts: dict[str, int] = defaultdict(int)
        for m in by:
            for name, times in m.reconciled(after=t).items():
                counts[name] += len(times)
        return all(counts[n] >= 2 for n in names)

    poll_until(
        "every object reconciled since steady", lambda: each_reconciled_twice_since(steady, members), 60
    )
    for m in members:
        mine = set(m.reconciled(after=steady))
        assert mine == {n for n in names if owner[n] == m.identity}, m.identity
    assert all(any(owner[n] == i for n in names) for i in ids)

    victim, survivors = members[0], members[1:]
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=30)
    killed_at = time.monotonic()
    moved = [n for n in names if owner[n] == victim.identity]
    new_owner = {n: rendezvous_owner(object_key(namespace, n), ids[1:]) for n in moved}

    def moved_and_reconciled() -> bool:
        for m in survivors:
            assert m.proc.poll() is None, f"{m.identity} exited: {m.log()}"
        return all(
            n in m.reconciled(after=killed_at) for n in moved for m in survivors if new_owner[n] == m.identity
        )

    poll_until("the killed member's objects reconciled by the others", moved_and_reconciled, LEASE + MARGIN)
    took = max(
        min(m.reconciled(after=killed_at)[n]) for n in moved for m in survivors if new_owner[n] == m.identity
    )
    print(
        f"\n{len(moved)} objects of the killed member reconciled elsewhere "
        f"{took - killed_at:.2f}s after SIGKILL"
    )
    for m in survivors:  # a survivor never reconciles an object it does not own
        assert set(m.reconciled(after=killed_at)) <= {
            n for n in names if (new_owner.get(n) or owner[n]) == m.identity
        }
    assert overlaps(members, {victim.identity: killed_at}) == []

    newcomer = joins_and_takes_over(envtest, namespace, spawn, survivors, {**owner, **new_owner})
    assert overlaps([*members, newcomer], {victim.identity: killed_at}) == []
    # the controller's own predicate (a label selector) also bounds what the members claim
    root_ca = envtest.http.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt")
    assert "shard.pyctrl.io/recording" not in (root_ca["metadata"].get("annotations") or {})


def joins_and_takes_over(
    envtest: Environment,
    namespace: str,
    spawn: Callable[[str], Member],
    members: list[Member],
    holder: dict[str, str | None],
) -> Member:
    """A member joins ``members`` (who hold the objects as ``holder`` says): each object it now
    owns is released (the fence's release hook) by its previous holder before the newcomer's
    first reconcile of it, and that holder never reconciles it again; a deleted object is
    released by its holder. Returns the newcomer."""
    names = sorted(holder)
    joined_at = time.monotonic()
    newcomer = spawn("member-d")
    ring = [*(m.identity for m in members), newcomer.identity]
    final = {n: rendezvous_owner(object_key(namespace, n), ring) for n in names}
    handed = [n for n in names if final[n] == newcomer.identity]
    assert handed, "the newcomer owns some of the objects"
    poll_until(
        "the newcomer's objects reconciled by it",
        lambda: all(n in newcomer.reconciled(after=joined_at) for n in handed),
        120,
        on_timeout=newcomer.log,
    )
    by_id = {m.identity: m for m in members}
    for n in handed:
        releases = [t for fact, t, name in by_id[str(holder[n])].facts() if fact == "release" and name == n]
        assert releases, f"{n}: no release hook on {holder[n]}"
        assert releases[-1] < min(newcomer.reconciled(after=joined_at)[n]), n
        assert all(t < releases[-1] for t in by_id[str(holder[n])].reconciled().get(n, [])), n
    kept = next(n for n in names if final[n] != newcomer.identity)
    envtest.http.request("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/{kept}")

    def deletion_released() -> bool:
        return any(f == "release" and name == kept for f, _, name in by_id[str(final[kept])].facts())

    poll_until("the release hook of a deleted object", deletion_released, 60)
    return newcomer
