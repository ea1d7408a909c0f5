"""The one rule for tests of files without a name (O_TMPFILE): they need a
folder whose system and file system make them."""

import os

import pytest

from agefast.io import replace
from required import unavailable


def require_unnamed_files(directory) -> None:
    """Skip the test, with the reason, where `directory` cannot hold a file
    without a name: not Linux (no O_TMPFILE at all, as on the simulated
    platform, tests/test_platform.py), or a file system without it, where
    under AGEFAST_REQUIRE_TOOLS=1 it fails instead: CI's host must run these tests."""
    if not hasattr(os, "O_TMPFILE"):
        pytest.skip("O_TMPFILE is Linux's")
    folder = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with replace.unnamed_file(folder) as unnamed:
            if unnamed is not None:
                os.close(unnamed.fd)
                return
    finally:
        os.close(folder)
    unavailable(f"{directory} cannot hold a file without a name (O_TMPFILE)")
