"""Sphinx configuration of the pyctrl guide (``make docs``; warnings are errors)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# {program-output} runs `python ...`: make that the interpreter building the docs (the venv's),
# started in the repository root so the examples import pyctrl and find crds/.
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
