"""Writing all of a buffer, in pieces sized for the destination (agefast.io.pieces),
and naming the file a failed write was for."""

from typing import Any

from .._typing import Buffer
from .callers import keeps_nothing
from .pieces import FILE_WRITE_SIZE, WRITE_SIZE


def write_failed(dst: Any, error: OSError) -> OSError:
    """`error`, raised writing to `dst`, naming `dst`'s file where it names
    none (a file object's write or flush does not), so that "No space left
    on device" says where, as Go age's "write PATH: ..." does."""
    name = getattr(dst, "name", None)
    if error.filename is not None or not error.errno or isinstance(error, BlockingIOError) \
            or not isinstance(name, str):
        return error
    return OSError(error.errno, error.strerror, name)


def write_all(dst: Any, data: Buffer, at: int | None = None) -> None:
    """Write all of `data`, also to raw writers that accept only part of it.
    `at`, where known, is the file offset data lands at: pieces are then at
    most FILE_WRITE_SIZE, cut at the file's FILE_WRITE_SIZE boundaries; else
    at most WRITE_SIZE. A failed write's OSError names the file (write_failed)."""
    mv = memoryview(data).cast("B")
    size = WRITE_SIZE if at is None else FILE_WRITE_SIZE
    piece = size if at is None else size - at % size
    own = not keeps_nothing(dst)    # a writer that may keep what it is handed gets bytes, not our buffer
    while mv:
        try:
            n = dst.write(bytes(mv[:piece]) if own else mv[:piece])
        except OSError as e:
            raise write_failed(dst, e) from None
        if n is None:
            raise BlockingIOError("the destination accepted no data (non-blocking write returned None)")
        if not 0 < n <= len(mv[:piece]):
            # As Python's buffered writers check a raw write's count: more than it was given (or a negative
            # count) would skip data, none at all would loop for ever.
            raise OSError(f"the destination's write() returned {n!r} for {len(mv[:piece])} bytes")
        mv = mv[n:]
        piece = size if n == piece else piece - n


def close(dst: Any) -> None:
    """Close `dst` (which flushes what it buffers); a failure names the file, as write_all's do."""
    try:
        dst.close()
    except OSError as e:
        raise write_failed(dst, e) from None


def flush(dst: object) -> None:
    """Flush `dst` if it buffers (a raw writer need not have flush()); a
    failure names the file, as write_all's do."""
    method = getattr(dst, "flush", None)
    if method is not None:
        try:
            method()
        except OSError as e:
            raise write_failed(dst, e) from None
