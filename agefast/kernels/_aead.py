"""ChaCha20-Poly1305 over a batch of age STREAM chunks, and its C entry point (batch_c).

Sealing encrypts a chunk, then MACs the ciphertext (from L2). Opening MACs
first and decrypts only a verified chunk. Where the build is stitched or
split (_common._form: the x86 classes by default) the batch seals and opens
in one stitched loop instead (_stitched); the single-message kernels the
tests call keep the two passes. Kernels take contiguous typed
arrays and never raise on user input; agefast.kernels validates.
"""

import numpy as np
from numba import carray, types
from numba.extending import intrinsic

from . import _abi, _stitched
from ._abi import SEAL
from ._chunk import _mac_begin, _mac_end, _open_bounds, _seal_chunk, _tag_matches
from ._common import _inner, CHUNK, LANES, STITCHED, TAG
from ._chacha20 import _chacha20_xor, _set_key


@_inner
def _scratch():
    """Everything a batch needs, allocated once per call: (state, ctx, lanes, r^16, r^(16-l), bytes, next key)."""
    st = np.zeros(16, np.uint32)
    ctx = np.zeros(16, np.uint64)    # as _abi's scratch lays it out
    hl = np.zeros(5 * LANES, np.uint64)
    pw16 = np.zeros(9 * LANES, np.uint64)
    pwfin = np.zeros(9 * LANES, np.uint64)
    # bytes: [0:1024] zeros, [1024:2048] keystream / tail, [2048:2064] tag, [2064:2080] pad block
    buf = np.zeros(_abi.BYTES_SIZE, np.uint8)
    return st, ctx, hl, pw16, pwfin, buf, np.zeros(_abi.NEXT_KEY_WORDS, np.uint64)


@_inner
def _seal_one(scr, aad, src, dst):
    """dst[:n] = ChaCha20(src), dst[n:n+16] = tag, for the key and nonce in scr's state.

    Two passes: encrypt the whole message, then MAC the ciphertext (a 64 KiB
    chunk stays in L2 between them; a KiB-by-KiB interleave in one IR function
    measured no faster, docs/engine.md).
    """
    st, buf = scr[0], scr[5]
    n = src.size
    groups = _mac_begin(scr, aad, n)
    _chacha20_xor(st, src, dst[:n], buf[1024:2048])
    _mac_end(scr, dst[:n], groups, aad.size, n, dst, n)


@_inner
def _open_one(scr, aad, src, dst):
    """Open src (ciphertext || tag) into dst; returns whether the tag verified.

    dst is written only after the tag matched (compared in constant time).
    """
    st, buf = scr[0], scr[5]
    n = src.size - TAG
    groups = _mac_begin(scr, aad, n)
    _mac_end(scr, src[:n], groups, aad.size, n, buf, 2048)
    ok = _tag_matches(buf, 2048, src, n)
    if ok:
        _chacha20_xor(st, src[:n], dst[:n], buf[1024:2048])
    return ok


@_inner
def _seal_batch(key, mask, aad, counter, src, dst, final, scr):
    """Seal src as consecutive chunks into dst (agefast.payload.engine.Engine.seal semantics); returns bytes written.

    Each chunk's nonce is age's XOR mask, and each authenticates aad (_abi.BATCH_AEAD).
    """
    _set_key(scr[0], key)
    if STITCHED:
        return _stitched.seal_batch(scr, mask, aad, counter, src, dst, final)
    n = src.size
    i = 0
    while True:
        pos, end, last = _seal_chunk(scr[0], mask, counter, i, n, final)
        out = pos + TAG * i
        _seal_one(scr, aad, src[pos:end], dst[out:out + end - pos + TAG])
        i += 1
        if last:
            return end + TAG * i


@_inner
def _open_batch(key, mask, aad, counter, src, dst, final, scr):
    """Open consecutive sealed chunks; returns how many verified (index of the first failure).

    Per chunk: MAC, compare, then decrypt; stops at the first failure.
    Nonces and aad as for _seal_batch.
    """
    _set_key(scr[0], key)
    n = src.size
    pos = 0
    out = 0
    done = 0
    taken = False
    while pos < n:
        end, nonce = _open_bounds(counter, done, pos, n, final, mask)
        if end - pos < TAG:
            return done
        scr[0][13], scr[0][14], scr[0][15] = nonce
        size = end - pos - TAG
        if STITCHED:
            # where a chunk follows (this one is then whole), its key is made beside this one's lanes
            beside = _stitched.NEXT_KEY and end < n
            following = _open_bounds(counter, done + 1, end, n, final, mask)[1] if beside else nonce
            ok = _stitched.open_one(scr, aad, src[pos:end], dst[out:out + size], taken, beside, following)
            taken = beside
        else:
            ok = _open_one(scr, aad, src[pos:end], dst[out:out + size])
        if not ok:
            return done
        out += size
        pos = end
        done += 1
    return done


