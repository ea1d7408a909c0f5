"""What the compiled kernels share: the target's features, sizes, LLVM IR helpers and byte helpers.

The kernels are split by job (_chacha20, _poly1305, _aead, _stitched,
_file_io); a new kernel module goes beside them and into the cache key's list
of sources (agefast.kernels._cache._SOURCES), since Numba does not notice an
edit to a callee in another module.
"""

import os

import llvmlite.binding as ll
import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

from . import _abi, _shipped


# Helpers are compiled into their callers only (no machine code, no CPython
# wrapper of their own): that cut the cold compile of the batch kernels ~3x.
_inner = register_jitable


def _target_features():
    """The CPU features Numba compiles for: NUMBA_CPU_FEATURES, else the host's."""
    if config.CPU_FEATURES is not None:
        features = config.CPU_FEATURES
    else:
        features = ll.get_host_cpu_features().flatten()
    return {f[1:] for f in features.split(",") if f.startswith("+")}


FEATURES = _target_features()


def _ifma_lanes():
    """Whether the Poly1305 lanes are in radix 2^44 on vpmadd52luq/huq (the
    target has AVX-512 IFMA), rather than in radix 2^26 on vpmuludq."""
    return "avx512ifma" in FEATURES and "avx512f" in FEATURES


FORMS = ("stitched", "two-pass", "split", "split-wide")


def _form():
    """How the batch seals and opens its chunks: "stitched" (_stitched:
    ChaCha20 blocks in vector registers while the scalar multiplier hashes in
    radix 2^64), "two-pass" (ChaCha20, then Poly1305 on vector lanes),
    "split" (the stitched loop hashes part of each step, the lanes the rest of
    the chunk after it), or "split-wide" (split, the loop computing two sets
    of blocks a step, 2 KiB in zmm, 1 KiB in ymm: _stitched._SETS).

    Each class gets the form that measured fastest on it (docs/engine.md,
    benchmarks/bench_isa.py --classes --forms): split where AVX-512 has
    IFMA's lanes, stitched on the other x86 classes (AVX-512F and AVX2), two
    passes elsewhere (Arm's NEON, where nothing was measured), and a class for
    some CPU families its own (_shipped.CLASSES: Zen 5's split-wide), which
    the package build asks for by AGEFAST_KERNEL_FORM and a compile for this
    CPU's own features takes where it is of that class. AGEFAST_KERNEL_FORM
    asks for a form on any target, to measure the others on a class
    (benchmarks/bench_isa.py --forms): it is part of the cache's key, and no
    shipped build is used under it.
    """
    form = os.environ.get("AGEFAST_KERNEL_FORM", "") or _host_class_form()
    if not form:
        if _ifma_lanes():
            return "split"
        return "stitched" if "avx2" in FEATURES else "two-pass"
    if form not in FORMS:
        raise ValueError(f"AGEFAST_KERNEL_FORM must be one of {', '.join(map(repr, FORMS))}, not {form!r}")
    return form


def _host_class_form():
    """The form of the class this CPU takes (_shipped.host_class) where it has one of its own and Numba
    compiles for this CPU's features (no NUMBA_CPU_NAME or NUMBA_CPU_FEATURES); else ""."""
    if config.CPU_NAME is not None or config.CPU_FEATURES is not None:
        return ""
    cpu_class = _shipped.host_class()
    return cpu_class.form if cpu_class is not None else ""


def _choices():
    """(IFMA, STITCHED, SPLIT, WIDE) for the target's features and AGEFAST_KERNEL_FORM:
    Poly1305 lanes in radix 2^44; the batch through _stitched (which writes
    plaintext before the tag is known); part of each step left to the lanes;
    two sets of ChaCha20 blocks a step."""
    form = _form()
    return _ifma_lanes(), form != "two-pass", form in ("split", "split-wide"), form == "split-wide"


# Compile-time constants: Numba prunes the branch not taken, and its cache
# index is keyed on the CPU name and features (and agefast's on
# AGEFAST_KERNEL_FORM), so a build for others never loads this one's code.
IFMA, STITCHED, SPLIT, WIDE = _choices()

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

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_I128 = ir.IntType(128)
_V16 = ir.VectorType(_I32, 16)


def _data_ptr(context, builder, ty, value, offset):
    ary = context.make_array(ty)(context, builder, value=value)
    return builder.gep(ary.data, [offset])


def _call_outlined(builder, name, emit, args):
    """Call `name`, defined once per LLVM module and never inlined.

    Emitting the big vector bodies inline at every call site multiplied
    LLVM's work in each caller; one out-of-line copy per module keeps the cold
    compile down, and a call per KiB costs nothing measurable. The copies
    are linkonce_odr, so modules linked together keep one (_build: one in
    the object for both C functions).

    Each body aligns its own stack frame to 64 bytes. The bodies spill
    vectors to the stack, and the x86-64 ABI promises 16 bytes: where a
    caller's stack pointer happened to sit 16 bytes off, every spill of a
    32- or 64-byte vector crossed a cache line, and the same kernel ran at
    2.2 instead of 3.2 GB/s (AVX2 seal on a pool thread; the IFMA class on
    a main thread, 2.1 instead of 3.9; 2026-12-05, Zen 4). Which thread
    and which process got the slow frame was chance.
    """
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ir.VoidType(), [a.type for a in args]), name)
        fn.linkage = "linkonce_odr"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        fn.attributes.alignstack = 64
        body = ir.IRBuilder(fn.append_basic_block("entry"))
        emit(body, *fn.args)
        body.ret_void()
    builder.call(fn, args)


