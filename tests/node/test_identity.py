"""The ids a container runs as (``pyctrl.envtest.node.identity``), resolved as containerd does."""

from __future__ import annotations

import os
from typing import Any

import pytest

from pyctrl.envtest.node.identity import Credentials, credentials_for, home_for

UNKNOWN = 54321  # no passwd entry on any test host


def spec(**pod_sc: Any) -> dict[str, Any]:
    return {"securityContext": pod_sc}


def test_nothing_set_leaves_the_container_root() -> None:
    assert credentials_for({}, {}) is None
    assert credentials_for(spec(runAsNonRoot=False), {"securityContext": {}}) is None


def test_run_as_user_alone_takes_the_primary_group_of_the_image_user_or_zero() -> None:
    assert credentials_for(spec(runAsUser=UNKNOWN), {}) == Credentials(UNKNOWN, 0, (0,))
    root_groups = tuple(dict.fromkeys(os.getgrouplist("root", 0)))
    assert credentials_for(spec(runAsUser=0), {}) == Credentials(0, 0, root_groups)


def test_groups_in_order_without_repeats_and_the_container_overrides_the_pod() -> None:
    pod = spec(runAsUser=UNKNOWN, runAsGroup=3000, fsGroup=2000, supplementalGroups=[4000, 3000])
    assert credentials_for(pod, {}) == Credentials(UNKNOWN, 3000, (3000, 4000, 2000))
    mine = {"securityContext": {"runAsUser": UNKNOWN + 1, "runAsGroup": 7}}
    assert credentials_for(pod, mine) == Credentials(UNKNOWN + 1, 7, (7, 4000, 3000, 2000))


def test_fs_group_alone_adds_a_group_to_root() -> None:
    assert credentials_for(spec(fsGroup=2000), {}) == Credentials(None, None, (2000,))


def test_strict_policy_leaves_out_the_image_users_groups() -> None:
    strict = credentials_for(spec(runAsUser=0, runAsGroup=5, supplementalGroupsPolicy="Strict"), {})
    assert strict == Credentials(0, 5, (5,))


@pytest.mark.parametrize("bad", [-1, "1000", True, 1.5])
def test_bad_ids_are_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match=r"securityContext\.runAsUser must be a non-negative integer"):
        credentials_for(spec(runAsUser=bad), {})


def test_setpriv_arguments_and_home() -> None:
    assert Credentials(5, 6, (6, 7)).setpriv_args() == ["--groups=6,7", "--regid=6", "--reuid=5"]
    assert Credentials(None, None, ()).setpriv_args() == ["--clear-groups"]
    assert home_for(None) == home_for(0) == "/root"
    assert home_for(UNKNOWN) == "/"
