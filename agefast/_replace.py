"""Writing a file whole or not at all: the output of `*_file` and of the
command's `-o`.

The result goes to a temporary file next to the target and is renamed over
it on success, so a failure half way (a corrupt chunk, a full disk) never
leaves a truncated or unauthenticated file, and an existing file survives
until the new one is whole. A symlink is written through, as a plain open()
would: the file it points to is replaced and the link stays. An existing
file that is not a regular one (a FIFO, a device) cannot be replaced by a
rename, so it is written directly.
"""

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from typing import IO

from ._typing import Writer
from .direct import DirectWriter


def _creation_mode() -> int:
    """The mode a plain open() would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _replaced_mode(target: str) -> int:
    """The mode the result gets: an existing file's own, else a new file's under the umask."""
    try:
        return os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        return _creation_mode()


@contextlib.contextmanager
def replacing(path: str | bytes, direct: bool = False) -> Iterator[Writer]:
    """A binary file to write the result to; it becomes `path` only if the
    block ends without an exception. direct=True writes with O_DIRECT."""
    # As str: mkstemp cannot mix a bytes directory with its str prefix.
    path = os.fsdecode(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    target = os.path.realpath(path)
    if os.path.exists(target) and not os.path.isfile(target):
        with open(target, "wb") as device:
            yield device
        return
    directory, name = os.path.split(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".partial")
    except OSError as e:
        # Name the file the caller asked for, not the temporary one.
        raise type(e)(e.errno, e.strerror, path) from None
    f: IO[bytes] | DirectWriter
    try:
        if direct:
            os.close(fd)
            f = DirectWriter(tmp)
        else:
            f = os.fdopen(fd, "wb")
        with f:
            yield f
        os.chmod(tmp, _replaced_mode(target))
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