def _align_loop(latch, alignment):
    """Start the loop whose back edge is the branch `latch` at an `alignment`-byte boundary.

    Without it the loop starts wherever the code before it in the object
    ends, rounded to LLVM's default of 16 bytes on x86, so a change anywhere
    in the kernels moves it. The AVX2 stitched loop, byte for byte the same,
    ran ~10% slower on Zen 2 where it started 16 bytes past a 64-byte
    boundary than 0, 32 or 48 past (issue 46, benchmarks/HISTORY.md).
    """
    _loop_option(latch, "llvm.loop.align", alignment)


def _loop_option(latch, name, *values):
    """Give the loop whose back edge is the branch `latch` LLVM's loop option `name` (with i32 `values`).

    LLVM reads a loop's options from its metadata node, a node whose first
    operand is itself; llvmlite makes no such node, so its operands are set
    once it exists.
    """
    module = latch.parent.parent.module
    option = module.add_metadata([ir.MetaDataString(module, name), *(ir.Constant(_I32, v) for v in values)])
    loop = module.add_metadata([option])
    loop.operands = (loop, option)
    latch.set_metadata("llvm.loop", loop)


# Valgrind's client request VG_USERREQ__MAKE_MEM_DEFINED (memcheck.h: tool
# base 'M', 'C', then NOACCESS, UNDEFINED, DEFINED) and valgrind.h's x86-64
# request sequence: rdi rotated by 128 bits in all, then xchg rbx, rbx, with
# the request's six words at rax and its result in rdx (the default, 0,
# outside Valgrind, where the sequence changes nothing else).
_MAKE_MEM_DEFINED = (ord("M") << 24 | ord("C") << 16) + 2
_CLIENT_REQUEST = ("rolq $$3, %rdi ; rolq $$13, %rdi\n\trolq $$61, %rdi ; rolq $$51, %rdi\n\t"
                   "xchgq %rbx, %rbx")
# LLVM parses an inline asm's text when it emits code (an object file, or
# Numba's JIT for the single-message kernels), with the target's parser.
ll.initialize_native_asmparser()


@intrinsic
def _verdict(typingctx, diff):
    """Whether `diff`, the OR of a tag's byte differences, is 0: a tag comparison's one verdict, the only
    value computed from a secret that the kernels branch on.

    LLVM rewrote `diff == 0` over an OR of XORs into sixteen byte compares,
    each branching out at the first difference (the avx2 build, numba 0.68.1:
    tests/constant_time found it). An empty asm hides how diff was made, so
    the whole OR is computed and compared once. On x86-64 the verdict
    then passes through memory that a Valgrind client request marks defined:
    under memcheck, with the secrets marked undefined (tests/constant_time),
    the branches on the verdict (zero a failed chunk, stop the batch) are
    what is meant to follow from it, and any other use of a secret is
    reported. Outside Valgrind the request is a few register instructions
    a chunk that change nothing.
    """
    sig = types.boolean(diff)

    def codegen(context, builder, signature, args):
        b = builder
        hidden = b.asm(ir.FunctionType(_I64, [_I64]), "", "=r,0", [b.zext(args[0], _I64)], True)
        ok = b.zext(b.icmp_unsigned("==", hidden, ir.Constant(_I64, 0)), ir.IntType(8))
        if os.uname().machine != "x86_64":
            return b.trunc(ok, ir.IntType(1))
        slot = cgutils.alloca_once(b, ir.IntType(8))
        b.store(ok, slot)
        request = cgutils.alloca_once(b, ir.ArrayType(_I64, 6))
        words = (ir.Constant(_I64, _MAKE_MEM_DEFINED), b.ptrtoint(slot, _I64), ir.Constant(_I64, 1))
        for i in range(6):
            word = words[i] if i < len(words) else ir.Constant(_I64, 0)
            b.store(word, b.gep(request, [ir.Constant(_I32, 0), ir.Constant(_I32, i)]))
        b.asm(ir.FunctionType(_I64, [request.type, _I64]), _CLIENT_REQUEST,
              "={dx},{ax},0,~{cc},~{memory},~{dirflag},~{fpsr},~{flags}", [request, ir.Constant(_I64, 0)], True)
        return b.trunc(b.load(slot), ir.IntType(1))

    return sig, codegen


def _py_verdict(diff):
    """NUMBA_DISABLE_JIT=1: the kernels' Python runs as is."""
    return diff == 0


if config.DISABLE_JIT:
    _verdict = _py_verdict


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
