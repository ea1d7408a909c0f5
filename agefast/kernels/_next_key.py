"""The next chunk's Poly1305 key, made on the scalar units beside this chunk's IFMA lanes.

In the split form (_stitched) a chunk ends with its IFMA lanes hashing the
last eighth of it, work bound by the vector units' throughput, while the
scalar units wait. The next chunk's key is the opposite: ChaCha20 block 0
and a chain of Poly1305 products, latency bound, on the scalar units. One
after the other, in cache, the lanes took 0.55 us and the key 0.39; in one
function, a step of the key beside each lane group, the two took 0.56
(benchmarks/HISTORY.md, issue 46). The key goes to the scratch's next-key
words (_abi.NEXT_KEY_AT), which _chunk._take_key installs when that chunk
starts.
"""

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._chacha20 import _emit_quarter_round, _py_chacha_xor, _QUARTER_ROUNDS, _SIGMA
from ._common import _call_outlined, _data_ptr, _I32, _I64, GROUP, LANES
from ._poly1305 import (_emit_ifma_group, _emit_poly_mul, _emit_poly_step, _ifma_lanes_load, _ifma_lanes_store,
                        _P, _py_poly_lanes)

# Lane groups the key is spread over: ChaCha20's ten double rounds, one beside each of the first ten, then
# the fifteen products r^2..r^16, one beside each of the next fifteen.
BESIDE = 10 + 15
# The next key's words (_abi.NEXT_KEY_WORDS): r and s at 0, r^join at 4, and from POWERS_AT the lanes'
# powers r^(16-l) as rows r0, r1, r2, 20*r1, 20*r2 of 16 lanes (_poly1305._put_limbs' IFMA layout).
POWERS_AT = 8
_M44 = (1 << 44) - 1


def _emit(b, hl, pw, base, ngroups, st, w13, w14, w15, nk, join):
    lanes = _ifma_lanes_load(b, hl, pw)

    def const(v):
        return ir.Constant(_I64, v)

    def group(index):
        _emit_ifma_group(b, lanes, b.gep(base, [b.mul(index, const(GROUP))]))

    def slots(values):
        made = []
        for v in values:
            slot = cgutils.alloca_once(b, v.type)
            b.store(v, slot)
            made.append(slot)
        return made

    # ChaCha20 block 0 under the next chunk's nonce: only its first 32 bytes, r and s, are kept
    init = ([ir.Constant(_I32, c) for c in _SIGMA] + [b.load(b.gep(st, [const(i)])) for i in range(4, 12)]
            + [ir.Constant(_I32, 0), w13, w14, w15])
    x_slots = slots(init)
    with cgutils.for_range(b, const(10)) as loop:
        group(loop.index)
        x = [b.load(s) for s in x_slots]
        for quarter in _QUARTER_ROUNDS:
            _emit_quarter_round(b, x, *quarter)
        for slot, v in zip(x_slots, x):
            b.store(v, slot)
    words = [b.zext(b.add(b.load(x_slots[k]), init[k]), _I64) for k in range(8)]
    key = [b.or_(words[2 * k], b.shl(words[2 * k + 1], const(32))) for k in range(4)]
    r0 = b.and_(key[0], const(0x0FFFFFFC0FFFFFFF))
    r1 = b.and_(key[1], const(0x0FFFFFFC0FFFFFFC))
    for i, v in enumerate((r0, r1, key[2], key[3])):
        b.store(v, b.gep(nk, [const(i)]))

    def put(a, lane):
        """r^(16-lane) as the lanes' limbs, as _poly1305._put_limbs stores them."""
        a0, a1, a2 = a
        lim1 = b.and_(b.or_(b.lshr(a0, const(44)), b.shl(a1, const(20))), const(_M44))
        lim2 = b.or_(b.lshr(a1, const(24)), b.shl(a2, const(40)))
        for k, v in enumerate((b.and_(a0, const(_M44)), lim1, lim2, b.mul(lim1, const(20)), b.mul(lim2, const(20)))):
            b.store(v, b.gep(nk, [b.add(const(POWERS_AT + LANES * k), lane)]))

    zero = const(0)
    put((r0, r1, zero), const(LANES - 1))
    a_slots = slots((r0, r1, zero))
    with cgutils.for_range(b, const(15)) as loop:
        group(b.add(loop.index, const(10)))
        a = _emit_poly_step(b, *[b.load(s) for s in a_slots], zero, zero, zero, r0, r1)
        for slot, v in zip(a_slots, a):
            b.store(v, slot)
        put(a, b.sub(const(LANES - 2), loop.index))     # the product of step i is r^(i+2)
    with cgutils.for_range(b, b.sub(ngroups, const(BESIDE))) as loop:
        group(b.add(loop.index, const(BESIDE)))
    _ifma_lanes_store(b, hl, lanes)
    # r^join = r^16 r^(join-16), the second read back from its limbs (as the steps left it, below 2^131)
    lane = b.sub(const(2 * LANES), join)
    lim = [b.load(b.gep(nk, [b.add(const(POWERS_AT + LANES * k), lane)])) for k in range(3)]
    power = (b.or_(lim[0], b.shl(lim[1], const(44))), b.or_(b.lshr(lim[1], const(20)), b.shl(lim[2], const(24))),
             b.lshr(lim[2], const(40)))
    product = _emit_poly_mul(b, *[b.load(s) for s in a_slots], *power, zero, zero, zero)
    for i, v in enumerate(product):
        b.store(v, b.gep(nk, [const(4 + i)]))


