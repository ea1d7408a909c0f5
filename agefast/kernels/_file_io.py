"""Whole batches of one file into another with pread and pwrite, and its C entry point (file_batches_c).

The C library's functions are called from compiled code (the compiled object
leaves their symbols to the process, _build._EXTERNAL), so no worker needs
the GIL until it ends.
"""

import ctypes
import os

import numpy as np
from llvmlite import ir
from numba import carray, config, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import _abi
from ._abi import OPEN, SEAL
from ._common import _data_ptr, _I32, _I64, _inner, CHUNK, TAG
from ._aead import _age_nonces, _batch, _carve


def _libc_io(name):
    """An intrinsic calling the C library's `name` (pread or pwrite) on buf[off:off+count] at file position pos.

    Returns what the C function returns: bytes moved, or -1 with errno set.
    The compiled object leaves the symbol to the process (_build._EXTERNAL).
    """
    def call(typingctx, fd, buf, off, count, pos):
        sig = types.int64(types.int64, buf, types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            ptr = _data_ptr(context, builder, signature.args[1], args[1], args[2])
            fnty = ir.FunctionType(_I64, [_I32, ptr.type, _I64, _I64])
            fn = cgutils.get_or_insert_function(builder.module, fnty, name)
            return builder.call(fn, [builder.trunc(args[0], _I32), ptr, args[3], args[4]])

        return sig, codegen

    call.__name__ = f"_{name}"
    return intrinsic(call)


_pread = _libc_io("pread")
_pwrite = _libc_io("pwrite")


def _libc_mutex(name):
    """An intrinsic calling the C library's `name` (pthread_mutex_lock or _unlock) on the mutex at `mutex`."""
    def call(typingctx, mutex):
        sig = types.int32(types.voidptr)

        def codegen(context, builder, signature, args):
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_I32, [args[0].type]), name)
            return builder.call(fn, [args[0]])

        return sig, codegen

    call.__name__ = f"_{name}"
    return intrinsic(call)


_lock = _libc_mutex("pthread_mutex_lock")
_unlock = _libc_mutex("pthread_mutex_unlock")


def _py_pread(fd, buf, off, count, pos):
    try:
        data = os.pread(fd, count, pos)
    except OSError as e:
        ctypes.set_errno(e.errno)     # where the compiled function's caller finds it (use_errno)
        return -1
    buf[off:off + len(data)] = np.frombuffer(data, np.uint8)
    return len(data)


def _py_pwrite(fd, buf, off, count, pos):
    try:
        return os.pwrite(fd, buf[off:off + count], pos)
    except OSError as e:
        ctypes.set_errno(e.errno)
        return -1


def _py_mutex(name):
    function = getattr(ctypes.CDLL(None), name)
    function.argtypes = (ctypes.c_void_p,)
    return function


if config.DISABLE_JIT:
    _pread = _py_pread
    _pwrite = _py_pwrite
    _lock = _py_mutex("pthread_mutex_lock")
    _unlock = _py_mutex("pthread_mutex_unlock")


@_inner
def _write_batch(dst_fd, dst, place, size, at):
    """pwrite dst[place:place+size] at `at` in pieces that end at the file's
    multiples of WRITE_PIECE (agefast.io.pieces says why); whether all of it was written."""
    done = 0
    while done < size:
        piece = min(_abi.WRITE_PIECE - (at + done) % _abi.WRITE_PIECE, size - done)
        n = _pwrite(dst_fd, dst, place + done, piece, at + done)
        if n <= 0:
            return False
        done += n
    return True


@_inner
def _ended(b, why):
    """The result of a worker that ended at its batch b, and why (_abi's file_batches results)."""
    return _abi.ENDED_AT + b * _abi.ENDINGS + why


@_inner
def _file_batches(key, mode, src_fd, src_at, dst_fd, dst_at, first, stride, batches, src, dst, scr, stop, lock):
    """Seal or open batches first, first + stride, ... below `batches` of a file into another (_abi.FILE_ARGS)."""
    plain = _abi.FILE_BATCH * CHUNK
    sealed = _abi.FILE_BATCH * (CHUNK + TAG)
    size_in = plain if mode == SEAL else sealed
    size_out = sealed if mode == SEAL else plain
    mask, aad = _age_nonces(scr)
    b = first
    while b < batches:
        if stop[0] != 0:
            return _ended(b, _abi.STOPPED)
        at = src_at + b * size_in
        place = at % _abi.PAGE
        got = 0
        while got < size_in:
            n = _pread(src_fd, src, place + got, size_in - got, at + got)
            if n < 0:
                return _ended(b, _abi.READ_FAILED)
            if n == 0:
                return _ended(b, _abi.INPUT_ENDED)
            got += n
        out_at = dst_at + b * size_out
        out_place = out_at % _abi.PAGE
        done = _batch(key, mask, aad, np.uint64(b * _abi.FILE_BATCH), src[place:place + size_in],
                      dst[out_place:out_place + size_out], False, mode, scr)
        if mode == OPEN and done != _abi.FILE_BATCH:
            return _ended(b, _abi.NOT_VERIFIED)
        _lock(lock)
        written = _write_batch(dst_fd, dst, out_place, size_out, out_at)
        _unlock(lock)
        if not written:
            return _ended(b, _abi.WRITE_FAILED)
        b += stride
    return _abi.FILE_DONE


def file_batches_c(key, mode, src_fd, src_at, dst_fd, dst_at, first, stride, batches, src_buffer, dst_buffer,
                   scratch, stop, lock):
    """_file_batches over raw pointers, compiled by _build as a C function (_abi.FILE_ARGS).

    key: 32 bytes; buffers: _abi.FILE_BUFFER_SIZE bytes each; scratch as for
    batch_c, owned by this call; stop: one int64; lock: an initialised
    pthread mutex.
    """
    return _file_batches(carray(key, 32, np.uint8), mode, src_fd, src_at, dst_fd, dst_at, first, stride, batches,
                         carray(src_buffer, _abi.FILE_BUFFER_SIZE, np.uint8),
                         carray(dst_buffer, _abi.FILE_BUFFER_SIZE, np.uint8), _carve(scratch),
                         carray(stop, 1, np.int64), lock)
