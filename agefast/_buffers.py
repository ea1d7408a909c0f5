"""Large result buffers, written once.

`encrypt` and `decrypt` return a new bytes object as large as the payload.
bytes.__new__ and io.BytesIO zero-fill a new buffer, touching every page
before the engine writes it again; here the bytes object is created
uninitialised (PyBytes_FromStringAndSize(NULL, n), as C extensions do) and
written once in place before anyone else holds it. 256 MiB in a fresh
process: 166 ms against 174 ms for BytesIO; in a loop 132 against 162 ms
(benchmarks/bench_alloc.py, docs/engine.md).

A fresh result's pages are faulted in first, with one
madvise(MADV_POPULATE_WRITE) call (Linux 5.14+), before the engine writes
them: on the project's VM populating 256 MiB takes ~100 ms, where taking the
same page faults one by one inside the kernels' stores cost 260-390 ms
(benchmarks/bench_engine.py --fresh, docs/engine.md). Populating in two
threads at once measured no faster than in one.

Transparent huge pages were tried and dropped: on the project's VM they cost
680 ms for the same buffer in a fresh process (53 ms only in a loop that
had just freed one), because fresh 2 MiB blocks come from memory the
balloon device has handed back to the host.
"""

import functools
import io
import sys
from collections.abc import Callable
from typing import Any

# Below this a result fits in few pages and io.BytesIO serves as well.
_RAW_MIN = 8 << 20


_MADV_POPULATE_WRITE = 23     # linux/mman.h
_PAGE = 4096


@functools.cache
def _ctypes() -> tuple[Any, Any, Any] | None:
    """ctypes, PyBytes_FromStringAndSize and madvise (None off Linux), or None on a Python without ctypes.

    Imported at the first large result, not with agefast: 2.4 ms of start-up.
    """
    try:
        import ctypes
    except ImportError:
        return None
    new = ctypes.pythonapi.PyBytes_FromStringAndSize
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    madvise = None
    if sys.platform == "linux":
        madvise = ctypes.CDLL(None).madvise
        madvise.restype = ctypes.c_int
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return ctypes, new, madvise


def _populate(madvise: Callable[[int, int, int], int] | None, address: int, size: int) -> None:
    """Fault in the whole pages of [address, address + size) for writing, in one call.

    Best effort: an older kernel refuses (EINVAL) and the pages are faulted
    in as they are written, as without it.
    """
    start = -(-address // _PAGE) * _PAGE
    end = (address + size) // _PAGE * _PAGE
    if madvise is not None and end > start:
        madvise(start, end - start, _MADV_POPULATE_WRITE)


def new_bytes(size: int, fill: Callable[[memoryview], None]) -> bytes:
    """A new bytes object of `size` bytes, written in place by fill(view).

    fill must write every byte of the writable memoryview it is given; the
    view is released when fill returns, and if fill raises the object is
    dropped unseen (it may hold uninitialised memory).
    """
    api = _ctypes() if size >= _RAW_MIN else None
    if api is None:
        # BytesIO lends a view of its own buffer and returns that very buffer
        # as the bytes object: written once after the zero-fill, no copy.
        out = io.BytesIO()
        if size:
            out.seek(size - 1)
            out.write(b"\0")
        with out.getbuffer() as view:
            fill(view)
        return out.getvalue()
    ctypes, new_uninitialised, madvise = api
    result: bytes = new_uninitialised(None, size)
    address = ctypes.cast(ctypes.c_char_p(result), ctypes.c_void_p).value
    _populate(madvise, address, size)
    with memoryview((ctypes.c_char * size).from_address(address)).cast("B") as view:
        fill(view)
    return result
