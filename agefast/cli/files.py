"""The files a command line names, told by their role when one cannot be used.

age says which file failed and what it is for: `failed to open input file
"in.txt": open in.txt: no such file or directory`. The commands say the
same, with the system's reason as Python words it: `failed to open input
file "in.txt": No such file or directory`, for the input, the output, the
-i identity files, the -R recipients files and an SSH key's PATH.pub.
agefast.cli.outcome tells FileFailed in those words.
"""

import contextlib
from collections.abc import Iterator


class FileFailed(Exception):
    """Doing `action` ("open", "read", "write") to the `role` file at `path` failed with `error`."""

    def __init__(self, action: str, role: str, path: str, error: OSError) -> None:
        super().__init__(action, role, path, error)
        self.action, self.role, self.path = action, role, path
        self.reason = error.strerror or str(error)   # the system's words: "No such file or directory"


@contextlib.contextmanager
def named(role: str, path: str, action: str = "open") -> Iterator[None]:
    """An OSError raised inside, raised again as FileFailed: `action` failed on the `role` file at `path`."""
    try:
        yield
    except OSError as e:
        raise FileFailed(action, role, path, e) from None
