"""A progress bar on stderr for long jobs at a terminal.

tqdm draws it; it is imported only when a bar is shown, so small jobs and
jobs whose stderr is not a terminal pay nothing for it.
"""

import os
import stat
import sys
from typing import Any

from .terminal import is_terminal

# Below this a job ends before a bar would tell the user anything.
MIN_SIZE = 32 * 1024 * 1024


def input_size(src: Any) -> int | None:
    """The size of `src` if it is a regular file, else None."""
    try:
        st = os.fstat(src.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


class _Counting:
    """Passes reads through to `src`, advancing `bar` by what they return."""

    def __init__(self, src: Any, bar: Any) -> None:
        self._src = src
        self._bar = bar

    def readinto(self, b: memoryview) -> int | None:
        n: int | None = self._src.readinto(b)
        if n:
            self._bar.update(n)
        return n


def with_progress(src: Any) -> tuple[Any, Any]:
    """Return (reader, bar): `src` counted by a bar, or `src` and None."""
    size = input_size(src)
    if size is None or size < MIN_SIZE or not is_terminal(sys.stderr):
        return src, None
    from tqdm import tqdm

    try:
        columns, lines = os.get_terminal_size(sys.stderr.fileno())
    except OSError:
        columns = lines = 0
    # A terminal that reports no size (a bare pty) would get no bar at all:
    # tqdm trims it to 0 columns and hides it below row 0.
    sized = bool(columns and lines)
    bar = tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr, leave=False,
               dynamic_ncols=sized, ncols=None if sized else 80, nrows=None if sized else 24)
    return _Counting(src, bar), bar
