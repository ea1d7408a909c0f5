"""Large result buffers that are cheap to fault in.

`encrypt` and `decrypt` return a new bytes object as large as the payload. Its
pages are faulted in on first write, 4 KiB at a time: on the project's VM a
256 MiB result took 65,536 faults and about 110 ms, longer than sealing it on
one core (docs/engine.md). With transparent huge pages, which Linux grants on
request when /sys/kernel/mm/transparent_hugepage/enabled says "madvise", the
same buffer is 128 faults of 2 MiB and costs about 26 ms.

The bytes object is created uninitialised (PyBytes_FromStringAndSize(NULL, n),
as C extensions do), advised, and written once in place before anyone else
holds it. bytes.__new__ cannot do this: it zero-fills, touching every page.
"""

import ctypes
import io
import sys

_HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = 14
# Below this a result fits in few pages and io.BytesIO serves as well.
_RAW_MIN = 4 * _HUGE_PAGE

_new_uninitialised = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_uninitialised.restype = ctypes.py_object
_new_uninitialised.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)

_madvise = None
if sys.platform.startswith("linux"):
    _madvise = ctypes.CDLL(None, use_errno=True).madvise
    _madvise.restype = ctypes.c_int
    _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def _advise_huge_pages(address: int, size: int) -> None:
    """Ask for huge pages on the 2 MiB-aligned part of [address, address+size).

    Only a hint: where THP is off, or on other systems, nothing changes.
    """
    if _madvise is None:
        return
    start = -(-address // _HUGE_PAGE) * _HUGE_PAGE
    end = (address + size) // _HUGE_PAGE * _HUGE_PAGE
    if end > start:
        _madvise(start, end - start, _MADV_HUGEPAGE)


def new_bytes(size: int, fill) -> bytes:
    """A new bytes object of `size` bytes, written in place by fill(view).

    fill must write every byte of the writable memoryview it is given; the
    view is released when fill returns, and if fill raises the object is
    dropped unseen (it may hold uninitialised memory).
    """
    if size < _RAW_MIN:
        # BytesIO lends a view of its own buffer and returns that very buffer
        # as the bytes object: written once, no copy.
        out = io.BytesIO()
        if size:
            out.seek(size - 1)
            out.write(b"\0")
        with out.getbuffer() as view:
            fill(view)
        return out.getvalue()
    result = _new_uninitialised(None, size)
    address = ctypes.cast(ctypes.c_char_p(result), ctypes.c_void_p).value
    _advise_huge_pages(address, size)
    with memoryview((ctypes.c_char * size).from_address(address)).cast("B") as view:
        fill(view)
    return result
