"""Sphinx configuration of the pyctrl guide (``make docs``; warnings are errors)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# {program-output} runs `python ...`: make that the interpreter building the docs (the venv's);
# each such directive sets `:cwd: /..`, the repository root, as the pages' commands assume.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

project = "pyctrl"
author = "the pyctrl authors"
copyright = "the pyctrl authors, Apache-2.0"
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.graphviz",
    "sphinxcontrib.programoutput",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "local-node.md"]  # local-node.md is included by guide/envtest.md

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

graphviz_output_format = "svg"
graphviz_dot_args = ["-Gfontname=sans-serif", "-Nfontname=sans-serif", "-Efontname=sans-serif"]

programoutput_prompt_template = "$ {command}\n{output}"

html_theme = "furo"
html_title = "pyctrl: controller-runtime's internals, in Python"


# -- docstrings ---------------------------------------------------------------------------------
# pyctrl's docstrings are reStructuredText written the way people write plain text: a list right
# under "Guarantees:" and plurals such as ``Request``s. Both are errors in strict RST; this
# rewrites them before autodoc parses them (a blank line before a list that follows a line of
# text, an escaped space before a letter glued to an inline literal), nothing else.
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")
_GLUED_LITERAL = re.compile(r"(?<![`\w])(``[^`\s][^`]*``)(?=[A-Za-z])")


def _normalize_docstring(  # noqa: PLR0917 (the signature of Sphinx's autodoc-process-docstring event)
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    out: list[str] = []
    for line in lines:
        previous = out[-1] if out else ""
        starts_list = _LIST_ITEM.match(line) and previous.strip() and not _LIST_ITEM.match(previous)
        if starts_list and not (previous.startswith((" ", "\t")) and line.startswith((" ", "\t"))):
            out.append("")
        out.append(_GLUED_LITERAL.sub(r"\1\\ ", line))
    lines[:] = out


def setup(app: Sphinx) -> None:
    app.connect("autodoc-process-docstring", _normalize_docstring)
