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
from collections.abc import Iterator
from typing import IO

from .._typing import Writer
from .direct import DirectWriter


# tempfile.mkstemp's way (O_EXCL, mode 0o600, a new random name on a clash),
# without importing tempfile: its imports (shutil, random and the compression
# modules) cost a fresh process ~5 ms, a tenth of a small file's command.
_ATTEMPTS = 100
_EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def create_partial(directory: str, name: str, dir_fd: int | None = None) -> tuple[int, str]:
    """A new file `.NAME.RANDOM.partial` in `directory` (relative to the folder `dir_fd`, if given), open for writing."""
    for _ in range(_ATTEMPTS):
        tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.partial")
        try:
            return os.open(tmp, _EXCLUSIVE, 0o600, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
        except OSError:
            raise    # nothing was created
        except BaseException:
            # A signal's exception (Ctrl-C, the command's SIGTERM / SIGHUP) is
            # raised as soon as open() returns, before its descriptor reaches
            # the caller's cleanup: the file may exist, and is ours (its name
            # was free), so it goes. The descriptor closes as the process ends.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    raise FileExistsError(errno.EEXIST, "no unused name for a temporary file", directory)


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
        fd, tmp = create_partial(directory, name)
    except OSError as e:
        # Name the file the caller asked for, not the temporary one.
        raise type(e)(e.errno, e.strerror, path) from None
    f: IO[bytes] | DirectWriter
    try:
        if direct:
            os.close(fd)
            f = DirectWriter(tmp)
        else:
            # Named by its path, which a failed write's OSError then names (agefast.io.writes.write_failed).
            f = open(tmp, "wb", opener=lambda _path, _flags: fd)
        with f:
            yield f
        os.chmod(tmp, _replaced_mode(target))
        os.replace(tmp, target)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError) and e.filename == tmp:
            # A failed write (a full disk) names the file the caller asked for.
            raise OSError(e.errno, e.strerror, path) from None
        raise
