"""Reserving the blocks of an output file before writing it.

Where the size of an output is known up front (a file encrypted or decrypted
onto a regular file), the range it will fill is allocated with one
fallocate(2) call, FALLOC_FL_KEEP_SIZE, before the first batch is written.
On ext4 a write into a range with no blocks reserves them block by block as
it goes (delayed allocation); into an allocated range it only copies. On the
project's VM (AMD EPYC, ext4, benchmarks/HISTORY.md "Reserving the output"):
a new 1 GiB file in 32 KiB writes took 0.21-0.27 s reserved (once 0.43 s),
0.28-0.32 s not (once 1.19 s), faster in 6 of 6 rounds; the command
decrypting 1 GiB 0.52 s against 0.77 s (medians of 14 interleaved rounds,
faster in 11), encrypting 0.59 s against 0.65 s (faster in 8).

KEEP_SIZE leaves the file as it was: its size grows only as data is
written, so a reader, a failure half way, or a writer placed before data of
its own sees what it would have without the reservation. Blocks reserved
past where the output ended (an input that shrank, a payload that failed)
are given back by release(). Reservation is a hint: where it fails (no
fallocate in the file system, no space, not Linux) nothing is reserved and
the writes go on as they would have.
"""

import contextlib
import io
import os
import stat
import sys
from collections.abc import Iterator
from typing import Any

from .portable import file_status_flags

# Smaller outputs are not reserved: the saving (about a quarter of the time
# of writing them) is less than loading ctypes, ~2 ms, which the engine
# loads anyway for streams from this size on (payload.engine.ENGINE_AFTER).
RESERVE_FROM = 32 << 20
_FALLOC_FL_KEEP_SIZE = 1

_fallocate: Any = None     # libc's fallocate once looked up; False where it has none


def _libc_fallocate() -> Any:
    global _fallocate
    if _fallocate is None:
        import ctypes

        try:
            function = ctypes.CDLL(None, use_errno=True).fallocate
        except (AttributeError, OSError):
            _fallocate = False
            return None
        function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        function.restype = ctypes.c_int
        _fallocate = function
    return _fallocate or None


def regular_fd(writer: Any) -> int | None:
    """The descriptor of a regular file not opened for appending, else None.

    A file opened to append to may have other writers (a log): release()
    must not truncate under them."""
    try:
        fd = writer.fileno()
        if type(fd) is not int or not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        flags = file_status_flags(fd)
        # Where the system cannot say (no fcntl), it may be appending: not regular.
        return None if flags is None or flags & os.O_APPEND else fd
    except (AttributeError, OSError, TypeError, ValueError):   # io.UnsupportedOperation is OSError and ValueError
        return None


# The file kernel (and a copy in the kernel, agefast.io.copy) reads and writes
# at the offsets a file object reports, so
# only the standard library's own file objects qualify, over a plain FileIO:
# their tell() is the file's (a subclass's may not be, and what it does on
# each write would be bypassed).
_STANDARD = (io.FileIO, io.BufferedReader, io.BufferedWriter, io.BufferedRandom)


def positional_fd(f: Any) -> int | None:
    """The descriptor of `f` where it is a standard file object of a regular
    file that the file kernel may read or write at any offset: not opened
    for appending (regular_fd: others may be writing too)
    or with O_DIRECT (which takes only aligned transfers)."""
    if type(f) not in _STANDARD or type(getattr(f, "raw", f)) is not io.FileIO:
        return None
    fd = regular_fd(f)
    if fd is None or (file_status_flags(fd) or 0) & getattr(os, "O_DIRECT", 0):
        return None
    return fd


def reserve(writer: Any, at: int | None, size: int) -> int | None:
    """Reserve `size` bytes of `writer`'s file from offset `at`; returns the
    end of the range reserved, for release(), or None if nothing was."""
    # Only 64-bit Linux: the offsets are passed as 64-bit integers.
    if at is None or size < RESERVE_FROM or sys.platform != "linux" or sys.maxsize < 1 << 62:
        return None
    fd = regular_fd(writer)
    fallocate = None if fd is None else _libc_fallocate()
    if fallocate is None or fallocate(fd, _FALLOC_FL_KEEP_SIZE, at, size) != 0:
        return None
    return at + size


def release(writer: Any, end: int | None) -> None:
    """Give back the blocks reserve() reserved past the file's end, where
    the output stopped short of `end`. Truncating the file to its own size
    changes none of its bytes."""
    if end is None:
        return
    fd = regular_fd(writer)
    if fd is None:
        return
    try:
        size = os.fstat(fd).st_size
        if size < end:
            os.ftruncate(fd, size)
    except OSError:
        # The blocks then stay allocated past the end: the file's bytes are
        # right either way, so this never fails the stream (or hides its error).
        pass


@contextlib.contextmanager
def reserving(writer: Any, at: int | None, size: int | None) -> Iterator[None]:
    """reserve() before the block writes `size` bytes from `at` (None: a
    size not known, nothing reserved), release() after it, whatever its end."""
    end = None if size is None else reserve(writer, at, size)
    try:
        yield
    finally:
        release(writer, end)
