"""The one rule for tests of files without a name (O_TMPFILE): they need a
folder whose system and file system make them."""

import os

from agefast.io import replace
from required import unavailable


def require_unnamed_files(directory) -> None:
    """Skip the test, with the reason, where `directory` cannot hold a file
    without a name (not Linux, or a file system without O_TMPFILE); under
    AGEFAST_REQUIRE_TOOLS=1 fail it instead: CI's host must run these tests."""
    unnamed = replace._Unnamed.create(str(directory))
    if unnamed is not None:
        os.close(unnamed.fd)
        unnamed.close()
        return
    unavailable(f"{directory} cannot hold a file without a name (O_TMPFILE)")
