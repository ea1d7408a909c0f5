"""ChaCha20-Poly1305 (RFC 8439) kernels for age's STREAM chunks.

The whole call graph of the kernels lives in this one module on purpose:
the cache of the compiled batch kernel (_cache) is keyed on the hash of this
file (and of _build and _abi), and Numba's own on-disk cache, which keeps the
single-message kernels the tests call, on its timestamp; neither notices an
edit to a callee in another module. With everything here, editing any kernel
invalidates every cached build.

Layout of the work:
  * ChaCha20 runs 16 blocks at once as 16 SIMD lanes in LLVM IR (one <16 x i32>
    vector per state word), transposes back to byte order with shufflevector
    and XORs 1 KiB of input straight into the output, at any alignment.
  * Poly1305 runs 16 lanes (Horner with r^16, the last group with r^16..r^1
    per lane) for the bulk of a message, in radix 2^44 on AVX-512 IFMA where
    the target has it, else in 26-bit limbs; a radix-2^64 step written as
    LLVM i128 arithmetic does everything else.
  * Sealing encrypts a chunk, then MACs the ciphertext (from L2). Opening
    MACs first and decrypts only a verified chunk.

Kernels take contiguous typed arrays and never raise on user input; the
public wrappers in agefast.kernels validate.
"""

import ctypes
import os

import numpy as np
from llvmlite import ir
from numba import carray, config, njit, types
from numba.core import caching, cgutils
from numba.extending import intrinsic, register_jitable

from . import _abi, _cache
from ._abi import OPEN, SEAL


class _Trusted:
    """A Numba cache locator that takes a folder only where no other account can write.

    Numba loads pickles and machine code from its cache: a folder another
    account can write into (a shared NUMBA_CACHE_DIR, say) would run that
    account's code in this process. The folder is created 0700 and must pass
    agefast's own cache checks (_cache.path_refusal), else this locator
    declines it, with one warning.
    """

    def ensure_cache_path(self):
        os.makedirs(self.get_cache_path(), 0o700, exist_ok=True)
        super().ensure_cache_path()
        why = _cache.path_refusal(self.get_cache_path())
        if why:
            _cache.warn_once(f"not using Numba's cache {why}")
            raise PermissionError(why)


class _UserProvided(_Trusted, caching.UserProvidedCacheLocator):
    pass


class _UserWide(_Trusted, caching.UserWideCacheLocator):
    pass


class _OutOfTreeCache(caching.FunctionCache):
    """Numba's on-disk cache for these kernels, kept out of the package.

    Numba caches next to the source when it can write there: inside
    site-packages for an installed agefast. pip leaves those files behind on
    uninstall, and the leftover agefast/kernels/__pycache__ then makes
    site-packages/agefast a namespace package that shadows a later editable
    install. So the order here is NUMBA_CACHE_DIR if set, else the user-wide
    cache (~/.cache/numba, one subdirectory per source directory), each only
    where it is trusted (_Trusted), and no disk cache where neither is.
    Freshness works as Numba's own: each entry is keyed on this file's
    timestamp and size.
    """

    class _impl_class(caching.CompileResultCacheImpl):
        _locator_classes = [_UserProvided, _UserWide]


def _jit(func):
    """One place for decorator options: cached (out of tree, above), GIL
    released, no boundscheck (it stops vectorization), no fastmath (integer
    code gains nothing)."""
    dispatcher = njit(nogil=True)(func)
    # What cache=True does (Dispatcher.enable_caching), with our locators;
    # cache=True itself would first create the in-tree cache directory.
    try:
        dispatcher._cache = _OutOfTreeCache(func)
    except RuntimeError:
        pass     # no trusted folder ("no locator available"): compiled in each process, cached nowhere
    return dispatcher


# Helpers are compiled into their callers only (no machine code, no CPython
# wrapper of their own): that cut the cold compile of the batch kernels ~3x.
_inner = register_jitable


def _target_features():
    """The CPU features Numba compiles for: NUMBA_CPU_FEATURES, else the host's."""
    if config.CPU_FEATURES is not None:
        features = config.CPU_FEATURES
    else:
        import llvmlite.binding as ll
        features = ll.get_host_cpu_features().flatten()
    return {f[1:] for f in features.split(",") if f.startswith("+")}


FEATURES = _target_features()
# Poly1305 lanes in radix 2^44 with vpmadd52luq/huq where the target has
# AVX-512 IFMA, else radix 2^26 with vpmuludq. A compile-time constant: Numba's
# cache index is keyed on the CPU name and features, so a build for other
# features never loads this one's machine code.
IFMA = "avx512ifma" in FEATURES and "avx512f" in FEATURES

CHUNK = _abi.CHUNK
TAG = _abi.TAG
BLOCK16 = 1024          # bytes of keystream per 16-lane ChaCha20 call
GROUP = 256             # bytes per 16-lane Poly1305 Horner step
LANES = 16
LANE_MIN = 1024         # shorter messages use only the radix-2^64 Poly1305 path

_M26 = np.uint64(0x3FFFFFF)
_M44 = np.uint64((1 << 44) - 1)
_M42 = np.uint64((1 << 42) - 1)
_U20 = np.uint64(20)
_U1 = np.uint64(1)
_U5 = np.uint64(5)
_MASK32 = np.uint64(0xFFFFFFFF)

