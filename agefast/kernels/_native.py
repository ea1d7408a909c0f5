"""The one place agefast.kernels reaches into C: loading the compiled functions and lending them buffers.

Why ctypes: a process that finds the kernel in the cache runs it without
importing numba (0.3-0.4 s and ~100 MiB of start-up) or numpy (~90 ms). The
kernel is a plain C function (_abi), so ctypes calls it, and ctypes releases
the GIL for the call, so threads seal in parallel. The buffers it works on are
lent by CPython's buffer protocol (PyObject_GetBuffer, or ctypes' from_buffer
for a writable one), which covers every bytes-like object the public
functions accept, read-only ones included, and keeps each one exported (not
resizable) until released; a bytes object, which cannot change, by the
address of its data and a reference that keeps it alive.
"""

import ctypes
import os
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from . import _abi
from ..io import portable

_C_TYPES: dict[str, Any] = {"voidptr": ctypes.c_void_p, "uint64": ctypes.c_uint64, "int64": ctypes.c_int64}
_keep: list[object] = []      # what must live as long as the process may call the kernel (llvmlite's engine)

# A compiled function: integer arguments (addresses, sizes, descriptors), an integer result.
Function = Callable[..., int]


class Functions(NamedTuple):
    """The compiled C functions (_abi), callable through ctypes, which releases the GIL for each call."""

    batch: Function
    file_batches: Function


# The caller's scratch for one batch call (_abi.SCRATCH_SIZE bytes, zeroed by ctypes, malloc-aligned).
_Scratch = ctypes.c_char * _abi.SCRATCH_SIZE

# Each function's symbol, result and argument types. The batch's one argument
# (_abi.BATCH_ARGS' voidptr) is the scratch, declared as a pointer to its own
# ctypes type: ctypes passes a scratch so in 0.18 us a call, against 0.30 as a
# c_void_p (2026-12-05, Zen 4), and takes nothing else. errno is kept for
# file_batches: it reads and writes files, and ctypes.get_errno() then tells
# the caller why one failed.
_SIGNATURES = ((_abi.SYMBOL, _C_TYPES[_abi.BATCH_RESULT], (ctypes.POINTER(_Scratch),)),
               (_abi.FILE_SYMBOL, _C_TYPES[_abi.FILE_RESULT], tuple(_C_TYPES[name] for name in _abi.FILE_ARGS)))


def load_library(data: bytes, label: str = "agefast-kernels") -> Functions:
    """The functions of a shared library whose bytes were verified (by the cache or the shipped build's manifest).

    On Linux the bytes are copied into an anonymous in-memory file (memfd),
    sealed so that nothing, not even this process, can change them, and the
    loader opens it as /proc/self/fd/N: what runs is what was hashed,
    whatever happens to the file on disk meanwhile (rewritten, renamed,
    swapped). Elsewhere (macOS) they are written to a new file in a private
    folder (_private_copy). Raises OSError where the loader refuses (a
    kernel whose vm.memfd_noexec forbids mapping memfds executable).
    """
    library = _sealed_copy(data, label) if portable.has_memfd() else _private_copy(data, label)
    functions = []
    for symbol, result, args in _SIGNATURES:
        function = library[symbol]
        function.restype = result
        function.argtypes = args
        functions.append(function)
    return Functions(*functions)


def _sealed_copy(data: bytes, label: str) -> ctypes.CDLL:
    fcntl: Any = portable.fcntl     # has_memfd(): there, with the seals
    fd = os.memfd_create(label, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with open(fd, "wb", closefd=False) as f:
            f.write(data)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
        library = ctypes.CDLL(f"/proc/self/fd/{fd}", use_errno=True)
    except BaseException:
        os.close(fd)
        raise
    # Open for the life of the process: the loader knows a library by its
    # name, and a later load whose memfd got the same number would otherwise
    # be handed this one.
    _keep.append(fd)
    return library


def _private_copy(data: bytes, label: str) -> ctypes.CDLL:
    """The library loaded from a new file in a new folder only this account can write to (mkdtemp: mode 0700).

    No other account can change the file between the write and the load, so
    what runs is what was hashed; the name is new, so the loader cannot hand
    back an earlier library. Once loaded, the mapping no longer needs the
    file (POSIX); where the system keeps it open (Windows), it stays behind.
    """
    import tempfile     # here: Linux, which has memfd, never needs it (~5 ms)

    with tempfile.TemporaryDirectory(prefix="agefast-", ignore_cleanup_errors=True) as folder:
        path = os.path.join(folder, label + ".so")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o700)
        with open(fd, "wb") as f:
            f.write(data)
        return ctypes.CDLL(path, use_errno=True)


def load_object(data: bytes) -> Functions:
    """The functions of an object file, linked in memory by LLVM's MCJIT (llvmlite, ~45 ms and ~45 MiB).

    Only for caches filled where no C compiler driver was found to link a
    shared library. The object needs nothing but the C library's memory and
    file functions, which MCJIT finds in the process.
    """
    import llvmlite.binding as ll

    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    machine = ll.Target.from_default_triple().create_target_machine(codemodel="jitdefault")
    engine = ll.create_mcjit_compiler(ll.parse_assembly(""), machine)
    engine.add_object_file(ll.ObjectFileRef.from_data(data))
    engine.finalize_object()
    _keep.append(engine)
    return Functions(*(ctypes.CFUNCTYPE(result, *args, use_errno=True)(engine.get_function_address(symbol))
                       for symbol, result, args in _SIGNATURES))


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
_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
_new_bytes.restype = ctypes.py_object


