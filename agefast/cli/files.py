"""The files a command line names, told by their role when one cannot be used.

age says which file failed and what it is for: `failed to open input file
"in.txt": open in.txt: no such file or directory`. The commands say the
same, with the system's reason as Python words it: `failed to open input
file "in.txt": No such file or directory`, for the input, the output, the
-i identity files, the -R recipients files and an SSH key's PATH.pub.
agefast.cli.outcome tells FileFailed in those words.
"""

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import NoReturn


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


class _ClosedStream:
    """A standard stream whose descriptor was closed when the command started
    (`agefast-keygen >&-`), where Python leaves sys.stdout None: every read or
    write fails as age's does, "bad file descriptor" naming it, and it is no
    terminal."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def buffer(self) -> "_ClosedStream":
        return self

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        """Nothing was written: the interpreter's flush at exit has nothing to fail on."""

    def _bad(self, *args: object) -> NoReturn:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF), self.name)

    fileno = read = readinto = readline = write = _bad


def mend_closed_streams() -> None:
    """Stand a _ClosedStream in for standard input or output where it was closed (sys.stdin None): each
    command's use of it had been an AttributeError's traceback. Where standard error was closed, what the
    command says goes nowhere (as age's writes to it fail), not to standard output (print's fallback), after
    the plaintext.

    The descriptor of each is taken by /dev/null meanwhile: the next file opened would otherwise be given
    it, and `-o /dev/stdout` with standard output closed named the input file, which it overwrote."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            _take(fd)
    if sys.stdin is None:
        sys.stdin = _ClosedStream("/dev/stdin")
    if sys.stdout is None:
        sys.stdout = _ClosedStream("/dev/stdout")
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")


def _take(fd: int) -> None:
    """/dev/null at descriptor `fd` where it is closed."""
    try:
        os.fstat(fd)
        return
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
