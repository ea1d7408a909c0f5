"""Stitched ChaCha20-Poly1305: one loop, two kinds of execution unit.

Each iteration of one IR loop computes a STEP of ChaCha20 blocks as lanes of
vectors, 8 blocks (512 bytes) in <8 x i32> (ymm) or, where the target has
AVX-512, 16 blocks (1 KiB) in <16 x i32> (zmm), and, in the same loop body,
Poly1305 over a STEP of ciphertext in radix 2^64 on the scalar multiplier
(_poly1305's mulx/adc block step). The vector code leaves the scalar units
idle and the scalar chain leaves the vector units idle, so each hides most of
the other: the two-pass form (ChaCha20, then 16 lanes of Poly1305 limbs) runs
both on the vector units, one after the other (docs/engine.md). The Poly1305
steps are spread over the 80 quarter rounds in the IR, so that the
out-of-order core sees both kinds of work in its window. On AVX-512 they
are two independent chains, each over half of the STEP, joined once an
iteration (_CHAINS).

Seal hashes the ciphertext written a STEP earlier, and bridges chunks: the
iteration that hashes a chunk's last STEP encrypts the next chunk's first
(seal_batch). Open hashes the ciphertext it decrypted a STEP before (on
AVX2 and in the split form: what it decrypts), so it writes plaintext
before the tag is known: a chunk whose tag fails has its output
overwritten with zeros before open_one returns. Each chunk's Poly1305 key
comes from four ChaCha20 blocks in 128-bit vectors (_key, _chunk._key), or
where the IFMA lanes run, after a batch's first chunk, from the scalar units
beside the lanes of the chunk before it (NEXT_KEY, _next_key).

The split form (_common.SPLIT, the IFMA class's) hashes part of each STEP
in the loop, and after the loop the vector lanes hash the rest of the chunk
from the accumulator the loop left: an eighth of it where the lanes are
IFMA's (radix 2^44), a quarter where they are 26-bit limbs on vpmuludq
(_HASHED). Its seal encrypts a chunk's first
STEP alone (nothing is written yet to hash) and does not bridge chunks.
The split-wide form (_common.WIDE, Zen 5's classes') is the split form over
STEPs of two sets of blocks (2 KiB in zmm, 1 KiB in ymm), an instruction of
each set in turn, for CPUs whose vector instructions' latency leaves one
set's rounds waiting on themselves (_SETS).

_aead hands this module the batch (seal_batch) or each chunk (open_one)
where the build is stitched (_common.STITCHED: every x86 class by default,
the form that measured fastest on each; AGEFAST_KERNEL_FORM asks for
another). What a chunk's seal and open share with the two-pass loop is
_chunk's.
"""

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._chunk import (_key as _chunk_key, _lane_groups, _mac_end, _mac_end_beside_key, _mac_finish, _seal_bounds,
                     _seal_chunk, _tag_matches, _take_key)
from ._chacha20 import (_chacha20_xor, _emit_quarter_round, _py_chacha_xor, _QUARTER_ROUNDS, _rotl, _SIGMA,
                        _transpose)
from ._common import (_align_loop, _call_outlined, _data_ptr, _fill, _I32, _I64, _inner, _loop_option, CHUNK,
                      FEATURES, GROUP, IFMA, LANES, SPLIT, TAG, WIDE)
from ._next_key import BESIDE
from ._poly1305 import _emit_poly_mul, _emit_poly_step, _poly_power, _py_poly_mul, _py_poly_step

