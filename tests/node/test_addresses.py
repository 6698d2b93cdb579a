"""Loopback Pod addresses: one per Pod, inside 127.0.0.0/8, not reused at once, one /16 per node."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from pyctrl.envtest.node.addresses import AddressesExhausted, AddressPool, claim_block


def test_addresses_start_at_127_0_1_1_and_are_distinct_loopback_addresses() -> None:
    pool = AddressPool()
    got = [pool.allocate(f"uid-{i}") for i in range(600)]
    assert got[0] == "127.0.1.1"
    assert len(set(got)) == 600
    assert pool.node_ip == "127.0.0.1"
    assert pool.node_ip not in got
    for address in got:
        ip = ipaddress.IPv4Address(address)
        assert ip in ipaddress.IPv4Network("127.0.0.0/8")
        assert ip.packed[3] not in (0, 255)
        assert ip.packed[2] != 0


def test_the_same_pod_asking_twice_gets_the_same_address() -> None:
    pool = AddressPool()
    assert pool.allocate("a") == pool.allocate("a")
    assert pool.in_use() == {"a": "127.0.1.1"}


def test_a_released_address_is_not_handed_out_again_at_once() -> None:
    pool = AddressPool()
    first = pool.allocate("a")
    pool.release("a")
    assert pool.allocate("b") != first
    assert "a" not in pool.in_use()


def test_allocation_wraps_around_to_released_addresses_when_the_range_is_used_up() -> None:
    pool = AddressPool()
    total = 255 * 254
    for i in range(total):
        pool.allocate(str(i))
    with pytest.raises(AddressesExhausted):
        pool.allocate("one-too-many")
    pool.release("7")
    assert pool.allocate("again") == "127.0.1.8"


def test_reserve_adopts_an_address_from_a_pod_status_and_refuses_taken_or_foreign_ones() -> None:
    pool = AddressPool(block=3)
    assert pool.reserve("a", "127.3.1.9")
    assert pool.reserve("a", "127.3.1.9")
    assert not pool.reserve("b", "127.3.1.9")  # taken
    assert not pool.reserve("c", "127.4.1.1")  # another node's block
    assert not pool.reserve("c", "10.0.0.1")
    assert not pool.reserve("c", "127.3.0.5")
    assert pool.allocate("d") == "127.3.1.10"  # continues after the adopted one


def test_claim_block_gives_each_holder_its_own_block_until_released(tmp_path: Path) -> None:
    first, handle1 = claim_block(tmp_path)
    second, handle2 = claim_block(tmp_path)
    try:
        assert (first, second) == (0, 1)
    finally:
        handle1.close()
    third, handle3 = claim_block(tmp_path)
    handle2.close()
    handle3.close()
    assert third == 0