# Where a bytes object's data lies from the object itself: CPython keeps it
# at a fixed offset in every bytes object (PyBytesObject.ob_sval), read here
# once through PyBytes_AsString. id() is the object's address in CPython (as
# ctypes.pythonapi, which this module needs, is CPython's). Opening one
# chunk into new bytes needs two such addresses: a ctypes call for each was
# 0.6 of the ~2 us around a 16 us kernel call (2026-12-05, Zen 4).
_SAMPLE = b"agefast"
_BYTES_DATA_AT: int = _bytes_data(_SAMPLE) - id(_SAMPLE)


def open_into_new_bytes(batch: Function, key: bytes, counter: int, sealed: bytes, final: bool) -> tuple[bytes, int]:
    """One batch call opening the sealed chunk `sealed` (chunk `counter`) into new bytes: (the bytes, the
    call's result, 1 where the chunk verified).

    The new bytes are made as a C extension makes its results: CPython's
    PyBytes_FromStringAndSize(NULL, size) leaves the data unwritten, for the
    maker to fill before anything else sees the object. The kernel writes
    the plaintext there, and the caller hands the object out only once every
    byte verified: a 64 KiB chunk's plaintext needs no bytearray and no copy
    into bytes (1.3-1.6 us of a ~21 us pread of one chunk). Size 0 is
    CPython's one empty bytes object, which nothing may write to: the kernel
    writes `size` bytes, none there. One function, not three calls (new
    bytes, their address, batch_call): each Python call was ~0.1 us of a
    pread that sat within 2% of cryptography's decrypt (2026-12-05, Zen 4).
    """
    size = len(sealed) - _abi.TAG
    plain: bytes = _new_bytes(None, size)
    call = _Scratch()
    _BATCH_CALL.pack_into(call, _abi.BATCH_CALL_AT, key, counter, id(sealed) + _BYTES_DATA_AT, len(sealed),
                          id(plain) + _BYTES_DATA_AT, size, final, _abi.OPEN)
    return plain, batch(call)


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
        return id(obj) + _BYTES_DATA_AT, len(obj), obj
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


class Flag:
    """An int64 in memory that compiled code reads: 0 until set()."""

    __slots__ = ("_value", "address")

    def __init__(self) -> None:
        self._value = ctypes.c_int64(0)
        self.address = ctypes.addressof(self._value)

    def set(self) -> None:
        self._value.value = 1


class Mutex:
    """A pthread mutex in memory that compiled code locks (file_batches' lock); lives as long as this object."""

    __slots__ = ("_memory", "address")

    def __init__(self) -> None:
        self._memory = ctypes.create_string_buffer(_abi.MUTEX_SIZE)
        self.address = ctypes.addressof(self._memory)
        init = ctypes.CDLL(None).pthread_mutex_init
        init.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
        if init(self.address, None) != 0:
            raise OSError("pthread_mutex_init failed")


def page_aligned(size: int) -> tuple[int, int, Any]:
    """`size` writable bytes at a page boundary (anonymous memory), lent as lend() lends them."""
    return lend(portable.anonymous_memory(size), writable=True)


def clear_errno() -> None:
    ctypes.set_errno(0)


def last_errno() -> int:
    """The C library's errno after this thread's last call of a compiled function."""
    return ctypes.get_errno()


_BATCH_CALL = struct.Struct(_abi.BATCH_CALL)


def scratch() -> ctypes.Array[ctypes.c_char]:
    """A zeroed scratch buffer for one call of a compiled function (_abi.SCRATCH_SIZE bytes, malloc-aligned)."""
    return _Scratch()


def batch_call(key: bytes, counter: int, src: int, n: int, dst: int, m: int, final: bool,
               mode: int) -> ctypes.Array[ctypes.c_char]:
    """The one argument of a batch call: a scratch with the call's arguments
    written in (_abi.BATCH_CALL); `src` and `dst` are addresses."""
    call = _Scratch()
    _BATCH_CALL.pack_into(call, _abi.BATCH_CALL_AT, key, counter, src, n, dst, m, final, mode)
    return call


def batch_arguments(call: ctypes.Array[ctypes.c_char]) -> tuple[bytes, int, int, int, int, int, int, int]:
    """(key, counter, src, n, dst, m, final, mode) as batch_call wrote them."""
    return _BATCH_CALL.unpack_from(call, _abi.BATCH_CALL_AT)


_BATCH_AEAD = struct.Struct(_abi.BATCH_AEAD)


def set_nonce_mask_and_aad(call: ctypes.Array[ctypes.c_char], mask: bytes, aad: int, aad_size: int) -> None:
    """Write a batch call's nonce mask (12 bytes) and associated data (an address and size) into `call`
    (_abi.BATCH_AEAD); a call made by batch_call alone has age's nonces and none."""
    _BATCH_AEAD.pack_into(call, _abi.BATCH_AEAD_AT, mask, aad, aad_size)


def nonce_mask_and_aad(call: ctypes.Array[ctypes.c_char]) -> tuple[bytes, int, int]:
    """(mask, aad, aad_size) of a batch call (_abi.BATCH_AEAD)."""
    return _BATCH_AEAD.unpack_from(call, _abi.BATCH_AEAD_AT)


def key_buffer(key: bytes) -> ctypes.Array[ctypes.c_char]:
    return ctypes.create_string_buffer(key, len(key))


def at(address: int, size: int) -> ctypes.Array[ctypes.c_uint8]:
    """The `size` bytes at `address` as a ctypes array (the NUMBA_DISABLE_JIT reference route)."""
    return (ctypes.c_uint8 * size).from_address(address)
