"""An AVX-512 class's kernels lowered for AVX2, so that a CPU without AVX-512 runs their code.

The classes differ in choices the kernel modules make from the target's
features (_common.FEATURES) when they are imported and emit their code: 16
ChaCha20 blocks per vector, two passes or the stitched loop (16 blocks per
iteration), and with IFMA Poly1305 lanes in radix 2^44 on vpmadd52luq/huq.
lower() hands the modules a class's features while LLVM compiles for the
AVX2 machine the process runs on (NUMBA_CPU_NAME and NUMBA_CPU_FEATURES of
the avx2 class): LLVM splits the wider vectors, and the two IFMA
instructions, which it cannot select there, are written out in plain IR (the
52-bit product through i128); the stitched loop's ties of its two chains to a
zmm vector (_stitched._tie) tie them to a ymm of zeros instead. What this cannot show is LLVM's own AVX-512
code; the class's real build shows that where the CPU has the class
(test_subprocess.test_each_class_build).

Call lower() before anything imports the kernel modules but _common, in a
process of its own with a Numba cache of its own: the build it makes is
cached under the AVX2 target.
"""

import sys

from llvmlite import ir

_I64, _I128 = ir.IntType(64), ir.IntType(128)
_V8, _V8W = ir.VectorType(_I64, 8), ir.VectorType(_I128, 8)
_M52 = (1 << 52) - 1
_LATER = ("_chacha20", "_poly1305", "_aead", "_stitched")


def _madd52(seen: dict):
    """_poly1305._ifma's stand-in: vpmadd52luq (hi False) or vpmadd52huq as a function of plain IR."""
    def emit(builder, hi):
        name = "agefast_test_madd52" + ("hi" if hi else "lo")
        fn = builder.module.globals.get(name)
        if fn is None:
            seen["madd52"] += 1
            fn = ir.Function(builder.module, ir.FunctionType(_V8, [_V8] * 3), name)
            fn.linkage = "internal"
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            acc, x, y = fn.args
            m52 = ir.Constant(_V8, [_M52] * 8)
            product = b.mul(b.zext(b.and_(x, m52), _V8W), b.zext(b.and_(y, m52), _V8W))
            part = b.lshr(product, ir.Constant(_V8W, [52] * 8)) if hi else product
            b.ret(b.add(acc, b.and_(b.trunc(part, _V8), m52)))
        return fn
    return emit


def lower(features: str) -> dict:
    """Make the kernel modules emit the code of a class with LLVM `features`
    ("+avx512f,..."; the form as AGEFAST_KERNEL_FORM and the features choose
    it); returns what their code generation then records: the ChaCha20
    vector widths transposed and the IFMA stand-ins defined."""
    from agefast.kernels import _common

    early = [name for name in _LATER if f"agefast.kernels.{name}" in sys.modules]
    if early:
        raise RuntimeError(f"already imported with the host's features: {', '.join(early)}")
    wanted = {f[1:] for f in features.split(",") if f.startswith("+")}
    _common.FEATURES = frozenset(wanted)
    _common.IFMA, _common.STITCHED, _common.SPLIT, _common.WIDE = _common._choices()
    from agefast.kernels import _chacha20, _poly1305, _stitched

    seen: dict = {"widths": set(), "madd52": 0}
    _poly1305._ifma = _madd52(seen)
    transpose = _chacha20._transpose

    def recorded(builder, rows):
        seen["widths"].add(len(rows))
        return transpose(builder, rows)

    _chacha20._transpose = _stitched._transpose = recorded
    tie = _stitched._tie

    def tie_scalars(builder, values):
        # a <16 x i32> fits no AVX2 register: tie the chains alone (the tie computes nothing)
        return tie(builder, values[:-1] + [ir.Constant(ir.VectorType(ir.IntType(32), 8), None)])[:-1] + values[-1:]

    _stitched._tie = tie_scalars
    return seen