_W = 16 if "avx512f" in FEATURES else 8     # ChaCha20 blocks per vector, one per lane
# Sets of _W blocks an iteration: two in the split-wide form. On Zen 5 a
# vector add, xor or rotation takes two cycles before its result can be
# used, and a quarter round is a chain of twelve: ten double rounds of one
# set of 16 zmm blocks took 49.7 cycles each (the chains' 48), two sets
# interleaved 65.1 for both, 1.53x the blocks a cycle (C probes,
# benchmarks/HISTORY.md, 2026-12-07). The 32 zmm registers hold two sets'
# state, with nothing to spare: the words the rounds start from are loaded
# again for the sum after them. AVX2's 16 ymm registers hold one set, and the
# second lives on the stack: on Zen 2, bound by its one shift pipe, that ran
# at 0.73x of the cipher alone; on Zen 5, where the rounds wait on their
# chains, at 1.02x (against one set's 0.92x).
_SETS = 2 if WIDE else 1
_BLOCKS = _W * _SETS    # ChaCha20 blocks per iteration
STEP = 64 * _BLOCKS     # bytes per iteration
# Poly1305 steps per iteration: a STEP of ciphertext, or in the split form
# part of one (the lanes hash the rest of the chunk after the loop, on the
# vector units ChaCha20 is bound by): seven eighths with IFMA's lanes, three
# quarters with 26-bit ones. On Zen 4 (issue 46, benchmarks/HISTORY.md) the
# IFMA class's two chains measured fastest with 56 of 64 blocks a KiB (1-2%
# over all 64, 2-5% over one chain with 40); with one chain, more than 40
# made it longer than the vector side. Beside two sets (split-wide), half
# with IFMA's lanes: on Zen 5 that loop was bound by how many instructions
# it issues, and with five eighths of each step on the chains it ran 7-10%
# slower (seven eighths: 20%).
_HASHED = (STEP * (4 if _SETS == 2 else 7) // 128 if IFMA else STEP * 3 // 64) if SPLIT else STEP // 16
# Independent Poly1305 chains per iteration. Each step waits for the one
# before it (_emit_poly_step is latency bound, ~12-16 cycles a step), so on
# AVX-512 one chain over the 64 blocks of a STEP is longer than the zmm
# ChaCha20 beside it. With two, the first half of the iteration's blocks
# continues the accumulator h and the second starts from zero:
# h = h_A r^(_HASHED/2) + h_B (mod 2^130-5) joins them (_poly_mul, with
# r^(_HASHED/2) made per chunk into ctx[7:10] by _key), and only h_A and the
# join carry over to the next iteration. On AVX2 one chain of 32 fits beside
# the ymm ChaCha20, and two measured slower (benchmarks/HISTORY.md, issue 46).
_CHAINS = 2 if _W == 16 else 1
# Whether a chunk's lanes make the next chunk's Poly1305 key beside them (_next_key): the split form on
# IFMA's lanes, where a whole chunk leaves them more than BESIDE groups (open leaves the fewest) and the
# chains' join r^(_HASHED/2) is r^16 times a power the lanes have.
NEXT_KEY = (SPLIT and IFMA and _CHAINS == 2 and (CHUNK - 16 * _HASHED * (CHUNK // STEP)) // GROUP > BESIDE
            and LANES < _HASHED // 2 <= 2 * LANES)
_V8 = ir.VectorType(_I32, 8)
_VW = ir.VectorType(_I32, _W)
# The zmm loop's 80 quarter rounds run as loops of one double round
# (_ROLLED), each with its share of the iteration's Poly1305 steps. Unrolled,
# an iteration was ~3,100 instructions, 15 KB of code, and on Zen 5 it ran at
# two speeds in spells of seconds, ~4.7 instructions a cycle or ~3.8: probably
# the front end, the slow speed being about what the decoders give where a
# loop is not held whole in the op cache (inferred from the rates and from
# probe loops; the guest has no performance counters). Rolled, both AVX-512
# classes hold one speed, at or near the cipher alone (issue 46,
# benchmarks/HISTORY.md, 2026-12-07). The ymm loop of one set stays
# unrolled: rolled, the AVX2 class measured the same on Zen 5, and its 0.97x
# on Zen 2 was measured unrolled; two sets unrolled would be twice its size.
_ROLLED = _W == 16 or _SETS == 2
# Quarter rounds of the ymm loop's iteration before its first Poly1305 step
# (unrolled). The steps' loads come first in an iteration, right behind the
# last one's stores, and a load whose address matches a pending store's
# modulo 4096 waits for it. Four quarter rounds later the stores have
# drained: one chunk 2% faster, over destinations at 38 offsets from their
# source (benchmarks/HISTORY.md).
_POLY_DELAY = 4
# The zmm loop asks for the source a page ahead of what it reads, a line at a
# time (prefetcht0), before the iteration's own loads: streaming 128 MiB from
# memory on Zen 5, the IFMA class's seal went from 0.84x to 0.95x of the
# cipher alone and its open from 0.82x to 1.05x in most processes (4-6 KiB
# ahead gained most; benchmarks/HISTORY.md, issue 46). Emitted after the
# loads (which LLVM folds into the XORs that follow them) the same
# prefetches gained nothing (tests/kernels/test_classes.py keeps the order).
# A prefetch never faults, so the last iterations may ask past the source.
# Two sets (a STEP of 2 KiB in zmm, 1 KiB in ymm) spread theirs over the
# double rounds, _SPREAD lines a double round, and ask for the
# destination's lines too: streaming from memory on Zen 5, 32 prefetches at
# the start of an iteration left open at 0.88-0.96x of the cipher alone,
# and 16 KiB ahead for the source and 4 KiB for the destination held the zmm
# loop at its speed in L2 (7.0-7.5 GB/s) from 256 KiB to 128 MiB
# (benchmarks/HISTORY.md; prefetchw for the destination, which the classes'
# features do not name, measured the same).
_PREFETCH = 16384 if _SETS == 2 else 4096 if _W == 16 else 0
_PREFETCH_DST = 4096 if _SETS == 2 else 0
_SPREAD = STEP // 64 // 8   # lines of source and of destination a double round (two sets)

# An 8 x 8 transpose of 32-bit words in three rounds that AVX2 does in one
# instruction each: vpunpckl/hdq and vpunpckl/hqdq within 128-bit halves, then
# vperm2i128 across them (_chacha20's interleave of whole rows would need
# cross-half shuffles in every round).
_DWORDS = ([0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15])
_QWORDS = ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15])
_HALVES = ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15])


