"""Running a script where Python reports what it can only print."""

import subprocess
import sys


def nothing_ignored(script: str) -> None:
    """Run `script` in a new interpreter in development mode (-X dev), where
    an exception raised in a finaliser is printed as "Exception ignored in
    ..." (Python 3.13 prints it without -X dev too); fail if one was."""
    done = subprocess.run([sys.executable, "-X", "dev", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Exception ignored" not in done.stderr, done.stderr
