"""The system calls agefast uses that only some systems have: each looked up here once, with the portable way beside it.

agefast was written on Linux. memfd_create (with /proc/self/fd), preadv and
copy_file_range are Linux's; macOS has fcntl, pread and fork but none of
those; Windows has no fcntl, pread, pwrite, fork, os.sysconf or
MAP_PRIVATE. A module asks here instead of calling os where a call may be
missing, so a system without it takes the fallback, and the fallbacks are
what the simulated platform of the test suite runs the API, command and
data tests on (tests/test_platform.py). How many CPUs a process may use is
agefast.io.cpus's.
"""

import errno
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mmap

fcntl: ModuleType | None     # the module, or None (Windows)
try:
    import fcntl as _fcntl

    fcntl = _fcntl
except ImportError:
    fcntl = None

# What os lacks on some systems, looked up once; the functions below choose by them.
_PREADV = getattr(os, "preadv", None)
_PREAD = getattr(os, "pread", None)
_MEMFD_CREATE = getattr(os, "memfd_create", None)
_seek_lock = threading.Lock()


def pread_into(fd: int, buf: "memoryview | mmap.mmap", offset: int) -> int:
    """Read up to len(buf) bytes of `fd` at `offset` into `buf` (one read); the count, 0 at the end of the file.

    Where the system has no positional read (Windows), a seek and a read
    under a lock, and the file position put back: safe among agefast's own
    reads, not against another reader of the same descriptor using its position.
    """
    if _PREADV is not None:
        n: int = _PREADV(fd, [buf], offset)
        return n
    data = pread(fd, len(buf), offset)
    buf[:len(data)] = data
    return len(data)


def _pread_by_seeking(fd: int, size: int, offset: int) -> bytes:
    """pread where the system has none (Windows): a seek and a read under a lock, the position put back."""
    with _seek_lock:
        position = os.lseek(fd, 0, os.SEEK_CUR)
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            return os.read(fd, size)
        finally:
            os.lseek(fd, position, os.SEEK_SET)


# pread(fd, size, offset): up to `size` bytes of `fd` at `offset` (one read),
# as new bytes; as pread_into where there is no pread. os.pread itself where
# the system has it: random access reads a chunk a call, and a wrapper's
# frame was ~0.1 us of a 64 KiB chunk's ~20.
pread: Callable[[int, int, int], bytes] = _PREAD if _PREAD is not None else _pread_by_seeking


def copy_file_range(src_fd: int, dst_fd: int, count: int, src_at: int, dst_at: int) -> int:
    """os.copy_file_range; where the system has none, OSError ENOSYS, as from a Linux kernel without it."""
    # Looked up at each call (one per GiB copied): tests count the calls by replacing os.copy_file_range.
    call = getattr(os, "copy_file_range", None)
    if call is None:
        raise OSError(errno.ENOSYS, "no copy_file_range on this system")
    n: int = call(src_fd, dst_fd, count, src_at, dst_at)
    return n


def file_status_flags(fd: int) -> int | None:
    """fcntl(F_GETFL): the flags `fd` was opened with (O_APPEND, O_DIRECT); None where the system cannot say."""
    if fcntl is None:
        return None
    flags: int = fcntl.fcntl(fd, fcntl.F_GETFL)
    return flags


def clear_file_status_flags(fd: int, flags: int) -> None:
    """Turn `flags` off in what `fd` was opened with (fcntl F_SETFL); nothing where the system has no fcntl."""
    if fcntl is not None:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~flags)


def set_file_status_flags(fd: int, flags: int) -> bool:
    """Turn `flags` on in what `fd` was opened with (fcntl F_SETFL); whether it could (not where there is no fcntl)."""
    if fcntl is None:
        return False
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | flags)
    return True


def after_fork_in_child(callback: Callable[[], None]) -> None:
    """Run `callback` in every child this process forks (os.register_at_fork); nothing where there is no fork (Windows)."""
    register = getattr(os, "register_at_fork", None)
    if register is not None:
        register(after_in_child=callback)


def machine() -> str:
    """The processor's architecture as the kernel names it (os.uname's "x86_64", "aarch64"); platform's where
    there is no uname (Windows: "AMD64", which no shipped class names)."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().machine)
    import platform

    return platform.machine()


def has_memfd() -> bool:
    """Whether the system makes sealed in-memory files the dynamic loader can open (Linux's memfd, /proc/self/fd)."""
    return _MEMFD_CREATE is not None and hasattr(fcntl, "F_ADD_SEALS") and os.path.isdir("/proc/self/fd")


def anonymous_memory(size: int) -> "mmap.mmap":
    """`size` bytes of private anonymous memory, zeroed and page-aligned."""
    import mmap     # here, not at start-up: small jobs never need it

    private = getattr(mmap, "MAP_PRIVATE", None)    # Windows has none: its anonymous maps are private anyway
    return mmap.mmap(-1, size) if private is None else mmap.mmap(-1, size, private)


def page_size() -> int:
    """The system's memory page size."""
    if hasattr(os, "sysconf"):
        return os.sysconf("SC_PAGE_SIZE")
    import mmap

    return mmap.PAGESIZE