def _transpose8(b, rows):
    """Row j = word j of 8 blocks -> out[k] = the 8 words of block k."""
    def shuffle(x, y, mask):
        return b.shuffle_vector(x, y, ir.Constant(_V8, mask))
    t = []
    for j in range(0, 8, 2):
        t += [shuffle(rows[j], rows[j + 1], m) for m in _DWORDS]
    # t[2i], t[2i+1]: rows 2i and 2i+1 interleaved (low, high words of each half)
    u = []
    for a, c in ((0, 2), (1, 3), (4, 6), (5, 7)):
        u += [shuffle(t[a], t[c], m) for m in _QWORDS]
    # u[k], k < 4: columns k and k+4 of rows 0-3 (one per half); u[k+4]: the same of rows 4-7
    return [shuffle(u[k % 4], u[k % 4 + 4], _HALVES[k // 4]) for k in range(8)]


_V32I8 = ir.VectorType(ir.IntType(8), 32)


def _byte_rotations(b):
    """A rotl(b, v, n) for the quarter rounds whose 8- and 16-bit rotations are vpshufb with masks LLVM cannot see.

    With constant masks, LLVM rewrote rotl(d ^ a, 8) after rotl(., 16) as
    rotl(d, 8) ^ rotl(a, 8): 153 more vpshufb per 512 bytes (2826
    instructions against 2693), on ports the rotations by 12 and 7 need. An
    empty inline asm hands it the masks as values it does not know.
    """
    shuffle = b.module.globals.get("llvm.x86.avx2.pshuf.b") or ir.Function(
        b.module, ir.FunctionType(_V32I8, [_V32I8, _V32I8]), "llvm.x86.avx2.pshuf.b")
    opaque = ir.InlineAsm(ir.FunctionType(_V32I8, [_V32I8]), "", "=x,0")
    masks = {n: b.call(opaque, [ir.Constant(_V32I8, [i - i % 4 + (i - n // 8) % 4 for i in range(32)])])
             for n in (8, 16)}

    def rotl(b, v, n):
        if n not in masks:
            return _rotl(b, v, n)
        return b.bitcast(b.call(shuffle, [b.bitcast(v, _V32I8), masks[n]]), v.type)

    return rotl


def _emit_stitched(b, st, ctx, src, dst, poly, count):
    """`count` iterations: dst[STEP i:] = src[STEP i:] ^ _BLOCKS blocks from counter st[12] + _BLOCKS i;
    hash _HASHED blocks of poly[16 _HASHED i:]."""
    def splat(w):
        v = b.insert_element(ir.Constant(_VW, ir.Undefined), w, ir.Constant(_I32, 0))
        return b.shuffle_vector(v, v, ir.Constant(_VW, [0] * _W))

    words = [b.load(b.gep(st, [ir.Constant(_I64, i)])) for i in range(4, 16)]
    base = [ir.Constant(_VW, [c] * _W) for c in _SIGMA] + [splat(w) for w in words]
    ctx64 = b.bitcast(ctx, _I64.as_pointer())
    r0, r1 = [b.load(b.gep(ctx64, [ir.Constant(_I64, i)])) for i in (0, 1)]
    power = [b.load(b.gep(ctx64, [ir.Constant(_I64, i)])) for i in (7, 8, 9)] if _CHAINS == 2 else []
    per = _HASHED // _CHAINS        # blocks each chain hashes an iteration
    zero = ir.Constant(_I64, 0)
    h_slots = []
    for i in (4, 5, 6):
        slot = cgutils.alloca_once(b, _I64)
        b.store(b.load(b.gep(ctx64, [ir.Constant(_I64, i)])), slot)
        h_slots.append(slot)
    sp = b.bitcast(src, _VW.as_pointer())
    dp = b.bitcast(dst, _VW.as_pointer())
    pp = b.bitcast(poly, _I64.as_pointer())
    one = ir.Constant(_I64, 1)
    # AVX-512 rotates by any count in one instruction (vprold); AVX2 needs the byte shuffles.
    rotl = _byte_rotations(b) if _W == 8 and "avx2" in FEATURES else _rotl
    groups = 16 // _W       # vectors per block
    with cgutils.for_range(b, count) as loop:
        i = loop.index
        counter = b.add(words[12 - 4], b.trunc(b.mul(i, ir.Constant(_I64, _BLOCKS)), _I32))
        if _PREFETCH:
            ahead = b.add(b.mul(i, ir.Constant(_I64, STEP)), ir.Constant(_I64, _PREFETCH))
        if _PREFETCH and _SETS == 1:
            for line in range(0, STEP, 64):
                _prefetch(b, b.gep(src, [b.add(ahead, ir.Constant(_I64, line))]))
        spread = None
        if _SETS > 1:
            spread = (b.gep(src, [ahead]),
                      b.gep(dst, [b.add(b.mul(i, ir.Constant(_I64, STEP)), ir.Constant(_I64, _PREFETCH_DST))]))

        def start(base):
            """The state the sets' rounds start from, each set's block counters _W past the one before."""
            init = []
            for s in range(_SETS):
                init += base[:12] + [b.add(splat(counter), ir.Constant(_VW, list(range(_W * s, _W * (s + 1)))))]
                init += base[13:]
            return init

        init = start(base)
        x = list(init)
        chains = [[b.load(slot) for slot in h_slots]] + [[zero] * 3] * (_CHAINS - 1)
        at = b.mul(i, ir.Constant(_I64, 2 * _HASHED))      # this iteration's first i64 of poly
        hashing = (pp, at, per, r0, r1, one)
        if _ROLLED:
            x, chains = _rolled_rounds(b, x, chains, hashing, rotl, spread)
        else:
            # step p of each chain before quarter round D + ceil(p (80 - D) / per), D = _POLY_DELAY: every
            # step has a place among the 80, since per < 80 - D
            places = [_POLY_DELAY - (-p * (80 - _POLY_DELAY) // per) for p in range(per)]
            chains = _rounds(b, x, chains, _QUARTER_ROUNDS * 10, places, hashing, 0, rotl)
        h = chains[0] if _CHAINS == 1 else _emit_poly_mul(b, *chains[0], *power, *chains[1])
        for slot, v in zip(h_slots, h):
            b.store(v, slot)
        if _SETS > 1:
            # the words loaded again: kept from before the rounds, they would take registers the sets need
            again = [b.load(b.gep(st, [ir.Constant(_I64, k)])) for k in range(4, 16)]
            init = start([ir.Constant(_VW, [c] * _W) for c in _SIGMA] + [splat(w) for w in again])
        transpose = _transpose8 if _W == 8 else _transpose
        for s in range(_SETS):
            out = [b.add(x[16 * s + k], init[16 * s + k]) for k in range(16)]
            cols = [transpose(b, out[g * _W:(g + 1) * _W]) for g in range(groups)]   # cols[g][k]: part g of block k
            first = b.mul(i, ir.Constant(_I64, 16 * _SETS))   # this set's first vector of src and dst (16 a set)
            if s:
                first = b.add(first, ir.Constant(_I64, 16 * s))
            at = [[[b.add(first, ir.Constant(_I64, groups * k + g))] for g in range(groups)] for k in range(_W)]
            # In zmm, every load of the set before any store: a load after a store to the same address
            # modulo 4096 waits for it, and dst 64 bytes past src modulo 4096, as pread's two new bytes
            # lie, made each block's store hold up the next block's load (+1 us of a 64 KiB chunk's 15).
            # AVX2 has 16 ymm registers, too few to hold 16 loads beside the keystream (3% slower so).
            early = ([[b.load(b.gep(sp, at[k][g]), align=1) for g in range(groups)] for k in range(_W)]
                     if _W == 16 else None)
            for k in range(_W):
                for g in range(groups):
                    v = early[k][g] if early else b.load(b.gep(sp, at[k][g]), align=1)
                    b.store(b.xor(v, cols[g][k]), b.gep(dp, at[k][g]), align=1)
        body = b.block
    if _W == 8:
        # where the ymm loop starts was measured on Zen 2 (_align_loop); the zmm loops stay where
        # LLVM puts them (the unrolled IFMA loop aligned to 64 bytes measured the same on Zen 5)
        _align_loop(body.terminator, 64)
    for i, slot in zip((4, 5, 6), h_slots):
        b.store(b.load(slot), b.gep(ctx64, [ir.Constant(_I64, i)]))


def _rounds(b, x, chains, quarters, places, hashing, base, rotl):
    """The quarter rounds `quarters` on x (in place), step j of each chain before quarter round places[j]
    (each a place in `quarters`): chain c hashes block per c + base + j of the blocks from i64 `at` of pp
    (`hashing`); returns the chains."""
    pp, at, per, r0, r1, one = hashing
    for q, quarter in enumerate(quarters):
        for j in (j for j, place in enumerate(places) if place == q):
            for c in range(_CHAINS):
                first = 2 * (per * c + base + j)
                m = [b.load(b.gep(pp, [b.add(at, ir.Constant(_I64, first + k))]), align=1) for k in (0, 1)]
                chains[c] = list(_emit_poly_step(b, *chains[c], *m, one, r0, r1))
        _emit_quarter_round(b, x, *quarter, rotl=rotl)
        if _CHAINS > 1:
            # LLVM's scheduler put two chains' 2,000 scalar instructions in one block before the
            # vector code (0.49x of the cipher alone), out of the out-of-order window's reach
            tied = _tie(b, [w for h in chains for w in h] + [x[quarter[3]]])
            chains = [tied[3 * c:3 * c + 3] for c in range(_CHAINS)]
            x[quarter[3]] = tied[-1]
    return chains


def _places(k):
    """Before which of a double round's eight quarter rounds its k Poly1305 steps of each chain go (rolled).

    As measured on Zen 5: in the split form from the first quarter round on
    (its open 5% faster than with the steps spread), in the stitched form
    spread between them (4-15% faster than from the first).
    """
    if SPLIT:
        return [8 * j // k for j in range(k)]
    return [8 * (j + 1) // (k + 1) for j in range(k)]


def _rolled_rounds(b, x, chains, hashing, rotl, spread=None):
    """The 10 double rounds as loops of one (_ROLLED): a loop for each number of steps a double round
    takes, the per steps of each chain spread over them as evenly as they go, the larger shares first;
    returns (x, chains) after them. spread: (source, destination) i8 pointers whose next _SPREAD lines
    each double round prefetches (two sets)."""
    pp, at, per, r0, r1, one = hashing
    x_slots = [cgutils.alloca_once(b, _VW) for _ in x]
    word_slots = [cgutils.alloca_once(b, _I64) for _ in range(3 * _CHAINS)]

    def store(x, chains):
        for slot, v in zip(x_slots + word_slots, x + [w for h in chains for w in h]):
            b.store(v, slot)

    def load():
        words = [b.load(slot) for slot in word_slots]
        return [b.load(slot) for slot in x_slots], [words[3 * c:3 * c + 3] for c in range(_CHAINS)]

    store(x, chains)
    many, extra = divmod(per, 10)
    base = 0
    rounds_before = 0       # double rounds of the loops before this one
    for k, n in ((many + 1, extra), (many, 10 - extra)):
        if n == 0:
            continue
        with cgutils.for_range(b, ir.Constant(_I64, n)) as loop:
            x, chains = load()
            if spread is not None:
                first = b.mul(b.add(loop.index, ir.Constant(_I64, rounds_before)), ir.Constant(_I64, 64 * _SPREAD))
                for line in range(_SPREAD):
                    for pointer in spread:
                        _prefetch(b, b.gep(pointer, [b.add(first, ir.Constant(_I64, 64 * line))]))
            step_at = b.add(at, b.mul(loop.index, ir.Constant(_I64, 2 * k)))
            chains = _rounds(b, x, chains, _QUARTER_ROUNDS, _places(k), (pp, step_at, per, r0, r1, one), base, rotl)
            store(x, chains)
            latch = b.block
        # LLVM would unroll a loop of so few iterations whole again
        _loop_option(latch.terminator, "llvm.loop.unroll.disable")
        base += n * k
        rounds_before += n
    return load()


def _prefetch(b, address):
    """prefetcht0 of the line at `address` (an i8*): read, kept in every cache level."""
    fn = b.module.globals.get("llvm.prefetch.p0") or ir.Function(
        b.module, ir.FunctionType(ir.VoidType(), [address.type, _I32, _I32, _I32]), "llvm.prefetch.p0")
    b.call(fn, [address, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])


def _tie(b, values):
    """values (i64s, then one vector) through an empty inline asm: no instruction, but what computes
    them stays before it and what uses them after it, so the scalar and vector code stay interleaved."""
    types_ = [v.type for v in values]
    n = len(values)
    cons = ",".join(["=r"] * (n - 1) + ["=v"] + [str(k) for k in range(n)])
    asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType(types_), types_), "", cons)
    r = b.call(asm, values)
    return [b.extract_value(r, k) for k in range(n)]


@intrinsic
def _stitched_steps(typingctx, state, ctx, src, soff, dst, doff, pbuf, poff, count):
    """count x STEP bytes: dst[doff:] = src[soff:] ^ ChaCha20 from counter state[12];
    Poly1305 (radix 2^64, ctx[0:2] = r, ctx[4:7] = h, with two chains ctx[7:10]
    = r^(_HASHED/2)) absorbs count x _HASHED full blocks of pbuf[poff:].

    The state is not advanced. pbuf may be src (open) or dst behind what is
    written (seal).
    """
    sig = types.void(state, ctx, src, soff, dst, doff, pbuf, poff, count)

    def codegen(context, builder, signature, args):
        st_ty, ctx_ty, src_ty, _, dst_ty, _, p_ty, _, count_ty = signature.args
        zero = ir.Constant(_I64, 0)
        _call_outlined(builder, "agefast_stitched_steps", _emit_stitched, [
            _data_ptr(context, builder, st_ty, args[0], zero),
            _data_ptr(context, builder, ctx_ty, args[1], zero),
            _data_ptr(context, builder, src_ty, args[2], args[3]),
            _data_ptr(context, builder, dst_ty, args[4], args[5]),
            _data_ptr(context, builder, p_ty, args[6], args[7]),
            context.cast(builder, args[8], count_ty, types.int64)])
        return context.get_dummy_value()

    return sig, codegen


def _py_stitched_steps(state, ctx, src, soff, dst, doff, pbuf, poff, count):
    """NUMBA_DISABLE_JIT=1: the same, through _chacha20's and _poly1305's big-integer stand-ins."""
    st = state.copy()
    tmp = np.zeros(STEP, np.uint8)
    h0, h1, h2 = ctx[4], ctx[5], ctx[6]
    per = _HASHED // _CHAINS
    z = np.uint64(0)
    for i in range(count):
        chains = [(h0, h1, h2)] + [(z, z, z)] * (_CHAINS - 1)
        for c in range(_CHAINS):    # hashed before this iteration writes (src may be dst)
            for j in range(per):
                p = poff + 16 * (_HASHED * i + per * c + j)
                m0, m1 = (np.frombuffer(bytes(pbuf[p + k:p + k + 8]), "<u8")[0] for k in (0, 8))
                chains[c] = _py_poly_step(*chains[c], m0, m1, 1, ctx[0], ctx[1])
        h0, h1, h2 = chains[0] if _CHAINS == 1 else _py_poly_mul(*chains[0], ctx[7], ctx[8], ctx[9], *chains[1])
        tmp[:STEP] = src[soff + STEP * i:soff + STEP * (i + 1)]
        st[12] = np.uint32(int(state[12]) + _BLOCKS * i)
        _py_chacha_xor(st, tmp, 0, tmp, 0, _BLOCKS)
        dst[doff + STEP * i:doff + STEP * (i + 1)] = tmp[:STEP]
    ctx[4], ctx[5], ctx[6] = h0, h1, h2


if config.DISABLE_JIT:
    _stitched_steps = _py_stitched_steps


@_inner
def _key(scr, aad, lanes):
    """_chunk._key, and with two chains r^(_HASHED/2) for their join into ctx[7:10]."""
    _chunk_key(scr, aad, lanes)
    if _CHAINS == 2:
        ctx = scr[1]
        ctx[7], ctx[8], ctx[9] = _poly_power(ctx[0], ctx[1], _HASHED // 2)


@_inner
def seal_batch(scr, mask, aad, counter, src, dst, final):
    """As _aead._seal_batch (returns bytes written), stitched, with one iteration bridging each pair of chunks.

    A chunk's first STEP bytes are encrypted before its loop, whose iterations
    hash the ciphertext written a STEP before; the last STEP is hashed
    in the iteration that encrypts the next chunk's first STEP (the
    next chunk's ChaCha20 state, this chunk's Poly1305 accumulator), then the
    tag is written. Only the batch's first chunk encrypts its first STEP
    with nothing of its own to hash (zeros into the spare accumulator), and
    only its last hashes its last bytes alone. The split form has a loop of
    its own (_seal_split).
    """
    if SPLIT:
        return _seal_split(scr, mask, aad, counter, src, dst, final)
    st, ctx, buf = scr[0], scr[1], scr[5]
    n = src.size
    chunks = max(1, (n + CHUNK - 1) // CHUNK)
    pos, end, last = _seal_chunk(st, mask, counter, 0, n, final)
    head = 0        # bytes of this chunk encrypted before its loop
    for i in range(chunks):
        size = end - pos
        out = pos + TAG * i
        _key(scr, aad, False)
        if head == 0 and size >= STEP:
            _stitched_steps(st, scr[2], src, pos, dst, out, buf, 0, 1)
            head = STEP
        st[12] = np.uint32(1 + head // 64)
        steps = (size - head) // STEP if head else 0
        _stitched_steps(st, ctx, src, pos + head, dst, out + head, dst, out, steps)
        st[12] += np.uint32(_BLOCKS * steps)
        hashed = STEP * steps
        _chacha20_xor(st, src[pos + head + hashed:end], dst[out + head + hashed:out + size], buf[1024:2048])
        head = 0
        if not last:
            # a chunk before the last is whole: a STEP left to hash
            pos, end, last = _seal_chunk(st, mask, counter, i + 1, n, final)
            if end - pos >= STEP:
                st[12] = 1
                _stitched_steps(st, ctx, src, pos, dst, pos + TAG * (i + 1), dst, out + hashed, 1)
                hashed += STEP
                head = STEP
        _mac_finish(scr, dst[out + hashed:out + size], aad.size, size, dst, out + size)
    return n + TAG * chunks


@_inner
def _seal_split(scr, mask, aad, counter, src, dst, final):
    """seal_batch in the split form: per chunk, the first STEP encrypted alone
    (nothing written yet to hash), then the stitched loop, each iteration
    hashing part of a STEP of what is written (_HASHED), then the lanes the
    rest, with the next chunk's key beside them where there is one (NEXT_KEY)."""
    st, buf = scr[0], scr[5]
    n = src.size
    i = 0
    taken = False
    while True:
        pos, end, last = _seal_chunk(st, mask, counter, i, n, final)
        size = end - pos
        out = pos + TAG * i
        steps = size // STEP
        hashed = 16 * _HASHED * max(steps - 1, 0)
        groups = _lane_groups(size - hashed)
        if taken:
            _take_key(scr, aad)
        else:
            _key(scr, aad, groups > 0)
        if steps:
            _chacha20_xor(st, src[pos:pos + STEP], dst[out:out + STEP], buf[1024:2048])
            _stitched_steps(st, scr[1], src, pos + STEP, dst, out + STEP, dst, out, steps - 1)
            st[12] += np.uint32(_BLOCKS * (steps - 1))
        done = STEP * steps
        _chacha20_xor(st, src[pos + done:end], dst[out + done:out + size], buf[1024:2048])
        mac = dst[out + hashed:out + size]
        taken = NEXT_KEY and not last       # a chunk before the last is whole
        if NEXT_KEY and not last:
            nonce = _seal_bounds(counter, i + 1, n, final, mask)[3]
            _mac_end_beside_key(scr, mac, groups, aad.size, size, dst, out + size, nonce, _HASHED // 2)
        else:
            _mac_end(scr, mac, groups, aad.size, size, dst, out + size)
        i += 1
        if last:
            return n + TAG * i


@_inner
def open_one(scr, aad, src, dst, taken, beside, nonce):
    """As _aead._open_one (returns whether the tag verified), stitched: decrypts while hashing
    (in zmm a STEP behind; split: part of each step, the rest on the lanes after the loop), so where
    the tag does not verify dst[:n] is overwritten with zeros before this returns.

    taken: the chunk's key was made beside the last chunk's lanes (_take_key installs it). beside
    (NEXT_KEY builds only, src a whole chunk): make the key of the chunk whose nonce is `nonce` beside
    this one's lanes.
    """
    st, buf = scr[0], scr[5]
    n = src.size - TAG
    steps = n // STEP
    # Stitched in zmm, the loop hashes the ciphertext a STEP behind what it decrypts, as seal's does:
    # the two chains' loads then find it in L1, where the XOR's brought it (open 3% faster on
    # AVX-512F, issue 46's HISTORY). The split loop's part of each step is behind it already; on AVX2
    # open was 2% slower so (the one chain has room to wait, the last STEP hashed alone does not).
    lag = min(steps, 1) if _W == 16 and not SPLIT else 0
    hashed = 16 * _HASHED * (steps - lag)
    # statements on SPLIT and NEXT_KEY, which Numba prunes: the stitched build has no lanes
    groups = 0
    if SPLIT:
        groups = _lane_groups(n - hashed)
    if taken:
        _take_key(scr, aad)
    else:
        _key(scr, aad, groups > 0)
    _chacha20_xor(st, src[:STEP * lag], dst[:STEP * lag], buf[1024:2048])
    _stitched_steps(st, scr[1], src, STEP * lag, dst, STEP * lag, src, 0, steps - lag)
    st[12] += np.uint32(_BLOCKS * (steps - lag))
    done = STEP * steps
    _chacha20_xor(st, src[done:n], dst[done:n], buf[1024:2048])
    if NEXT_KEY and beside:
        _mac_end_beside_key(scr, src[hashed:n], groups, aad.size, n, buf, 2048, nonce, _HASHED // 2)
    elif SPLIT:
        _mac_end(scr, src[hashed:n], groups, aad.size, n, buf, 2048)
    else:
        _mac_finish(scr, src[hashed:n], aad.size, n, buf, 2048)
    ok = _tag_matches(buf, 2048, src, n)
    if not ok:
        _fill(dst, n, np.uint8(0))
    return ok
