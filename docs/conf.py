"""Sphinx configuration of the agefast guide, its API reference and man pages.

    python -m sphinx -W --keep-going -b html docs docs/_build/html
    python -m sphinx -W --keep-going -b doctest docs docs/_build/doctest
    python -m sphinx -W --keep-going -b man docs docs/_build/man
"""

import doctest
import importlib.metadata
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent

project = "agefast"
author = "the agefast authors"
copyright = "the agefast authors"
release = importlib.metadata.version("agefast")
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]

# Markdown stays Markdown: definition lists carry the man pages' flags, and
# headings get anchors so that pages can link to each other's sections.
myst_enable_extensions = ["deflist", "colon_fence"]
myst_heading_anchors = 3

# Docstrings put names in single backticks, as the Markdown pages do.
default_role = "literal"
# "--armor" stays two hyphens in prose and in the man pages, not an en dash.
smartquotes = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"

# Examples run exactly as written; an example that raises shows its
# exception's type, and its message may change without breaking the page.
doctest_default_flags = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL

html_theme = "furo"
html_title = f"agefast {release}"
html_static_path = []

man_pages = [
    ("man/agefast", "agefast", "simple, modern, and secure file encryption", [author], 1),
    ("man/agefast-keygen", "agefast-keygen", "generate age key pairs", [author], 1),
    ("man/agefast-inspect", "agefast-inspect", "inspect age encrypted files", [author], 1),
]
man_show_urls = False

# Pages another branch is still writing. The guide's table of contents names
# each of them only once its file is in docs/, so the build passes with -W
# both before and after that branch is merged.
PAGES_FROM_OTHER_BRANCHES = ("data",)


def _list_only_present_pages(app, docname, source):
    if docname != root_doc:
        return
    for page in PAGES_FROM_OTHER_BRANCHES:
        if not (DOCS / f"{page}.md").exists():
            source[0] = re.sub(rf"^{re.escape(page)}\n", "", source[0], flags=re.M)


def setup(app):
    app.connect("source-read", _list_only_present_pages)
