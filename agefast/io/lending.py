"""Buffers lent by address: to the compiled kernels, and to the check that a caller's input and output do not overlap.

CPython's buffer protocol (PyObject_GetBuffer, or ctypes' from_buffer for a
writable buffer) covers every bytes-like object the public functions accept,
read-only ones included, and keeps each one exported (not resizable) until
released; a bytes object, which cannot change, is lent by the address of its
data and a reference that keeps it alive. ctypes is imported with this
module, which agefast imports only when a buffer is first lent (2.4 ms of
start-up).
"""

import ctypes
from typing import Any


class _PyBuffer(ctypes.Structure):
    # Py_buffer, as declared in CPython's Include/pybuffer.h
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_PyBUF_SIMPLE, _PyBUF_WRITABLE = 0, 1
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = (ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int)
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = (ctypes.POINTER(_PyBuffer),)
_release_buffer.restype = None
_bytes_data = ctypes.pythonapi.PyBytes_AsString
_bytes_data.argtypes = (ctypes.py_object,)
_bytes_data.restype = ctypes.c_void_p

# Where a bytes object's data lies from the object itself: CPython keeps it
# at a fixed offset in every bytes object (PyBytesObject.ob_sval), read here
# once through PyBytes_AsString. id() is the object's address in CPython (as
# ctypes.pythonapi, which this module needs, is CPython's). Opening one
# chunk into new bytes needs two such addresses: a ctypes call for each was
# 0.6 of the ~2 us around a 16 us kernel call (2026-12-05, Zen 4).
_SAMPLE = b"agefast"
BYTES_DATA_AT: int = _bytes_data(_SAMPLE) - id(_SAMPLE)

_from_buffer = ctypes.c_char.from_buffer     # looked up once: two attribute lookups of every lend
_address_of = ctypes.addressof


def lend(obj: Any, writable: bool) -> tuple[int, int, Any]:
    """(address, size, hold): the contiguous buffer of `obj` lent to compiled code, writable on request.

    It stays lent, alive and not resizable, until release(hold). Functions,
    not a class of lent buffers: making such an object was ~0.15 us of each,
    and a call on one 64 KiB chunk lends two (issue 46's one chunk per call,
    2026-12-05, Zen 4).
    """
    # Each us of lending is ~5% of a single 64 KiB chunk's ~17 us on
    # AVX-512: the two common kinds take the cheapest safe route.
    if type(obj) is bytes and not writable:
        # Immutable: the address of its data, and a reference that keeps it
        # alive, are all a lender holds (against 1.3 us for PyObject_GetBuffer
        # called through ctypes).
        return id(obj) + BYTES_DATA_AT, len(obj), obj
    # ctypes lends a writable buffer itself (from_buffer holds it, so the
    # object cannot be resized, until the object it returns is dropped): 0.2
    # us for a bytearray, against 2 us for PyObject_GetBuffer called through
    # ctypes. It cannot lend an empty one. The hold is a list that release()
    # empties, so that the lend ends then even where the caller's frame lives
    # on (a traceback keeps it).
    view: bytearray | memoryview
    if type(obj) is bytearray:      # writable and contiguous: lent without a memoryview
        view, size = obj, len(obj)
    else:
        view = memoryview(obj)
        size = view.nbytes if not view.readonly and view.c_contiguous else 0
    if size:
        held = _from_buffer(view)
        return _address_of(held), size, [held]
    # The structure itself is passed where its pointer is declared: ctypes
    # takes its address, cheaper than a byref() made in Python.
    lent = _PyBuffer()
    _get_buffer(obj, lent, _PyBUF_WRITABLE if writable else _PyBUF_SIMPLE)
    return lent.buf or 0, lent.len, lent


def release(hold: Any) -> None:
    """End what lend() lent with `hold`; once per lend."""
    if type(hold) is list:
        hold.clear()
    elif type(hold) is _PyBuffer:
        _release_buffer(hold)


def overlap(a: Any, b: Any) -> bool:
    """Whether the contiguous buffers of `a` and `b` share a byte of memory
    (two views of one bytearray, a read-only view of a writable one, ...)."""
    a_at, a_size, a_hold = lend(a, writable=False)
    try:
        b_at, b_size, b_hold = lend(b, writable=False)
        release(b_hold)
    finally:
        release(a_hold)
    return a_size > 0 and b_size > 0 and a_at < b_at + b_size and b_at < a_at + a_size
