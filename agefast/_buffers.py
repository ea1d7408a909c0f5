"""Large result buffers, written once.

`encrypt` and `decrypt` return a new bytes object as large as the payload.
bytes.__new__ and io.BytesIO zero-fill a new buffer, touching every page
before the engine writes it again; here the bytes object is created
uninitialised (PyBytes_FromStringAndSize(NULL, n), as C extensions do) and
written once in place before anyone else holds it. 256 MiB in a fresh
process: 166 ms against 174 ms for BytesIO; in a loop 132 against 162 ms
(benchmarks/bench_alloc.py, docs/engine.md).

Transparent huge pages were tried and dropped: on the project's VM they cost
680 ms for the same buffer in a fresh process (53 ms only in a loop that
had just freed one), because fresh 2 MiB blocks come from memory the
balloon device has handed back to the host.
"""

import functools
import io

# Below this a result fits in few pages and io.BytesIO serves as well.
_RAW_MIN = 8 << 20


@functools.cache
def _ctypes():
    """ctypes and PyBytes_FromStringAndSize, or None on a Python without ctypes.

    Imported at the first large result, not with agefast: 2.4 ms of start-up.
    """
    try:
        import ctypes
    except ImportError:
        return None
    new = ctypes.pythonapi.PyBytes_FromStringAndSize
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    return ctypes, new


def new_bytes(size: int, fill) -> bytes:
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
    ctypes, new_uninitialised = api
    result = new_uninitialised(None, size)
    address = ctypes.cast(ctypes.c_char_p(result), ctypes.c_void_p).value
    with memoryview((ctypes.c_char * size).from_address(address)).cast("B") as view:
        fill(view)
    return result
