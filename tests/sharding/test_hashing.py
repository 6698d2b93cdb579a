"""Rendezvous hashing (pyctrl.sharding.hashing): balance and minimal movement, and the member
Leases' expiry rule (pyctrl.sharding.membership) on a manual clock."""

from __future__ import annotations

import pytest

from pyctrl.client.objects import Lease, LeaseSpec, ObjectMeta
from pyctrl.sharding import Peers, member_lease_name, object_key, rendezvous_owner
from pyctrl.sharding.hashing import score
from pyctrl.workqueue import FakeClock

KEYS = [object_key(f"ns-{i % 7}", f"cluster-{i}") for i in range(1000)]


def members(n: int) -> list[str]:
    return [f"operator-{i}_{i * 7919:08x}" for i in range(n)]


def owners(ms: list[str]) -> dict[str, str | None]:
    return {k: rendezvous_owner(k, ms) for k in KEYS}


@pytest.mark.parametrize("n", range(3, 11))
def test_each_member_owns_its_share_within_20_percent(n: int) -> None:
    counts = dict.fromkeys(members(n), 0)
    for owner in owners(members(n)).values():
        assert owner is not None
        counts[owner] += 1
    share = len(KEYS) / n
    assert all(0.8 * share <= c <= 1.2 * share for c in counts.values()), counts


@pytest.mark.parametrize("n", range(3, 11))
def test_a_leaving_member_moves_only_its_own_keys(n: int) -> None:
    ms = members(n)
    before = owners(ms)
    for leaving in ms:
        after = owners([m for m in ms if m != leaving])
        moved = {k for k in KEYS if before[k] != after[k]}
        assert moved == {k for k in KEYS if before[k] == leaving}
        # each moved key goes to the member with its next-highest score
        for k in moved:
            ranked = sorted((score(m, k), m) for m in ms)
            assert after[k] == ranked[-2][1]


@pytest.mark.parametrize("n", range(3, 10))
def test_a_joining_member_takes_keys_only_for_itself(n: int) -> None:
    ms, joining = members(n), "operator-new_0000beef"
    before, after = owners(ms), owners([*ms, joining])
    moved = {k for k in KEYS if before[k] != after[k]}
    assert moved
    assert all(after[k] == joining for k in moved)
    assert moved == {k for k in KEYS if after[k] == joining}


def test_owner_is_the_same_whatever_the_order_and_none_without_members() -> None:
    ms = members(5)
    assert owners(ms) == owners(list(reversed(ms)))
    assert rendezvous_owner("ns/a", []) is None


def lease(ring: str, identity: str, holder: str, renew: str, duration: int = 4) -> Lease:
    return Lease(
        metadata=ObjectMeta(name=member_lease_name(ring, identity), namespace="ns"),
        spec=LeaseSpec(holder_identity=holder, lease_duration_seconds=duration, renew_time=renew),
    )


def test_a_member_is_live_until_its_lease_stops_changing_for_its_duration_on_our_clock() -> None:
    clock = FakeClock()
    peers = Peers("ring", clock, default_duration=4.0)
    peers.observe([lease("ring", "a", "a", "t0"), lease("ring", "b", "b", "t0")])
    assert peers.live() == {"a", "b"}
    assert not peers.is_gone("a")
    clock.step(3.0)
    peers.observe([lease("ring", "a", "a", "t1"), lease("ring", "b", "b", "t0")])  # b stopped renewing
    clock.step(1.0)
    assert peers.live() == {"a"}
    assert peers.is_gone("b")
    assert not peers.is_gone("a")


def test_a_released_lease_is_gone_at_once_and_a_missing_one_after_the_default_duration() -> None:
    clock = FakeClock()
    peers = Peers("ring", clock, default_duration=4.0)
    peers.observe([lease("ring", "a", "", "t1")])
    assert peers.is_gone("a")
    assert peers.live() == frozenset()
    assert not peers.is_gone("never-seen")  # its timer starts now
    clock.step(4.0)
    assert peers.is_gone("never-seen")


def test_a_lease_unchanged_for_the_grace_is_garbage() -> None:
    clock = FakeClock()
    peers = Peers("ring", clock, default_duration=4.0)
    peers.observe([lease("ring", "a", "a", "t0"), lease("ring", "b", "b", "t0")])
    clock.step(12.0)
    peers.observe([lease("ring", "a", "a", "t9"), lease("ring", "b", "b", "t0")])
    assert [x.metadata.name for x in peers.garbage(12.0)] == [member_lease_name("ring", "b")]
