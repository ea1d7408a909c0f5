"""Sphinx configuration of the agefast guide, its API reference and man pages.

    python -m sphinx -W --keep-going -b html docs docs/_build/html
    python -m sphinx -W --keep-going -b doctest docs docs/_build/doctest
    python -m sphinx -W --keep-going -b man docs docs/_build/man
"""

import doctest
import importlib.metadata

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
    ("man/agefast-rekey", "agefast-rekey", "re-key age encrypted files for new recipients", [author], 1),
    ("man/agefast-tree", "agefast-tree", "encrypt, decrypt, re-key or verify a tree of files", [author], 1),
]
man_show_urls = False

