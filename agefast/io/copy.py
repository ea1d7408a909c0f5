"""Copying the rest of a file: inside the kernel where both ends are regular
files (copy_file_range), else through a buffer (pipes, armor, file objects).

copy_file_range shares extents (a reflink) on file systems that can (btrfs,
XFS), but only between block-aligned offsets; where it cannot, the kernel
copies the bytes itself, page cache to page cache, without a trip through
user space.
"""

import errno
import os
from typing import Any

from .portable import copy_file_range
from .reserve import positional_fd
from .source import Source
from .writes import flush, write_all, write_failed

_BLOCK = 1 << 20
_KERNEL_STEP = 1 << 30
# Where the in-kernel copy starts in the output: a multiple of the file's
# block size (so that extents can be shared) and of the 64 KiB that the
# kernel's copy moves at a time. From a 64 KiB boundary the page cache takes those
# steps in 64 KiB folios; from a 4 KiB one, a page at a time: 1 GiB on ext4
# took 0.30 s from 4 KiB against 0.24 s (benchmarks/HISTORY.md).
_ALIGN = 1 << 16
# What copy_file_range answers for a pair it can't copy between (across file
# systems on some kernels, an O_APPEND output, a file system or a kernel
# without it): those are copied through a buffer instead. Only the first call
# may fail this way; later, such an error is a real one.
_UNSUPPORTED = frozenset({errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF})
# What a copy's failure says of its output alone.
_WRITE_SIDE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _in_kernel(src_fd: int, src_at: int, dst_fd: int, dst_at: int) -> int | None:
    """Copy src_fd from offset src_at to its end into dst_fd at dst_at;
    the bytes copied, or None if the kernel can't copy between the two."""
    copied = 0
    while True:
        try:
            n = copy_file_range(src_fd, dst_fd, _KERNEL_STEP, src_at + copied, dst_at + copied)
        except OSError as e:
            if copied == 0 and e.errno in _UNSUPPORTED:
                return None
            raise
        if n == 0:
            return copied
        copied += n


def copy_rest(source: Source, dst: Any, src_at: tuple[int, int] | None = None) -> None:
    """Copy what `source` has left onto `dst`.

    `src_at`, (descriptor, offset), names where the rest lies in a regular
    file (see positional_fd), whatever `source` has buffered: with such a file
    as `dst` too it is copied in the kernel, and `dst` is left at the end of
    what it wrote."""
    dst_fd = positional_fd(dst)
    if src_at is not None and dst_fd is not None:
        src_fd, offset = src_at
        flush(dst)
        at = dst.tell()
        # The bytes up to dst's next _ALIGN boundary are written here, so
        # that the rest lies at aligned offsets in dst: where it does in src
        # too (a header as long as the old one, modulo the block), it is shared.
        head = os.pread(src_fd, -at % max(_ALIGN, os.fstat(dst_fd).st_blksize), offset)
        write_all(dst, head)
        flush(dst)
        try:
            copied = _in_kernel(src_fd, offset + len(head), dst_fd, at + len(head))
        except OSError as e:
            # A full disk or a file too large is the output's to name, as a failed write names it.
            raise (write_failed(dst, e) if e.errno in _WRITE_SIDE else e) from None
        if copied is not None:
            dst.seek(at + len(head) + copied)
            return
        dst.seek(at)    # the loop below writes the head again
    buffer = bytearray(_BLOCK)
    while n := source.readinto(buffer):
        write_all(dst, memoryview(buffer)[:n])
