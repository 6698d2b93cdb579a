"""pyctrl.client.selectors: label/field selector grammar, rendering and matching."""

from __future__ import annotations

import pytest

from pyctrl.client import FieldSelector, LabelSelector, Selector
from pyctrl.client.objects import LabelSelectorRequirement


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),
        ("app in (web, db)", {"app": "db"}, True),
        ("app notin (web,db)", {"app": "db"}, False),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("n>3", {"n": "4"}, True),
        ("n<3", {"n": "4"}, False),
        ("app=web,tier in (fe),!legacy", {"app": "web", "tier": "fe"}, True),
        ("example.com/role=x", {"example.com/role": "x"}, True),
    ],
)
def test_the_full_label_selector_grammar_is_accepted(
    text: str, labels: dict[str, str], expected: bool
) -> None:
    assert Selector.parse(text).matches(labels) is expected


@pytest.mark.parametrize("text", ["app=web", "a in (x,y),!b,c!=d", "k,n>3"])
def test_rendering_parses_back_to_the_same_selector(text: str) -> None:
    sel = Selector.parse(text)
    assert Selector.parse(str(sel)) == sel


@pytest.mark.parametrize("text", ["app in (", "=x", "a in ()", "bad key!=1", "n>x", "a=b=c"])
def test_malformed_selectors_raise_value_error_naming_the_clause(text: str) -> None:
    with pytest.raises(ValueError, match=r"selector|operator|label|integer|needs"):
        Selector.parse(text)


def test_the_empty_selector_matches_everything() -> None:
    assert Selector.parse("").matches({"a": "b"})
    assert Selector().matches(None)
    assert not Selector()


def test_a_label_selector_object_converts_match_labels_and_expressions() -> None:
    spec = LabelSelector(
        match_labels={"app": "redis"},
        match_expressions=[LabelSelectorRequirement(key="role", operator="In", values=["master", "replica"])],
    )
    sel = Selector.from_label_selector(spec)
    assert sel.matches({"app": "redis", "role": "master"})
    assert not sel.matches({"app": "redis", "role": "sentinel"})
    with pytest.raises(ValueError, match="operator"):
        Selector.from_label_selector({"matchExpressions": [{"key": "a", "operator": "Near"}]})


def test_field_selectors_parse_render_and_match() -> None:
    sel = FieldSelector.parse("metadata.name=a,status.phase!=Failed")
    assert str(sel) == "metadata.name=a,status.phase!=Failed"
    assert sel.matches({"metadata.name": "a", "status.phase": "Running"})
    assert not sel.matches({"metadata.name": "a", "status.phase": "Failed"})
    with pytest.raises(ValueError, match="field selector"):
        FieldSelector.parse("nonsense")
