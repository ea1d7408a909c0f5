"""Which x86 instruction set extensions a machine instruction needs, from `objdump -d -M intel` of a build.

A table of what LLVM emits for the kernels: each mnemonic with the kind of
instruction it is, and the encoding (legacy, VEX or EVEX, read from the
instruction's bytes) and operands (zmm, ymm, xmm) settle the extension:
VEX integer operations on ymm need AVX2 and on xmm AVX; EVEX ones need
AVX-512F, AVX-512VL below 512 bits, AVX-512BW on bytes and words, and so on.
Extensions are named as LLVM's features are (the class's NUMBA_CPU_FEATURES);
the x86-64 baseline (every 64-bit CPU: integer instructions, SSE2) needs none.
A mnemonic the table does not know, or one in an encoding it does not expect
(VEX vpmadd52luq is AVX-IFMA, not AVX-512 IFMA), is an error, so an
instruction nobody classified cannot pass.
"""

import re
import subprocess

_JCC = "o no b nb ae nae c nc e z ne nz be nbe a na s ns p np pe po l nl ge nge le nle g ng".split()
# The x86-64 baseline's integer instructions (and padding: nop, with its data16 / cs prefixes).
_BASE = {"mov", "movabs", "movzx", "movsx", "movsxd", "add", "adc", "sub", "sbb", "and", "or", "xor", "not", "neg",
         "inc", "dec", "cmp", "test", "imul", "mul", "div", "idiv", "lea", "shr", "shl", "sar", "shld", "shrd", "rol",
         "ror", "push", "pop", "call", "ret", "jmp", "xchg", "xadd", "cmpxchg", "nop", "cdq", "cqo", "cdqe", "bswap",
         "bt", "ud2", "int3", "endbr64", "leave",
         *(f"j{c}" for c in _JCC), *(f"set{c}" for c in _JCC)}
# Legacy-encoded instructions of an extension.
_LEGACY = {"movbe": "movbe", "lzcnt": "lzcnt", "tzcnt": "bmi", "popcnt": "popcnt", "adcx": "adx", "adox": "adx",
           "rdseed": "rdseed", "rdrand": "rdrnd", "crc32": "sse4.2", "cmpxchg16b": "cx16",
           **{f"cmov{c}": "cmov" for c in _JCC},
           **dict.fromkeys(("prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta"), "sse"),
           **dict.fromkeys(("movaps", "movups", "movdqa", "movdqu", "movq", "movd", "pxor", "xorps", "pshufd",
                            "paddd", "paddq", "punpcklqdq", "punpckhqdq"), "sse2"),
           **dict.fromkeys(("pshufb", "palignr"), "ssse3"),
           **dict.fromkeys(("pinsrd", "pinsrq", "pextrd", "pextrq", "pmulld", "ptest"), "sse4.1")}
# VEX-encoded instructions on general registers.
_VEX_SCALAR = {**dict.fromkeys(("andn", "bextr", "blsi", "blsmsk", "blsr"), "bmi"),
               **dict.fromkeys(("bzhi", "mulx", "pdep", "pext", "rorx", "sarx", "shlx", "shrx"), "bmi2")}
