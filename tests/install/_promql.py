"""The metric names the chart's dashboard and alert rules query (``up`` is Prometheus' own).

Names are what precedes a selector, a closing parenthesis or the end, once strings, range
durations and grouping clauses (``by (...)``, ``on (...)``: label names) are removed; PromQL
keywords and functions are dropped, and ``_bucket`` is folded into its histogram's name."""

from __future__ import annotations

import json
import re

import yaml

from tests.install.conftest import CHART

__all__ = ["alert_exprs", "dashboard_exprs", "metric_names", "named_by_dashboard_and_alerts"]

_KEYWORDS = {"and", "or", "unless", "bool", "group_left", "group_right", "le", "up"}
_FUNCTIONS = {
    "max", "min", "sum", "count", "rate", "increase", "histogram_quantile", "absent", "deriv", "label_values",
    "time",
}  # fmt: skip
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    return exprs + [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]


def alert_exprs() -> list[str]:
    alerts = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    return [rule["expr"] for group in alerts["groups"] for rule in group["rules"]]


def metric_names(exprs: list[str]) -> set[str]:
    names: set[str] = set()
    for expr in exprs:
        text = re.sub(r'"[^"]*"', '""', expr)  # strings
        text = re.sub(r"\[[^\]]*\]", "", text)  # range durations
        text = _GROUPING.sub("", text)  # label names
        names.update(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{|\)|$|\s)", text))
    return {re.sub(r"_bucket$", "", n) for n in names - _KEYWORDS - _FUNCTIONS if "_" in n}


def named_by_dashboard_and_alerts() -> set[str]:
    return metric_names(dashboard_exprs() + alert_exprs())
