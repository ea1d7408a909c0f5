"""ChaCha20 (RFC 8439): 16 blocks at once as SIMD lanes in LLVM IR, and the state set up for age's nonces.

One <16 x i32> vector per state word (two passes of <8 x i32> without
AVX-512), transposed back to byte order with shufflevector, XORed from the
input straight into the output at any alignment; and 4 blocks in <4 x i32>
for a chunk's Poly1305 key.
"""

import functools

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.extending import intrinsic

from ._common import _call_outlined, _copy, _data_ptr, _I32, _I64, _inner, _le32, _MASK32, BLOCK16, FEATURES


_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
_QUARTER_ROUNDS = ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
                   (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14))


def _rotl(builder, v, n):
    """v rotated left by n: v a vector of i32 or, for a single block on the scalar units, one i32."""
    def const(k):
        return ir.Constant(v.type, [k] * v.type.count if isinstance(v.type, ir.VectorType) else k)
    return builder.or_(builder.shl(v, const(n)), builder.lshr(v, const(32 - n)))


def _transpose(builder, rows):
    """n x n transpose (n = len(rows) = vector width) as log2(n) rounds of interleaving row j with row j+n/2.

    One round maps the (row bits, column bits) index r.c to a rotation of it
    by one bit; log2(n) rounds swap the row and column bits.
    """
    n = len(rows)
    vt = rows[0].type
    lo = ir.Constant(vt, [k // 2 + (k % 2) * n for k in range(n)])
    hi = ir.Constant(vt, [n // 2 + k // 2 + (k % 2) * n for k in range(n)])
    for _ in range(n.bit_length() - 1):
        nxt = []
        for j in range(n // 2):
            nxt.append(builder.shuffle_vector(rows[j], rows[j + n // 2], lo))
            nxt.append(builder.shuffle_vector(rows[j], rows[j + n // 2], hi))
        rows = nxt
    return rows


# Blocks per ChaCha20 vector: 16 (zmm) with AVX-512; else 8 (ymm), two
# passes per KiB. <16 x i32> on AVX2 left LLVM to split every operation and
# lower 64 cross-register shuffles, the bulk of the AVX2 build's compile time.
_CHACHA_W = 16 if "avx512f" in FEATURES else 8


def _emit_quarter_round(b, x, a, q, c, d, rotl=_rotl):
    """One ChaCha20 quarter round on the state vectors x[a], x[q], x[c], x[d], in place; where x holds
    several sets of 16 (blocks apart), on each set, an instruction of each set in turn."""
    sets = range(0, len(x), 16)
    for into, by, n in ((a, q, 0), (d, a, 16), (c, d, 0), (q, c, 12), (a, q, 0), (d, a, 8), (c, d, 0), (q, c, 7)):
        for o in sets:
            v = x[o + into]
            x[o + into] = rotl(b, b.xor(v, x[o + by]), n) if n else b.add(v, x[o + by])


def _emit_chacha_xor(b, st, src, dst, blocks, W):
    """dst = src ^ `blocks` ChaCha20 blocks from counter st[12], W blocks at a time as the lanes of <W x i32>."""
    vt = ir.VectorType(_I32, W)
    words = [b.load(b.gep(st, [ir.Constant(_I64, i)])) for i in range(4, 16)]
    sp = b.bitcast(src, vt.as_pointer())
    dp = b.bitcast(dst, vt.as_pointer())
    for half in range(blocks // W):
        init = [ir.Constant(vt, [c] * W) for c in _SIGMA]
        for w in words:
            v = b.insert_element(ir.Constant(vt, ir.Undefined), w, ir.Constant(_I32, 0))
            init.append(b.shuffle_vector(v, v, ir.Constant(vt, [0] * W)))
        init[12] = b.add(init[12], ir.Constant(vt, list(range(half * W, half * W + W))))
        x = list(init)
        for _ in range(10):
            for quarter in _QUARTER_ROUNDS:
                _emit_quarter_round(b, x, *quarter)
        out = [b.add(x[i], init[i]) for i in range(16)]
        # W x W transposes of words [0, W), [W, 2W), ...: block k of this half is
        # the k-th row of each, in order (16 // W vectors of W words)
        cols = [_transpose(b, out[g:g + W]) for g in range(0, 16, W)]
        for k in range(W):
            for g in range(16 // W):
                idx = [ir.Constant(_I64, (half * W + k) * (16 // W) + g)]
                v = b.load(b.gep(sp, idx), align=1)
                b.store(b.xor(v, cols[g][k]), b.gep(dp, idx), align=1)


# The pure-Python stand-in for the IR intrinsics, used only under
# NUMBA_DISABLE_JIT=1 so that the kernels' Python runs (and is covered) as is.

def _py_chacha_xor(state, src, soff, dst, doff, blocks=16):
    m32 = 0xFFFFFFFF
    for blk in range(blocks):
        init = list(_SIGMA) + [int(w) for w in state[4:16]]
        init[12] = (init[12] + blk) & m32
        x = list(init)
        for _ in range(10):
            for a, b, c, d in _QUARTER_ROUNDS:
                for p, q, t, n in ((a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)):
                    x[p] = (x[p] + x[q]) & m32
                    x[t] ^= x[p]
                    x[t] = ((x[t] << n) | (x[t] >> (32 - n))) & m32
        ks = b"".join(((x[i] + init[i]) & m32).to_bytes(4, "little") for i in range(16))
        for i in range(64):
            dst[doff + 64 * blk + i] = src[soff + 64 * blk + i] ^ ks[i]


def _chacha_xor(blocks, W):
    """An intrinsic (state, src, soff, dst, doff): dst[doff:] = src[soff:] ^ `blocks` ChaCha20 blocks, W at a time.

    state is a uint32[16] ChaCha20 state; block i uses counter state[12] + i.
    The state is not advanced.
    """
    if config.DISABLE_JIT:
        return functools.partial(_py_chacha_xor, blocks=blocks)
    name = f"agefast_chacha20_xor_{'1k' if blocks == 16 else 64 * blocks}"

    def emit(b, st, src, dst):
        _emit_chacha_xor(b, st, src, dst, blocks, W)

    def chacha(typingctx, state, src, soff, dst, doff):
        sig = types.void(state, src, soff, dst, doff)

        def codegen(context, builder, signature, args):
            st_ty, src_ty, _, dst_ty, _ = signature.args
            _call_outlined(builder, name, emit, [
                _data_ptr(context, builder, st_ty, args[0], ir.Constant(_I64, 0)),
                _data_ptr(context, builder, src_ty, args[1], args[2]),
                _data_ptr(context, builder, dst_ty, args[3], args[4])])
            return context.get_dummy_value()

        return sig, codegen

    chacha.__name__ = f"_{name}"
    return intrinsic(chacha)


# 16 blocks (1 KiB) a call, the width of the widest vectors; and 4 blocks in
# 128-bit vectors for a chunk's Poly1305 key, which needs only block 0:
# computing 16 for it (a whole iteration of the stitched loop, or the 1 KiB
# call) cost ~0.25 us more of a 64 KiB chunk's ~14.5 on AVX-512, 2%
# (benchmarks/bench_chunk.py, benchmarks/HISTORY.md).
_chacha_xor_1k = _chacha_xor(16, _CHACHA_W)
_chacha_xor_256 = _chacha_xor(4, 4)


@_inner
def _bswap32(v):
    v = np.uint64(v) & _MASK32
    return np.uint32(((v & np.uint64(0xFF)) << np.uint64(24)) | ((v & np.uint64(0xFF00)) << np.uint64(8))
                     | ((v >> np.uint64(8)) & np.uint64(0xFF00)) | (v >> np.uint64(24)))


@_inner
def _set_key(st, key):
    for i in range(8):
        st[4 + i] = _le32(key, 4 * i)


@_inner
def _age_nonce(counter, flag, mask):
    """Nonce = (counter as 11 bytes big-endian || flag) XOR mask, as the ChaCha20 state's words 13..15.

    mask (12 bytes) is zeros for age's chunks; any other gives any RFC 8439
    nonce (_abi.BATCH_AEAD).
    """
    c = np.uint64(counter)
    return (_bswap32(c >> np.uint64(56)) ^ _le32(mask, 0),
            _bswap32(c >> np.uint64(24)) ^ _le32(mask, 4),
            _bswap32(((c & np.uint64(0xFFFFFF)) << np.uint64(8)) | np.uint64(flag)) ^ _le32(mask, 8))


@_inner
def _chacha20_xor(st, src, dst, tmp):
    """dst = src ^ keystream from counter st[12]; advances st[12]. Any length."""
    n = src.size
    pos = 0
    while pos + BLOCK16 <= n:
        _chacha_xor_1k(st, src, pos, dst, pos)
        st[12] += np.uint32(16)
        pos += BLOCK16
    rem = n - pos
    if rem:
        _copy(tmp, 0, src, pos, rem)
        _chacha_xor_1k(st, tmp, 0, tmp, 0)
        _copy(dst, pos, tmp, 0, rem)
        st[12] += np.uint32((rem + 63) // 64)