# Vector instructions by kind:
#   int     VEX: AVX on xmm, AVX2 on ymm; EVEX: AVX-512F
#   int-bw  the same on bytes or words: EVEX needs AVX-512BW
#   fp      VEX: AVX; EVEX: AVX-512F (moves and float operations)
#   fp-dq   VEX: AVX; EVEX: AVX-512DQ (the logic operations on floats)
#   avx2    VEX: AVX2 at any width (vbroadcastss from memory is AVX's: counted as AVX2, the stricter);
#           EVEX: AVX-512F
#   avx     VEX only, AVX
#   fma     VEX: FMA
#   and any AVX-512 feature: that feature, EVEX only
_VECTOR = {
    **dict.fromkeys(("vpaddd", "vpaddq", "vpsubd", "vpsubq", "vpxor", "vpor", "vpand", "vpandn", "vpsrld", "vpslld",
                     "vpsrad", "vpsrlq", "vpsllq", "vpsraq", "vpunpckldq", "vpunpckhdq", "vpunpcklqdq", "vpunpckhqdq",
                     "vpshufd", "vpmuludq", "vpmulld", "vpcmpeqd", "vpcmpeqq", "vpminud", "vpmaxud", "vpextrd",
                     "vpextrq", "vpinsrd", "vpinsrq", "vpmovzxdq"), "int"),
    **dict.fromkeys(("vpshufb", "vpaddb", "vpaddw", "vpsubb", "vpsubw", "vpsrlw", "vpsllw", "vpunpcklbw",
                     "vpunpckhbw", "vpunpcklwd", "vpunpckhwd", "vpalignr", "vpshuflw", "vpshufhw", "vpcmpeqb",
                     "vpbroadcastb", "vpbroadcastw", "vpmovzxbd", "vpmovzxwd"), "int-bw"),
    **dict.fromkeys(("vmovups", "vmovaps", "vmovupd", "vmovapd", "vmovss", "vmovsd", "vmovdqu", "vmovdqa", "vmovq",
                     "vmovd", "vshufps", "vunpcklps", "vunpckhps"), "fp"),
    **dict.fromkeys(("vxorps", "vxorpd", "vandps", "vandpd", "vorps", "vorpd", "vandnps"), "fp-dq"),
    **dict.fromkeys(("vpbroadcastd", "vpbroadcastq", "vbroadcastss", "vbroadcastsd", "vperm2i128", "vinserti128", "vextracti128", "vpblendd",
                     "vpermd", "vpermq", "vpsllvd", "vpsrlvd", "vpsllvq", "vpsrlvq", "vbroadcasti128"), "avx2"),
    **dict.fromkeys(("vzeroupper", "vzeroall", "vperm2f128", "vinsertf128", "vextractf128", "vptest"), "avx"),
    **dict.fromkeys(("vpxord", "vpxorq", "vpord", "vporq", "vpandd", "vpandq", "vpandnd", "vpandnq", "vprold",
                     "vprolq", "vprord", "vprorq", "vprolvd", "vprolvq", "vprorvd", "vprorvq", "vpermt2d", "vpermt2q",
                     "vpermi2d", "vpermi2q", "vmovdqa32", "vmovdqa64", "vmovdqu32", "vmovdqu64", "vpternlogd",
                     "vpternlogq", "valignd", "valignq", "vshufi32x4", "vshufi64x2", "vinserti32x4", "vinserti64x4",
                     "vextracti32x4", "vextracti64x4", "vpcompressd", "vpexpandd", "vpblendmd", "vpblendmq",
                     "vpmovqd", "vpmovdb", "vpsravq", "vpminuq", "vpmaxuq"), "avx512f"),
    **dict.fromkeys(("vpmadd52luq", "vpmadd52huq"), "avx512ifma"),
    **dict.fromkeys(("vpermb", "vpermt2b", "vpermi2b", "vpmultishiftqb"), "avx512vbmi"),
    **dict.fromkeys(("vpmullq", "vinserti64x2", "vextracti64x2", "vbroadcasti64x2", "vpmovq2m", "vpmovd2m"),
                    "avx512dq"),
    **dict.fromkeys(("vpermw", "vpermt2w", "vpermi2w", "vmovdqu8", "vmovdqu16", "vpmovwb", "vpblendmb"), "avx512bw"),
    **dict.fromkeys(("vpconflictd", "vpconflictq", "vplzcntd", "vplzcntq"), "avx512cd"),
}
# Opmask instructions (VEX-encoded): by their size suffix.
_MASK_OPS = ("kmov", "kand", "kandn", "kor", "kxor", "kxnor", "knot", "kortest", "ktest", "kshiftl", "kshiftr", "kadd")
_MASK_SIZE = {"w": "avx512f", "b": "avx512dq", "d": "avx512bw", "q": "avx512bw"}
_PREFIXES = {"lock", "data16", "cs", "ds", "rep", "repz", "repnz", "notrack", "bnd"}
_LEGACY_PREFIX_BYTES = {0x66, 0x67, 0xF0, 0xF2, 0xF3, 0x2E, 0x3E, 0x26, 0x36, 0x64, 0x65}