# ---------------------------------------------------------------- LLVM IR

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_I128 = ir.IntType(128)
_V16 = ir.VectorType(_I32, 16)
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
_QUARTER_ROUNDS = ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
                   (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14))


def _data_ptr(context, builder, ty, value, offset):
    ary = context.make_array(ty)(context, builder, value=value)
    return builder.gep(ary.data, [offset])


def _rotl(builder, v, n):
    w = v.type.count
    return builder.or_(builder.shl(v, ir.Constant(v.type, [n] * w)),
                       builder.lshr(v, ir.Constant(v.type, [32 - n] * w)))


def _call_outlined(builder, name, emit, args):
    """Call `name`, defined once per LLVM module and never inlined.

    Emitting the big vector bodies inline at every call site multiplied
    LLVM's work in each caller; one out-of-line copy per module keeps the cold
    compile down, and a call per KiB costs nothing measurable.
    """
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ir.VoidType(), [a.type for a in args]), name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        body = ir.IRBuilder(fn.append_basic_block("entry"))
        emit(body, *fn.args)
        body.ret_void()
    builder.call(fn, args)


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


def _emit_chacha_xor_1k(b, st, src, dst):
    W = _CHACHA_W
    vt = ir.VectorType(_I32, W)
    words = [b.load(b.gep(st, [ir.Constant(_I64, i)])) for i in range(4, 16)]
    sp = b.bitcast(src, vt.as_pointer())
    dp = b.bitcast(dst, vt.as_pointer())
    for half in range(16 // W):
        init = [ir.Constant(vt, [c] * W) for c in _SIGMA]
        for w in words:
            v = b.insert_element(ir.Constant(vt, ir.Undefined), w, ir.Constant(_I32, 0))
            init.append(b.shuffle_vector(v, v, ir.Constant(vt, [0] * W)))
        init[12] = b.add(init[12], ir.Constant(vt, list(range(half * W, half * W + W))))
        x = list(init)
        for _ in range(10):
            for a, q, c, d in _QUARTER_ROUNDS:
                x[a] = b.add(x[a], x[q])
                x[d] = _rotl(b, b.xor(x[d], x[a]), 16)
                x[c] = b.add(x[c], x[d])
                x[q] = _rotl(b, b.xor(x[q], x[c]), 12)
                x[a] = b.add(x[a], x[q])
                x[d] = _rotl(b, b.xor(x[d], x[a]), 8)
                x[c] = b.add(x[c], x[d])
                x[q] = _rotl(b, b.xor(x[q], x[c]), 7)
        out = [b.add(x[i], init[i]) for i in range(16)]
        # W x W transposes of words [0, W), [W, 2W), ...: block k of this half is
        # the k-th row of each, in order (16 // W vectors of W words)
        cols = [_transpose(b, out[g:g + W]) for g in range(0, 16, W)]
        for k in range(W):
            for g in range(16 // W):
                idx = [ir.Constant(_I64, (half * W + k) * (16 // W) + g)]
                v = b.load(b.gep(sp, idx), align=1)
                b.store(b.xor(v, cols[g][k]), b.gep(dp, idx), align=1)


@intrinsic
def _chacha_xor_1k(typingctx, state, src, soff, dst, doff):
    """dst[doff:doff+1024] = src[soff:soff+1024] ^ 16 ChaCha20 blocks.

    state is a uint32[16] ChaCha20 state; block i uses counter state[12] + i.
    The state is not advanced.
    """
    sig = types.void(state, src, soff, dst, doff)

    def codegen(context, builder, signature, args):
        st_ty, src_ty, _, dst_ty, _ = signature.args
        _call_outlined(builder, "agefast_chacha20_xor_1k", _emit_chacha_xor_1k, [
            _data_ptr(context, builder, st_ty, args[0], ir.Constant(_I64, 0)),
            _data_ptr(context, builder, src_ty, args[1], args[2]),
            _data_ptr(context, builder, dst_ty, args[3], args[4])])
        return context.get_dummy_value()

    return sig, codegen


def _wide(builder, v):
    return builder.zext(v, _I128)


def _hi64(builder, v):
    return builder.trunc(builder.lshr(v, ir.Constant(_I128, 64)), _I64)


@intrinsic
def _poly_step(typingctx, h0, h1, h2, m0, m1, pad, r0, r1):
    """One Poly1305 block in radix 2^64: h = (h + m + pad*2^128) * r, partially reduced.

    Written as i128 arithmetic so LLVM emits mulx/adc; no branches.
    h2 stays below 8, r must be clamped (r1 % 4 == 0).
    """
    u64 = types.uint64
    sig = types.UniTuple(u64, 3)(u64, u64, u64, u64, u64, u64, u64, u64)

    def codegen(context, builder, signature, args):
        h0, h1, h2, m0, m1, pad, r0, r1 = args
        b = builder
        d0 = b.add(_wide(b, h0), _wide(b, m0))
        d1 = b.add(b.add(_wide(b, h1), _wide(b, m1)), b.lshr(d0, ir.Constant(_I128, 64)))
        h0 = b.trunc(d0, _I64)
        h1 = b.trunc(d1, _I64)
        h2 = b.add(b.add(h2, _hi64(b, d1)), pad)
        s1 = b.add(r1, b.lshr(r1, ir.Constant(_I64, 2)))
        d0 = b.add(b.mul(_wide(b, h0), _wide(b, r0)), b.mul(_wide(b, h1), _wide(b, s1)))
        d1 = b.add(b.add(b.mul(_wide(b, h0), _wide(b, r1)), b.mul(_wide(b, h1), _wide(b, r0))),
                   _wide(b, b.mul(h2, s1)))
        h2 = b.mul(h2, r0)
        d1 = b.add(d1, b.lshr(d0, ir.Constant(_I128, 64)))
        h0 = b.trunc(d0, _I64)
        h1 = b.trunc(d1, _I64)
        h2 = b.add(h2, _hi64(b, d1))
        c = b.add(b.lshr(h2, ir.Constant(_I64, 2)), b.and_(h2, ir.Constant(_I64, ~3 & (2**64 - 1))))
        h2 = b.and_(h2, ir.Constant(_I64, 3))
        t = b.add(_wide(b, h0), _wide(b, c))
        h0 = b.trunc(t, _I64)
        t = b.add(_wide(b, h1), b.lshr(t, ir.Constant(_I128, 64)))
        h1 = b.trunc(t, _I64)
        h2 = b.add(h2, _hi64(b, t))
        return context.make_tuple(builder, signature.return_type, [h0, h1, h2])

    return sig, codegen


@intrinsic
def _poly_final(typingctx, h0, h1, h2, s0, s1):
    """Tag = (h mod 2^130-5) + s mod 2^128 for a partially reduced h, without branches."""
    u64 = types.uint64
    sig = types.UniTuple(u64, 2)(u64, u64, u64, u64, u64)

    def codegen(context, builder, signature, args):
        h0, h1, h2, s0, s1 = args
        b = builder
        h = b.or_(_wide(b, h0), b.shl(_wide(b, h1), ir.Constant(_I128, 64)))
        g = b.add(h, ir.Constant(_I128, 5))
        # carry of h + 5 into bit 130 <=> h >= p
        top = b.add(h2, b.zext(b.icmp_unsigned('<', g, h), _I64))
        mask = b.sub(ir.Constant(_I128, 0), _wide(b, b.lshr(top, ir.Constant(_I64, 2))))
        h = b.or_(b.and_(g, mask), b.and_(h, b.not_(mask)))
        t = b.add(h, b.or_(_wide(b, s0), b.shl(_wide(b, s1), ir.Constant(_I128, 64))))
        return context.make_tuple(builder, signature.return_type,
                                  [b.trunc(t, _I64), _hi64(b, t)])

    return sig, codegen


# Pure-Python stand-ins for the IR intrinsics, used only under
# NUMBA_DISABLE_JIT=1 so that the kernels' Python runs (and is covered) as is.
# They compute the same values by big-integer arithmetic.

_P = (1 << 130) - 5
_M64 = (1 << 64) - 1


def _py_chacha_xor_1k(state, src, soff, dst, doff):
    m32 = 0xFFFFFFFF
    for blk in range(16):
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


def _py_poly_step(h0, h1, h2, m0, m1, pad, r0, r1):
    h = int(h0) | int(h1) << 64 | int(h2) << 128
    h = (h + (int(m0) | int(m1) << 64 | int(pad) << 128)) * (int(r0) | int(r1) << 64) % _P
    return np.uint64(h & _M64), np.uint64(h >> 64 & _M64), np.uint64(h >> 128)


def _py_poly_final(h0, h1, h2, s0, s1):
    t = ((int(h0) | int(h1) << 64 | int(h2) << 128) % _P + (int(s0) | int(s1) << 64)) & ((1 << 128) - 1)
    return np.uint64(t & _M64), np.uint64(t >> 64)


def _py_poly_lanes(hl, pw, buf, off, ngroups):
    bits, count = (44, 3) if IFMA else (26, 5)

    def limbs(a, lane):
        return sum(int(a[k * LANES + lane]) << (bits * k) for k in range(count))
    for lane in range(LANES):
        h, r = limbs(hl, lane), limbs(pw, lane)
        for g in range(ngroups):
            p = off + GROUP * g + 16 * lane
            h = (h + int.from_bytes(bytes(buf[p:p + 16]), "little") + (1 << 128)) * r % _P
        for k in range(count):
            hl[k * LANES + lane] = (h >> (bits * k)) & ((1 << bits) - 1)


if config.DISABLE_JIT:
    _chacha_xor_1k = _py_chacha_xor_1k
    _poly_step = _py_poly_step
    _poly_final = _py_poly_final


# ---------------------------------------------------------------- helpers


@_inner
def _le64(buf, p):
    v = np.uint64(0)
    for i in range(8):
        v |= np.uint64(buf[p + i]) << np.uint64(8 * i)
    return v


@_inner
def _le32(buf, p):
    return np.uint32(np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << np.uint32(8))
                     | (np.uint32(buf[p + 2]) << np.uint32(16)) | (np.uint32(buf[p + 3]) << np.uint32(24)))


@_inner
def _put_le64(buf, p, v):
    for i in range(8):
        buf[p + i] = np.uint8((v >> np.uint64(8 * i)) & np.uint64(0xFF))


@_inner
def _copy(dst, doff, src, soff, n):
    # explicit loops: Numba's slice assignment costs seconds of compile time
    for i in range(n):
        dst[doff + i] = src[soff + i]


@_inner
def _fill(dst, n, v):
    for i in range(n):
        dst[i] = v


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
def _set_age_nonce(st, counter, flag):
    """Nonce = counter as 11 bytes big-endian || flag, as ChaCha20 state words 13..15."""
    c = np.uint64(counter)
    st[13] = _bswap32(c >> np.uint64(56))
    st[14] = _bswap32(c >> np.uint64(24))
    st[15] = _bswap32(((c & np.uint64(0xFFFFFF)) << np.uint64(8)) | np.uint64(flag))


@_inner
def _set_nonce(st, nonce):
    for i in range(3):
        st[13 + i] = _le32(nonce, 4 * i)


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


# ---------------------------------------------------------------- Poly1305


@_inner
def _put_limbs(pw, nl, lane, a0, a1, a2):
    """Store a (radix 2^64, partially reduced) as lane limbs, and their multiples for the reduction.

    IFMA: 44-bit limbs r0..r2, then 20*r1, 20*r2 (2^132 = 20 mod p). Else
    26-bit limbs r0..r4, then 5*r1..5*r4.
    """
    if IFMA:
        lim0 = a0 & _M44
        lim1 = ((a0 >> np.uint64(44)) | (a1 << np.uint64(20))) & _M44
        lim2 = (a1 >> np.uint64(24)) | (a2 << np.uint64(40))
        pw[lane] = lim0
        pw[nl + lane] = lim1
        pw[2 * nl + lane] = lim2
        if pw.size > 5 * nl:
            pw[3 * nl + lane] = lim1 * _U20
            pw[4 * nl + lane] = lim2 * _U20
        return
    lim0 = a0 & _M26
    lim1 = (a0 >> np.uint64(26)) & _M26
    lim2 = ((a0 >> np.uint64(52)) | (a1 << np.uint64(12))) & _M26
    lim3 = (a1 >> np.uint64(14)) & _M26
    lim4 = (a1 >> np.uint64(40)) | (a2 << np.uint64(24))
    pw[lane] = lim0
    pw[nl + lane] = lim1
    pw[2 * nl + lane] = lim2
    pw[3 * nl + lane] = lim3
    pw[4 * nl + lane] = lim4
    if pw.size > 5 * nl:
        pw[5 * nl + lane] = lim1 * _U5
        pw[6 * nl + lane] = lim2 * _U5
        pw[7 * nl + lane] = lim3 * _U5
        pw[8 * nl + lane] = lim4 * _U5


@_inner
def _poly_begin(ctx, hl, pw16, pwfin, key, koff, lanes):
    """Load r (clamped) and s from key[koff:koff+32]; with lanes, precompute r^1..r^16."""
    r0 = _le64(key, koff) & np.uint64(0x0FFFFFFC0FFFFFFF)
    r1 = _le64(key, koff + 8) & np.uint64(0x0FFFFFFC0FFFFFFC)
    ctx[0] = r0
    ctx[1] = r1
    ctx[2] = _le64(key, koff + 16)
    ctx[3] = _le64(key, koff + 24)
    ctx[4] = 0
    ctx[5] = 0
    ctx[6] = 0
    if lanes:
        _fill(hl, hl.size, np.uint64(0))
        z = np.uint64(0)
        a0, a1, a2 = r0, r1, z
        for k in range(1, LANES + 1):
            if k > 1:
                a0, a1, a2 = _poly_step(a0, a1, a2, z, z, z, r0, r1)
            _put_limbs(pwfin, LANES, LANES - k, a0, a1, a2)     # lane l ends with r^(16-l)
        for lane in range(LANES):
            _put_limbs(pw16, LANES, lane, a0, a1, a2)


_V16I64 = ir.VectorType(_I64, 16)


def _vsplat64(n):
    return ir.Constant(_V16I64, [n] * 16)


def _deinterleave4(builder, v):
    """Four <16 x i32> holding 16 consecutive 16-byte blocks -> word k of every block, k = 0..3."""
    def sh(a, b, idx):
        return builder.shuffle_vector(a, b, ir.Constant(_V16, idx))
    even = [4 * k for k in range(8)]
    pairs = []
    for a, b in ((v[0], v[1]), (v[2], v[3])):
        pairs.append((sh(a, b, even + [i + 1 for i in even]), sh(a, b, [i + 2 for i in even] + [i + 3 for i in even])))
    (a01, a23), (b01, b23) = pairs
    lo = list(range(8)) + list(range(16, 24))
    hi = list(range(8, 16)) + list(range(24, 32))
    return sh(a01, b01, lo), sh(a01, b01, hi), sh(a23, b23, lo), sh(a23, b23, hi)


def _emit_poly_lanes(b, hl, pw, base, ngroups):
    vp = _V16I64.as_pointer()
    hp = b.bitcast(hl, vp)
    pp = b.bitcast(pw, vp)

    def narrow(v):  # known < 2^32: lets LLVM use vpmuludq
        return b.zext(b.trunc(v, ir.VectorType(_I32, 16)), _V16I64)

    pw_rows = [narrow(b.load(b.gep(pp, [ir.Constant(_I64, k)]), align=8)) for k in range(9)]
    r = pw_rows[:5]
    s = [None] + pw_rows[5:]
    state = []
    for k in range(5):
        slot = cgutils.alloca_once(b, _V16I64)
        b.store(b.load(b.gep(hp, [ir.Constant(_I64, k)]), align=8), slot)
        state.append(slot)
    m26 = _vsplat64(0x3FFFFFF)
    with cgutils.for_range(b, ngroups) as loop:
        gp = b.bitcast(b.gep(base, [b.mul(loop.index, ir.Constant(_I64, GROUP))]), _V16.as_pointer())
        words = _deinterleave4(b, [b.load(b.gep(gp, [ir.Constant(_I64, i)]), align=1) for i in range(4)])
        t0, t1, t2, t3 = [b.zext(w, _V16I64) for w in words]
        m = [b.and_(t0, m26),
             b.and_(b.or_(b.lshr(t0, _vsplat64(26)), b.shl(t1, _vsplat64(6))), m26),
             b.and_(b.or_(b.lshr(t1, _vsplat64(20)), b.shl(t2, _vsplat64(12))), m26),
             b.and_(b.or_(b.lshr(t2, _vsplat64(14)), b.shl(t3, _vsplat64(18))), m26),
             b.or_(b.lshr(t3, _vsplat64(8)), _vsplat64(1 << 24))]
        a = [narrow(b.add(b.load(state[k]), m[k])) for k in range(5)]
        d = []
        for k in range(5):
            acc = None
            for i in range(5):
                j = k - i
                prod = b.mul(a[i], r[j] if j >= 0 else s[j + 5])
                acc = prod if acc is None else b.add(acc, prod)
            d.append(acc)
        sh26 = _vsplat64(26)
        for k in range(4):
            d[k + 1] = b.add(d[k + 1], b.lshr(d[k], sh26))
        d0 = b.add(b.and_(d[0], m26), b.mul(b.lshr(d[4], sh26), _vsplat64(5)))
        b.store(b.and_(d0, m26), state[0])
        b.store(b.add(b.and_(d[1], m26), b.lshr(d0, sh26)), state[1])
        for k in (2, 3, 4):
            b.store(b.and_(d[k], m26), state[k])
    for k in range(5):
        b.store(b.load(state[k]), b.gep(hp, [ir.Constant(_I64, k)]), align=8)


_V8I64 = ir.VectorType(_I64, 8)


def _ifma(builder, hi):
    name = "llvm.x86.avx512.vpmadd52%s.uq.512" % ("h" if hi else "l")
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(_V8I64, [_V8I64] * 3), name)
    return fn


def _emit_poly_lanes_ifma(b, hl, pw, base, ngroups):
    """16 lanes as two halves of 8, 3 limbs of 44 bits, products by vpmadd52luq/huq.

    A product a*r of 52-bit operands is lo + hi*2^52, so a limb's high half
    joins the next limb shifted left by 8 (2^52 = 2^44 * 2^8); 2^132 = 20 mod p
    is folded into the precomputed 20*r1, 20*r2.
    """
    vp = _V8I64.as_pointer()
    hp = b.bitcast(hl, vp)
    pp = b.bitcast(pw, vp)
    madd_lo, madd_hi = _ifma(b, False), _ifma(b, True)

    def splat(n):
        return ir.Constant(_V8I64, [n] * 8)

    def row(ptr, k, half):      # row k of 16 lanes, half 0 or 1
        return b.load(b.gep(ptr, [ir.Constant(_I64, 2 * k + half)]), align=8)

    pws = [[row(pp, k, half) for k in range(5)] for half in range(2)]
    state = []
    for half in range(2):
        slots = []
        for k in range(3):
            slot = cgutils.alloca_once(b, _V8I64)
            b.store(row(hp, k, half), slot)
            slots.append(slot)
        state.append(slots)
    m44, zero = splat((1 << 44) - 1), splat(0)
    with cgutils.for_range(b, ngroups) as loop:
        gp = b.bitcast(b.gep(base, [b.mul(loop.index, ir.Constant(_I64, GROUP))]), vp)
        for half in range(2):
            v0 = b.load(b.gep(gp, [ir.Constant(_I64, 2 * half)]), align=1)
            v1 = b.load(b.gep(gp, [ir.Constant(_I64, 2 * half + 1)]), align=1)
            t0 = b.shuffle_vector(v0, v1, ir.Constant(ir.VectorType(_I32, 8), list(range(0, 16, 2))))
            t1 = b.shuffle_vector(v0, v1, ir.Constant(ir.VectorType(_I32, 8), list(range(1, 16, 2))))
            m = [b.and_(t0, m44),
                 b.and_(b.or_(b.lshr(t0, splat(44)), b.shl(t1, splat(20))), m44),
                 b.or_(b.lshr(t1, splat(24)), splat(1 << 40))]
            sl = state[half]
            a = [b.add(b.load(sl[k]), m[k]) for k in range(3)]
            r0, r1, r2, s1, s2 = pws[half]
            terms = ((r0, s2, s1), (r1, r0, s2), (r2, r1, r0))   # d_k = sum_i a_i * terms[k][i]
            lo, hi = [], []
            for k in range(3):
                acc_lo, acc_hi = zero, zero
                for i in range(3):
                    acc_lo = b.call(madd_lo, [acc_lo, a[i], terms[k][i]])
                    acc_hi = b.call(madd_hi, [acc_hi, a[i], terms[k][i]])
                lo.append(acc_lo)
                hi.append(acc_hi)
            d1 = b.add(b.add(lo[1], b.lshr(lo[0], splat(44))), b.shl(hi[0], splat(8)))
            d2 = b.add(b.add(lo[2], b.lshr(d1, splat(44))), b.shl(hi[1], splat(8)))
            top = b.add(b.lshr(d2, splat(42)), b.shl(hi[2], splat(10)))
            d0 = b.add(b.and_(lo[0], m44), b.mul(top, splat(5)))
            b.store(b.and_(d0, m44), sl[0])
            b.store(b.add(b.and_(d1, m44), b.lshr(d0, splat(44))), sl[1])
            b.store(b.and_(d2, splat((1 << 42) - 1)), sl[2])
    for half in range(2):
        for k in range(3):
            b.store(b.load(state[half][k]), b.gep(hp, [ir.Constant(_I64, 2 * k + half)]), align=8)


@intrinsic
def _poly_lanes(typingctx, hl, pw, buf, off, ngroups):
    """16-lane Poly1305 Horner over ngroups*256 bytes of buf from off.

    Lane l absorbs block 16g+l, then is multiplied by its power in pw. hl holds
    the lane state as 5 rows of 16 26-bit limbs, pw the power as rows r0..r4,
    5*r1..5*r4. Written in IR with explicit <16 x i64> vectors: LLVM's loop
    vectorizer picked an interleave too wide for 16 lanes and ran scalar.
    Products take operands zero-extended from i32, so they become vpmuludq.
    """
    sig = types.void(hl, pw, buf, off, ngroups)

    def codegen(context, builder, signature, args):
        hl_ty, pw_ty, buf_ty, _, _ = signature.args
        _call_outlined(builder, "agefast_poly1305_lanes", _emit_poly_lanes_ifma if IFMA else _emit_poly_lanes, [
            _data_ptr(context, builder, hl_ty, args[0], ir.Constant(_I64, 0)),
            _data_ptr(context, builder, pw_ty, args[1], ir.Constant(_I64, 0)),
            _data_ptr(context, builder, buf_ty, args[2], args[3]),
            context.cast(builder, args[4], signature.args[4], types.int64)])
        return context.get_dummy_value()

    return sig, codegen


if config.DISABLE_JIT:     # after the intrinsic of the same name, which it replaces
    _poly_lanes = _py_poly_lanes


@_inner
def _poly_fold(ctx, hl):
    """Sum the lanes into the radix-2^64 accumulator ctx[4:7] (replacing it)."""
    nl = hl.size // 5
    z = np.uint64(0)
    if IFMA:
        l0, l1, l2 = z, z, z
        for lane in range(nl):
            l0 += hl[lane]
            l1 += hl[nl + lane]
            l2 += hl[2 * nl + lane]
        for _ in range(2):
            l1 += l0 >> np.uint64(44)
            l0 &= _M44
            l2 += l1 >> np.uint64(44)
            l1 &= _M44
            l0 += (l2 >> np.uint64(42)) * _U5
            l2 &= _M42
        # carry through every limb once more: each must fit its field before the ORs
        l1 += l0 >> np.uint64(44)
        l0 &= _M44
        l2 += l1 >> np.uint64(44)
        l1 &= _M44
        ctx[4] = l0 | (l1 << np.uint64(44))
        ctx[5] = (l1 >> np.uint64(20)) | (l2 << np.uint64(24))
        ctx[6] = l2 >> np.uint64(40)
        return
    l0, l1, l2, l3, l4 = z, z, z, z, z
    for lane in range(nl):
        l0 += hl[lane]
        l1 += hl[nl + lane]
        l2 += hl[2 * nl + lane]
        l3 += hl[3 * nl + lane]
        l4 += hl[4 * nl + lane]
    for _ in range(2):
        l1 += l0 >> np.uint64(26)
        l0 &= _M26
        l2 += l1 >> np.uint64(26)
        l1 &= _M26
        l3 += l2 >> np.uint64(26)
        l2 &= _M26
        l4 += l3 >> np.uint64(26)
        l3 &= _M26
        l0 += (l4 >> np.uint64(26)) * _U5
        l4 &= _M26
    # carry through every limb once more: each must fit its field before the ORs
    l1 += l0 >> np.uint64(26)
    l0 &= _M26
    l2 += l1 >> np.uint64(26)
    l1 &= _M26
    l3 += l2 >> np.uint64(26)
    l2 &= _M26
    l4 += l3 >> np.uint64(26)
    l3 &= _M26
    ctx[4] = l0 | (l1 << np.uint64(26)) | (l2 << np.uint64(52))
    ctx[5] = (l2 >> np.uint64(12)) | (l3 << np.uint64(14)) | (l4 << np.uint64(40))
    ctx[6] = l4 >> np.uint64(24)


@_inner
def _poly_blocks(ctx, buf, off, nblocks, pad):
    h0, h1, h2 = ctx[4], ctx[5], ctx[6]
    r0, r1 = ctx[0], ctx[1]
    p = np.uint64(pad)
    for i in range(nblocks):
        q = off + 16 * i
        h0, h1, h2 = _poly_step(h0, h1, h2, _le64(buf, q), _le64(buf, q + 8), p, r0, r1)
    ctx[4] = h0
    ctx[5] = h1
    ctx[6] = h2


@_inner
def _poly_tag(ctx, out, off):
    t0, t1 = _poly_final(ctx[4], ctx[5], ctx[6], ctx[2], ctx[3])
    _put_le64(out, off, t0)
    _put_le64(out, off + 8, t1)


@_inner
def _poly_zero_padded(ctx, msg, block):
    """Absorb msg as 16-byte blocks, the last one zero-padded (AEAD padding)."""
    full = msg.size // 16
    _poly_blocks(ctx, msg, 0, full, 1)
    rem = msg.size - 16 * full
    if rem:
        _fill(block, 16, np.uint8(0))
        _copy(block, 0, msg, 16 * full, rem)
        _poly_blocks(ctx, block, 0, 1, 1)


# ---------------------------------------------------------------- AEAD


@_inner
def _scratch():
    """Everything a batch needs, allocated once per call: (state, ctx, lanes, r^16, r^(16-l), bytes)."""
    st = np.zeros(16, np.uint32)
    ctx = np.zeros(8, np.uint64)
    hl = np.zeros(5 * LANES, np.uint64)
    pw16 = np.zeros(9 * LANES, np.uint64)
    pwfin = np.zeros(9 * LANES, np.uint64)
    # bytes: [0:1024] zeros, [1024:2048] keystream / tail, [2048:2064] tag, [2064:2080] pad block
    buf = np.zeros(_abi.BYTES_SIZE, np.uint8)
    return st, ctx, hl, pw16, pwfin, buf


@_inner
def _mac_begin(scr, aad, n):
    """Derive the Poly1305 key (block 0), absorb aad; returns the number of 16-lane groups for n ct bytes.

    Leaves the ChaCha20 counter at 1.
    """
    st, ctx, hl, pw16, pwfin, buf = scr
    st[12] = 0
    _chacha_xor_1k(st, buf, 0, buf, 1024)
    st[12] = 1
    groups = n // GROUP if n >= LANE_MIN else 0
    _poly_begin(ctx, hl, pw16, pwfin, buf, 1024, groups > 0)
    _poly_zero_padded(ctx, aad, buf[2064:2080])
    if groups:
        # the aad's running sum joins the first block of lane 0
        _put_limbs(hl, LANES, 0, ctx[4], ctx[5], ctx[6])
    return groups


@_inner
def _mac_end(scr, ct, groups, aadlen, out, ooff):
    """MAC ct (after _mac_begin); tag to out[ooff:ooff+16]."""
    st, ctx, hl, pw16, pwfin, buf = scr
    if groups:
        if groups > 1:
            _poly_lanes(hl, pw16, ct, 0, groups - 1)
        _poly_lanes(hl, pwfin, ct, GROUP * (groups - 1), 1)
        _poly_fold(ctx, hl)
    _poly_zero_padded(ctx, ct[GROUP * groups:], buf[2064:2080])
    blk = buf[2064:2080]
    _put_le64(blk, 0, np.uint64(aadlen))
    _put_le64(blk, 8, np.uint64(ct.size))
    _poly_blocks(ctx, blk, 0, 1, 1)
    _poly_tag(ctx, out, ooff)


@_inner
def _seal_one(scr, aad, src, dst):
    """dst[:n] = ChaCha20(src), dst[n:n+16] = tag, for the key and nonce in scr's state.

    Two passes: encrypt the whole message, then MAC the ciphertext (a 64 KiB
    chunk stays in L2 between them; a KiB-by-KiB interleave in one IR function
    measured no faster, docs/engine.md).
    """
    st, ctx, hl, pw16, pwfin, buf = scr
    n = src.size
    groups = _mac_begin(scr, aad, n)
    _chacha20_xor(st, src, dst[:n], buf[1024:2048])
    _mac_end(scr, dst[:n], groups, aad.size, dst, n)


@_inner
def _open_one(scr, aad, src, dst):
    """Open src (ciphertext || tag) into dst; returns whether the tag verified.

    dst is written only after the tag matched (compared in constant time).
    """
    st, ctx, hl, pw16, pwfin, buf = scr
    n = src.size - TAG
    groups = _mac_begin(scr, aad, n)
    _mac_end(scr, src[:n], groups, aad.size, buf, 2048)
    diff = np.uint8(0)
    for i in range(TAG):
        diff |= buf[2048 + i] ^ src[n + i]
    ok = diff == 0
    if ok:
        _chacha20_xor(st, src[:n], dst[:n], buf[1024:2048])
    return ok


@_inner
def _seal_batch(key, counter, src, dst, final, scr):
    """Seal src as consecutive chunks into dst (agefast.chunks semantics); returns bytes written."""
    _set_key(scr[0], key)
    aad = scr[5][:0]
    n = src.size
    pos = 0
    out = 0
    i = np.uint64(0)
    while True:
        end = min(pos + CHUNK, n)
        last = end == n
        _set_age_nonce(scr[0], np.uint64(counter) + i, 1 if (last and final) else 0)
        size = end - pos
        _seal_one(scr, aad, src[pos:end], dst[out:out + size + TAG])
        out += size + TAG
        pos = end
        i += _U1
        if last:
            return out


@_inner
def _open_batch(key, counter, src, dst, final, scr):
    """Open consecutive sealed chunks; returns how many verified (index of the first failure).

    Per chunk: MAC, compare, then decrypt; stops at the first failure.
    """
    _set_key(scr[0], key)
    aad = scr[5][:0]
    n = src.size
    pos = 0
    out = 0
    done = 0
    while pos < n:
        end = min(pos + CHUNK + TAG, n)
        if end - pos < TAG:
            return done
        _set_age_nonce(scr[0], np.uint64(counter) + np.uint64(done), 1 if (end == n and final) else 0)
        size = end - pos - TAG
        if not _open_one(scr, aad, src[pos:end], dst[out:out + size]):
            return done
        out += size
        pos = end
        done += 1
    return done


@_inner
def _batch(key, counter, src, dst, final, mode, scr):
    """Seal (mode SEAL: returns bytes written) or open (OPEN: verify then
    decrypt each chunk, stop at the first failure; returns the number of
    chunks verified) a batch, with the caller's scratch `scr` (_scratch())."""
    if mode == SEAL:
        return _seal_batch(key, counter, src, dst, final, scr)
    return _open_batch(key, counter, src, dst, final, scr)


@intrinsic
def _at(typingctx, ptr, offset):
    """ptr + offset bytes, for carving the caller's scratch into arrays."""
    sig = types.voidptr(types.voidptr, types.int64)

    def codegen(context, builder, signature, args):
        return builder.gep(args[0], [args[1]])

    return sig, codegen


@_inner
def _carve(scratch):
    """The caller's scratch (_abi.SCRATCH_SIZE bytes) as the arrays _scratch() makes."""
    return (carray(_at(scratch, _abi.STATE_AT), 16, np.uint32),
            carray(_at(scratch, _abi.CTX_AT), 8, np.uint64),
            carray(_at(scratch, _abi.LANES_AT), 5 * LANES, np.uint64),
            carray(_at(scratch, _abi.POWERS_AT), 9 * LANES, np.uint64),
            carray(_at(scratch, _abi.FINAL_POWERS_AT), 9 * LANES, np.uint64),
            carray(_at(scratch, _abi.BYTES_AT), _abi.BYTES_SIZE, np.uint8))


def batch_c(key, counter, src, n, dst, m, final, mode, scratch):
    """The batch kernel over raw pointers, compiled by _build as a C function (_abi.BATCH_ARGS).

    key: 32 bytes; src: n bytes; dst: m bytes; scratch: _abi.SCRATCH_SIZE
    zeroed bytes, 8-byte aligned, owned by this call. Every buffer comes
    from the caller, so the compiled code allocates nothing and needs nothing
    of Numba's runtime.
    """
    return _batch(carray(key, 32, np.uint8), counter, carray(src, n, np.uint8), carray(dst, m, np.uint8),
                  final != 0, mode, _carve(scratch))


# ------------------------------------------------ files (pread / pwrite)


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
    multiples of WRITE_PIECE (stream.write_all says why); whether all of it was written."""
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
        done = _batch(key, np.uint64(b * _abi.FILE_BATCH), src[place:place + size_in],
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


# ------------------------------------------------ single messages (tests)


@_jit
def _chacha20(key, nonce, counter, src, dst):
    """RFC 8439 ChaCha20 with a 12-byte nonce and 32-bit initial block counter."""
    scr = _scratch()
    st = scr[0]
    _set_key(st, key)
    _set_nonce(st, nonce)
    st[12] = np.uint32(counter)
    _chacha20_xor(st, src, dst, scr[5][1024:2048])


@_jit
def _poly1305(key, msg, out):
    """RFC 8439 Poly1305 of msg under a 32-byte one-time key; tag to out[:16]."""
    st, ctx, hl, pw16, pwfin, buf = _scratch()
    groups = msg.size // GROUP if msg.size >= LANE_MIN else 0
    _poly_begin(ctx, hl, pw16, pwfin, key, 0, groups > 0)
    if groups:
        if groups > 1:
            _poly_lanes(hl, pw16, msg, 0, groups - 1)
        _poly_lanes(hl, pwfin, msg, GROUP * (groups - 1), 1)
        _poly_fold(ctx, hl)
    full = msg.size // 16
    _poly_blocks(ctx, msg, GROUP * groups, full - 16 * groups, 1)
    rem = msg.size - 16 * full
    if rem:
        blk = buf[2064:2080]
        _fill(blk, 16, np.uint8(0))
        _copy(blk, 0, msg, 16 * full, rem)
        blk[rem] = 1
        _poly_blocks(ctx, blk, 0, 1, 0)
    _poly_tag(ctx, out, 0)


@_jit
def _aead_seal(key, nonce, aad, src, dst):
    """ChaCha20-Poly1305 seal of one message: dst = ciphertext || tag."""
    scr = _scratch()
    _set_key(scr[0], key)
    _set_nonce(scr[0], nonce)
    _seal_one(scr, aad, src, dst)


@_jit
def _aead_open(key, nonce, aad, src, dst):
    scr = _scratch()
    _set_key(scr[0], key)
    _set_nonce(scr[0], nonce)
    return _open_one(scr, aad, src, dst)
