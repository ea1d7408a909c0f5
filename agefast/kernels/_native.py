"""The one place agefast.kernels reaches into C: loading the compiled functions and calling them.

Why ctypes: a process that finds the kernel in the cache runs it without
importing numba (0.3-0.4 s and ~100 MiB of start-up) or numpy (~90 ms). The
kernel is a plain C function (_abi), so ctypes calls it, and ctypes releases
the GIL for the call, so threads seal in parallel. The buffers it works on are
lent by address (agefast.io.lending).
"""

import contextlib
import ctypes
import os
import struct
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from . import _abi
from ..io import lending, portable
from ..io.batch_buffers import batch_buffer
from ..io.lending import BYTES_DATA_AT

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


_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
_new_bytes.restype = ctypes.py_object


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
    _BATCH_CALL.pack_into(call, _abi.BATCH_CALL_AT, key, counter, id(sealed) + BYTES_DATA_AT, len(sealed),
                          id(plain) + BYTES_DATA_AT, size, final, _abi.OPEN)
    return plain, batch(call)


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


@contextlib.contextmanager
def page_aligned(size: int) -> Iterator[int]:
    """The address of `size` writable bytes at a page boundary, lent for the block: a batch buffer, kept for
    the next job once the block is done (agefast.io.batch_buffers)."""
    with batch_buffer(size) as buffer:
        address, _, hold = lending.lend(buffer, writable=True)
        try:
            yield address
        finally:
            lending.release(hold)


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