@_inner
def _batch(key, mask, aad, counter, src, dst, final, mode, scr):
    """Seal (mode SEAL: returns bytes written) or open (OPEN: verify then
    decrypt each chunk, stop at the first failure; returns the number of
    chunks verified) a batch, with the caller's scratch `scr` (_scratch()).
    Each chunk's nonce is age's XOR mask (12 bytes), and each authenticates
    aad: zeros and none for age (_age_nonces)."""
    if mode == SEAL:
        return _seal_batch(key, mask, aad, counter, src, dst, final, scr)
    return _open_batch(key, mask, aad, counter, src, dst, final, scr)


@_inner
def _age_nonces(scr):
    """(mask, aad) of age's own chunks, for _batch: 12 zero bytes, the
    scratch's first (they stay zero: every chunk's Poly1305 key block is
    ChaCha20 of them), and no associated data."""
    return scr[5][:12], scr[5][:0]


@intrinsic
def _at(typingctx, ptr, offset):
    """ptr + offset bytes, for carving the caller's scratch into arrays."""
    sig = types.voidptr(types.voidptr, types.int64)

    def codegen(context, builder, signature, args):
        return builder.gep(args[0], [args[1]])

    return sig, codegen


@intrinsic
def _pointer(typingctx, address):
    """The uint64 `address` as a pointer, for the buffers a call's arguments name."""
    sig = types.voidptr(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))

    return sig, codegen


@_inner
def _carve(scratch):
    """The caller's scratch (_abi.SCRATCH_SIZE bytes) as the arrays _scratch() makes."""
    return (carray(_at(scratch, _abi.STATE_AT), 16, np.uint32),
            carray(_at(scratch, _abi.CTX_AT), 16, np.uint64),
            carray(_at(scratch, _abi.LANES_AT), 5 * LANES, np.uint64),
            carray(_at(scratch, _abi.POWERS_AT), 9 * LANES, np.uint64),
            carray(_at(scratch, _abi.FINAL_POWERS_AT), 9 * LANES, np.uint64),
            carray(_at(scratch, _abi.BYTES_AT), _abi.BYTES_SIZE, np.uint8),
            carray(_at(scratch, _abi.NEXT_KEY_AT), _abi.NEXT_KEY_WORDS, np.uint64))


def batch_c(call):
    """The batch kernel over raw pointers, compiled by _build as a C function (_abi.BATCH_ARGS).

    call: the scratch of this call, _abi.SCRATCH_SIZE bytes, 8-byte aligned,
    zeroed but for the arguments at _abi.BATCH_CALL_AT (_native.batch_call):
    the key (32 bytes), the counter, src (n bytes), dst (m bytes), final and
    mode; after them the nonce mask and the associated data (_abi.BATCH_AEAD,
    zeros for age). Every buffer comes from the caller, so the compiled code
    allocates nothing and needs nothing of Numba's runtime.
    """
    key = carray(_at(call, _abi.BATCH_CALL_AT), 32, np.uint8)
    args = carray(_at(call, _abi.BATCH_CALL_AT + 32), 7, np.uint64)   # counter, src, n, dst, m, final, mode
    src = carray(_pointer(args[1]), np.int64(args[2]), np.uint8)
    dst = carray(_pointer(args[3]), np.int64(args[4]), np.uint8)
    mask = carray(_at(call, _abi.BATCH_AEAD_AT), 12, np.uint8)
    aead = carray(_at(call, _abi.BATCH_AEAD_AT + 16), 2, np.uint64)     # aad, its size
    aad = carray(_pointer(aead[0]), np.int64(aead[1]), np.uint8)
    return _batch(key, mask, aad, args[0], src, dst, args[5] != 0, np.int64(args[6]), _carve(call))


# Last: _stitched builds on the helpers above, and the batch loop (_seal_batch,
# _open_batch) finds it here when Numba compiles that loop, after this import.
