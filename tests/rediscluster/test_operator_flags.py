"""The operator's command line (``python -m examples.rediscluster``): ``--cluster-domain``."""

from __future__ import annotations

import pytest

from examples.rediscluster.__main__ import parse_args


def test_the_cluster_domain_defaults_to_cluster_local_and_takes_a_dns_name() -> None:
    assert parse_args([]).cluster_domain == "cluster.local"
    assert parse_args(["--cluster-domain", "k8s.example.org"]).cluster_domain == "k8s.example.org"


@pytest.mark.parametrize("bad", ["", "Cluster.Local", "cluster.local.", "x-.local", "a..b", "under_score"])
def test_a_cluster_domain_that_is_no_dns_name_is_refused(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--cluster-domain", bad])
    assert exc.value.code == 2
    assert (
        f"--cluster-domain must be a DNS name such as cluster.local, not {bad!r}" in capsys.readouterr().err
    )
