"""The intent annotations parsed (``api.intents``): what each value means, and a clear error
naming the annotation for what cannot be understood."""

from __future__ import annotations

import pytest

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.intents import (
    FENCED_PODS,
    HIBERNATION,
    SWITCHOVER_TO,
    InvalidIntent,
    fenced_pods,
    hibernation,
    switchover_to,
    unsupported_in_cluster_mode,
)


def annotated(**annotations: str) -> RedisCluster:
    return RedisCluster.model_validate(
        {
            "apiVersion": "redis.pyctrl.dev/v1alpha1",
            "kind": "RedisCluster",
            "metadata": {"name": "rc", "namespace": "ns", "annotations": annotations},
            "spec": {},
        }
    )


def test_no_annotation_means_no_intent() -> None:
    rc = annotated()
    assert fenced_pods(rc) == frozenset()
    assert hibernation(rc) is False
    assert switchover_to(rc) is None
    assert unsupported_in_cluster_mode(rc) is None


def test_values_that_are_understood() -> None:
    rc = annotated(**{FENCED_PODS: '["rc-1", "rc-2"]', HIBERNATION: "On", SWITCHOVER_TO: " rc-2 "})
    assert fenced_pods(rc) == {"rc-1", "rc-2"}
    assert hibernation(rc) is True
    assert switchover_to(rc) == "rc-2"
    assert hibernation(annotated(**{HIBERNATION: "off"})) is False
    assert fenced_pods(annotated(**{FENCED_PODS: "[]"})) == frozenset()


@pytest.mark.parametrize("text", ["rc-1", '{"rc-1": true}', "[1]", '[""]', "[rc-1]"])
def test_a_malformed_fenced_list_names_the_annotation(text: str) -> None:
    with pytest.raises(InvalidIntent, match=f"annotation {FENCED_PODS} must be a JSON list of pod names"):
        fenced_pods(annotated(**{FENCED_PODS: text}))


def test_a_malformed_hibernation_names_the_annotation() -> None:
    with pytest.raises(InvalidIntent, match=f"annotation {HIBERNATION} must be 'on' or 'off', not 'yes'"):
        hibernation(annotated(**{HIBERNATION: "yes"}))


def test_cluster_mode_names_the_intents_it_does_not_act_on() -> None:
    message = unsupported_in_cluster_mode(annotated(**{HIBERNATION: "on", SWITCHOVER_TO: "rc-1"}))
    assert message is not None
    assert message.startswith(f"mode: cluster does not act on {HIBERNATION}, {SWITCHOVER_TO} yet")


def test_cluster_mode_does_not_name_values_that_ask_for_nothing() -> None:
    assert unsupported_in_cluster_mode(annotated(**{HIBERNATION: "off", FENCED_PODS: "[]"})) is None
    message = unsupported_in_cluster_mode(annotated(**{HIBERNATION: "off", FENCED_PODS: '["rc-1"]'}))
    assert message is not None
    assert message.startswith(f"mode: cluster does not act on {FENCED_PODS} yet")