class UnknownInstruction(ValueError):
    """An instruction the table does not classify."""


def _encoding(raw: bytes) -> str:
    """'evex', 'vex' or 'legacy': the first byte after the legacy prefixes and REX (in 64-bit mode
    0x62 starts EVEX, 0xc4 / 0xc5 VEX)."""
    for byte in raw:
        if byte in _LEGACY_PREFIX_BYTES or 0x40 <= byte <= 0x4F:
            continue
        return {0x62: "evex", 0xC4: "vex", 0xC5: "vex"}.get(byte, "legacy")
    return "legacy"


def extensions(raw: bytes, text: str) -> frozenset[str]:
    """The extensions (LLVM feature names) that the instruction of bytes `raw`, disassembled as `text`, needs."""
    words = text.split(None, 1)
    while words and words[0] in _PREFIXES:
        words = words[1].split(None, 1) if len(words) > 1 else []
    if not words:
        return frozenset()      # prefixes alone: padding
    mnemonic, operands = words[0], words[1] if len(words) > 1 else ""
    encoding = _encoding(raw)
    zmm = re.search(r"\bzmm\d+", operands) is not None
    wide = zmm or re.search(r"\b[xy]mm(1[6-9]|2\d|3[01])\b", operands) is not None or "{" in operands
    evex = encoding == "evex"
    if evex != (wide or evex):
        raise UnknownInstruction(f"zmm, a mask or xmm16-31 outside EVEX: {text}")
    vl = frozenset() if zmm else frozenset({"avx512vl"})
    if encoding == "legacy":
        if mnemonic in _BASE:
            return frozenset()
        if mnemonic in _LEGACY:
            return frozenset({_LEGACY[mnemonic]})
    elif encoding == "vex" and mnemonic in _VEX_SCALAR:
        return frozenset({_VEX_SCALAR[mnemonic]})
    elif encoding == "vex" and mnemonic[:-1] in _MASK_OPS and mnemonic[-1] in _MASK_SIZE:
        return frozenset({_MASK_SIZE[mnemonic[-1]]})
    elif encoding == "vex" and re.fullmatch(r"vf(n?m(add|sub)|maddsub|msubadd)(132|213|231)[ps][sd]", mnemonic):
        return frozenset({"fma"})
    elif mnemonic in _VECTOR:
        kind = _VECTOR[mnemonic]
        ymm = re.search(r"\bymm\d+", operands) is not None
        if encoding == "vex" and kind in ("int", "int-bw"):
            return frozenset({"avx2" if ymm else "avx"})
        if encoding == "vex" and kind in ("fp", "fp-dq", "avx"):
            return frozenset({"avx"})
        if encoding == "vex" and kind == "avx2":
            return frozenset({"avx2"})
        if evex and kind in ("int", "fp", "avx2"):
            return frozenset({"avx512f"}) | vl
        if evex and kind == "int-bw":
            return frozenset({"avx512f", "avx512bw"}) | vl
        if evex and kind == "fp-dq":
            return frozenset({"avx512f", "avx512dq"}) | vl
        if evex and kind.startswith("avx512"):
            return frozenset({"avx512f", kind}) | vl
    raise UnknownInstruction(f"{encoding} {text}")


def disassemble(path: str) -> list[tuple[bytes, str]]:
    """(bytes, Intel-syntax text) of every instruction in the executable sections of the ELF file at `path`."""
    out = subprocess.run(["objdump", "-d", "-M", "intel", "--insn-width=16", path], capture_output=True, text=True,
                         check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and re.fullmatch(r"\s*[0-9a-f]+:", parts[0]):
            text = parts[2].split("#")[0].split("<")[0].strip()
            found.append((bytes.fromhex(parts[1].replace(" ", "")), text))
    return found