@intrinsic
def _lanes_beside_key(typingctx, hl, pw, buf, off, ngroups, st, nonce, nk, join):
    """_poly1305._poly_lanes(hl, pw, buf, off, ngroups) on IFMA lanes, and beside it the Poly1305 key of
    the chunk whose nonce is `nonce` (state words 13..15) under st's key, with the lanes' powers of its r
    and r^join (16 < join <= 32), into nk. ngroups must be at least BESIDE."""
    sig = types.void(hl, pw, buf, off, ngroups, st, nonce, nk, join)

    def codegen(context, builder, signature, args):
        hl_ty, pw_ty, buf_ty, _, n_ty, st_ty, nonce_ty, nk_ty, join_ty = signature.args
        zero = ir.Constant(_I64, 0)
        words = [context.cast(builder, builder.extract_value(args[6], i), nonce_ty[i], types.uint32)
                 for i in range(3)]
        _call_outlined(builder, "agefast_lanes_beside_key", _emit, [
            _data_ptr(context, builder, hl_ty, args[0], zero),
            _data_ptr(context, builder, pw_ty, args[1], zero),
            _data_ptr(context, builder, buf_ty, args[2], args[3]),
            context.cast(builder, args[4], n_ty, types.int64),
            _data_ptr(context, builder, st_ty, args[5], zero),
            *words,
            _data_ptr(context, builder, nk_ty, args[7], zero),
            context.cast(builder, args[8], join_ty, types.int64)])
        return context.get_dummy_value()

    return sig, codegen


def _py_lanes_beside_key(hl, pw, buf, off, ngroups, st, nonce, nk, join):
    """NUMBA_DISABLE_JIT=1: the same values by big-integer arithmetic (the powers fully reduced)."""
    _py_poly_lanes(hl, pw, buf, off, ngroups)
    state = st.copy()
    state[12] = 0
    state[13:16] = nonce
    block = np.zeros(64, np.uint8)
    _py_chacha_xor(state, block, 0, block, 0, blocks=1)
    words = np.frombuffer(bytes(block[:32]), "<u8")
    nk[0] = words[0] & np.uint64(0x0FFFFFFC0FFFFFFF)
    nk[1] = words[1] & np.uint64(0x0FFFFFFC0FFFFFFC)
    nk[2], nk[3] = words[2], words[3]
    r = int(nk[0]) | int(nk[1]) << 64
    for k in range(1, LANES + 1):
        a = pow(r, k, _P)
        limbs = [a & _M44, a >> 44 & _M44, a >> 88]
        for row, v in enumerate(limbs + [20 * limbs[1], 20 * limbs[2]]):
            nk[POWERS_AT + LANES * row + LANES - k] = v
    a = pow(r, int(join), _P)
    nk[4], nk[5], nk[6] = a & (2**64 - 1), a >> 64 & (2**64 - 1), a >> 128


if config.DISABLE_JIT:     # after the intrinsic of the same name, which it replaces
    _lanes_beside_key = _py_lanes_beside_key
