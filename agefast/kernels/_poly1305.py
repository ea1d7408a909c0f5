"""Poly1305 (RFC 8439): 16 lanes in LLVM IR for the bulk of a message, a radix-2^64 step for the rest.

The lanes run Horner with r^16 (the last group with r^16..r^1 per lane), in
radix 2^44 on AVX-512 IFMA where the target has it, else in 26-bit limbs; a
radix-2^64 step written as LLVM i128 arithmetic does everything else.
"""

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._common import (_call_outlined, _copy, _data_ptr, _fill, _I128, _I32, _I64, _inner, _le64, _M26, _M42, _M44,
    _put_le64, _U20, _U5, _V16, GROUP, IFMA, LANES)


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
        return context.make_tuple(builder, signature.return_type, _emit_poly_step(builder, *args))

    return sig, codegen


def _add_carry(b, x, y):
    """(x + y mod 2^64, its carry as an i64) through llvm.uadd.with.overflow, which the x86 backend turns
    into add / adc $0 where the carry joins the next word."""
    fn = b.module.globals.get("llvm.uadd.with.overflow.i64") or ir.Function(
        b.module, ir.FunctionType(ir.LiteralStructType([_I64, ir.IntType(1)]), [_I64, _I64]),
        "llvm.uadd.with.overflow.i64")
    r = b.call(fn, [x, y])
    return b.extract_value(r, 0), b.zext(b.extract_value(r, 1), _I64)


def _emit_poly_step(b, h0, h1, h2, m0, m1, pad, r0, r1):
    """The IR of _poly_step: (h0, h1, h2) of (h + m + pad*2^128) * r, partially reduced (h2 < 8).

    The carries between the words of h are uadd.with.overflow, not i128 adds:
    from the i128 form LLVM moved the carry into h2 through setb / movzbl /
    adc / inc (the stitched loop: 36 instructions a step where 32 do).
    """
    h0, c = _add_carry(b, h0, m0)
    h1, c1 = _add_carry(b, h1, m1)
    h1, c2 = _add_carry(b, h1, c)
    h2 = b.add(b.add(h2, b.add(c1, c2)), pad)
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
    h0, k = _add_carry(b, h0, c)
    h1, k = _add_carry(b, h1, k)
    return h0, h1, b.add(h2, k)


_I320 = ir.IntType(320)     # five words: a product of two 131-bit numbers


@intrinsic
def _poly_mul(typingctx, a0, a1, a2, q0, q1, q2, c0, c1, c2):
    """a * q + c mod 2^130-5, partially reduced (the result's top word below 5), for any a and q whose top
    words are below 8: neither need be clamped (powers of r are not), unlike _poly_step's r."""
    u64 = types.uint64
    sig = types.UniTuple(u64, 3)(u64, u64, u64, u64, u64, u64, u64, u64, u64)

    def codegen(context, builder, signature, args):
        return context.make_tuple(builder, signature.return_type, _emit_poly_mul(builder, *args))

    return sig, codegen


def _emit_poly_mul(b, a0, a1, a2, q0, q1, q2, c0, c1, c2):
    """The IR of _poly_mul: the nine 64 x 64-bit products summed in i320 (adds and shifts by whole words,
    which LLVM lowers to add/adc and moves; a multiply that wide it may not lower inline), then 2^130 = 5
    folded twice: below 2^262 + 2^131, then below 2^135, then below 2^130 + 160. No branches."""
    def wide(v, word):
        return b.shl(b.zext(v, _I320), ir.Constant(_I320, 64 * word))
    a, q = (a0, a1, a2), (q0, q1, q2)
    x = wide(c0, 0)
    for k, c in ((1, c1), (2, c2)):
        x = b.add(x, wide(c, k))
    for i in range(3):
        for j in range(3):
            x = b.add(x, b.shl(b.zext(b.mul(_wide(b, a[i]), _wide(b, q[j])), _I320), ir.Constant(_I320, 64 * (i + j))))
    low = ir.Constant(_I320, (1 << 130) - 1)
    for _ in range(2):
        top = b.lshr(x, ir.Constant(_I320, 130))
        x = b.add(b.and_(x, low), b.add(top, b.shl(top, ir.Constant(_I320, 2))))
    return [b.trunc(b.lshr(x, ir.Constant(_I320, 64 * k)), _I64) for k in range(3)]


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


