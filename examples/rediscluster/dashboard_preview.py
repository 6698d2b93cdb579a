"""``python -m examples.rediscluster.dashboard_preview [--check]``: a preview of the Grafana
dashboard's layout for the docs, drawn as SVG from ``charts/rediscluster-operator/files/dashboard.json``.

Grafana does not run here, so this is no screenshot: each panel is a box at its ``gridPos`` (24
columns; rows drawn 12 px high, a compact map of Grafana's 30) with its title, its type and its
first query. The
output depends only on the dashboard (deterministic); ``--check`` writes nothing and exits 1 when
``docs/guide/dashboard-preview.svg`` is stale (a test runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

__all__ = ["DASHBOARD", "PREVIEW", "main", "render"]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "rediscluster-operator" / "files" / "dashboard.json"
PREVIEW = ROOT / "docs" / "guide" / "dashboard-preview.svg"
_COLUMN, _ROW, _GAP = 40, 12, 6  # px: a grid column, a grid row (compact: Grafana draws 30), the gap
_QUERY_CHARS = 62
_MODULE = "examples.rediscluster.dashboard_preview"


def _clip(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _panel(panel: dict[str, Any]) -> str:
    grid = panel["gridPos"]
    x, y = grid["x"] * _COLUMN + _GAP, grid["y"] * _ROW + _GAP
    w, h = grid["w"] * _COLUMN - _GAP, grid["h"] * _ROW - _GAP
    targets = panel.get("targets") or [{}]
    query = " ".join(str(targets[0].get("expr", "")).split())
    more = f" (+{len(targets) - 1} more)" if len(targets) > 1 else ""
    lines = [
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" fill="#181b1f" stroke="#34373c"/>',
        f'<text x="{x + 10}" y="{y + 22}" fill="#ccccdc" font-size="14" font-weight="bold">'
        f"{escape(panel['title'])}</text>",
        f'<text x="{x + 10}" y="{y + 40}" fill="#8e8e8e" font-size="11">{escape(panel["type"])}{more}</text>',
        f'<text x="{x + 10}" y="{y + h - 12}" fill="#6e9fff" font-size="11" font-family="monospace">'
        f"{escape(_clip(query, _QUERY_CHARS))}</text>",
    ]
    return "\n".join(lines)


def render(dashboard: dict[str, Any]) -> str:
    """The SVG text of ``dashboard``'s layout."""
    panels = dashboard["panels"]
    width = 24 * _COLUMN + _GAP
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) * _ROW + _GAP + 40
    variables = ", ".join(f"${v['name']}" for v in dashboard.get("templating", {}).get("list", []))
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f'<rect width="{width}" height="{height}" fill="#111217"/>',
        f'<text x="{_GAP + 4}" y="{height - 14}" fill="#8e8e8e" font-size="12">'
        f"{escape(dashboard['title'])} (variables {escape(variables)}): layout drawn from "
        "dashboard.json, not a Grafana screenshot</text>",
    ]
    return "\n".join([*head, *(_panel(p) for p in panels), "</svg>"]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.rediscluster.dashboard_preview")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when stale")
    args = parser.parse_args(argv)
    text = render(json.loads(DASHBOARD.read_text()))
    if args.check:
        if not PREVIEW.exists() or PREVIEW.read_text() != text:
            print(f"stale: {PREVIEW.relative_to(ROOT)} (run python -m {_MODULE})", file=sys.stderr)
            return 1
        return 0
    PREVIEW.write_text(text)
    print(f"wrote {PREVIEW.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