def _py_poly_step(h0, h1, h2, m0, m1, pad, r0, r1):
    h = int(h0) | int(h1) << 64 | int(h2) << 128
    h = (h + (int(m0) | int(m1) << 64 | int(pad) << 128)) * (int(r0) | int(r1) << 64) % _P
    return np.uint64(h & _M64), np.uint64(h >> 64 & _M64), np.uint64(h >> 128)


def _py_poly_mul(a0, a1, a2, q0, q1, q2, c0, c1, c2):
    def num(w0, w1, w2):
        return int(w0) | int(w1) << 64 | int(w2) << 128
    h = (num(a0, a1, a2) * num(q0, q1, q2) + num(c0, c1, c2)) % _P
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
    _poly_step = _py_poly_step
    _poly_mul = _py_poly_mul
    _poly_final = _py_poly_final


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


@_inner
def _poly_power(r0, r1, e):
    """r^e mod 2^130-5, partially reduced, for e >= 1: squarings and multiplications by r along e's bits.
    e is a constant of the build, so which of them run depends on nothing secret."""
    z = np.uint64(0)
    a0, a1, a2 = r0, r1, z
    bit = 0
    while e >> (bit + 1):
        bit += 1
    while bit > 0:
        bit -= 1
        a0, a1, a2 = _poly_mul(a0, a1, a2, a0, a1, a2, z, z, z)
        if (e >> bit) & 1:
            a0, a1, a2 = _poly_mul(a0, a1, a2, r0, r1, z, z, z, z)
    return a0, a1, a2


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
    """16 lanes as two halves of 8, 3 limbs of 44 bits, products by vpmadd52luq/huq (_emit_ifma_group)."""
    lanes = _ifma_lanes_load(b, hl, pw)
    with cgutils.for_range(b, ngroups) as loop:
        _emit_ifma_group(b, lanes, b.gep(base, [b.mul(loop.index, ir.Constant(_I64, GROUP))]))
    _ifma_lanes_store(b, hl, lanes)


def _ifma_lanes_load(b, hl, pw):
    """(state, powers) of 16 IFMA lanes: per half of 8 lanes, three slots holding the limbs of h, and the
    rows r0, r1, r2, 20*r1, 20*r2 of its powers (loaded once, for every group after)."""
    vp = _V8I64.as_pointer()
    hp = b.bitcast(hl, vp)
    pp = b.bitcast(pw, vp)

    def row(ptr, k, half):      # row k of 16 lanes, half 0 or 1
        return b.load(b.gep(ptr, [ir.Constant(_I64, 2 * k + half)]), align=8)

    powers = [[row(pp, k, half) for k in range(5)] for half in range(2)]
    state = []
    for half in range(2):
        slots = []
        for k in range(3):
            slot = cgutils.alloca_once(b, _V8I64)
            b.store(row(hp, k, half), slot)
            slots.append(slot)
        state.append(slots)
    return state, powers


def _ifma_lanes_store(b, hl, lanes):
    """The lanes' state back into hl, as _ifma_lanes_load found it."""
    state, _ = lanes
    hp = b.bitcast(hl, _V8I64.as_pointer())
    for half in range(2):
        for k in range(3):
            b.store(b.load(state[half][k]), b.gep(hp, [ir.Constant(_I64, 2 * k + half)]), align=8)


def _emit_ifma_group(b, lanes, at):
    """One Horner step of the 16 lanes over the 256 bytes at `at`: lane l absorbs block l, then is multiplied
    by its power.

    A product a*r of 52-bit operands is lo + hi*2^52, so a limb's high half
    joins the next limb shifted left by 8 (2^52 = 2^44 * 2^8); 2^132 = 20 mod p
    is folded into the precomputed 20*r1, 20*r2.
    """
    state, powers = lanes
    madd_lo, madd_hi = _ifma(b, False), _ifma(b, True)

    def splat(n):
        return ir.Constant(_V8I64, [n] * 8)

    m44, zero = splat((1 << 44) - 1), splat(0)
    gp = b.bitcast(at, _V8I64.as_pointer())
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
        r0, r1, r2, s1, s2 = powers[half]
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
