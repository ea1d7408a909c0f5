"""The kernels built with the package: one shared library per CPU class, loaded without numba or a compile.

Building agefast (build_kernels/ in the source tree) compiles the kernels'
C functions for CPU classes, each a Numba target (a CPU name and an explicit
feature list), and ships them in the package as prebuilt/<class>.so with a
manifest: format, the SHA-256 of the kernel sources they were compiled from,
what a third party needs to build the same bytes again (Python, numba,
llvmlite and LLVM releases, the C compiler driver and linker that linked
them: a record only, a loaded library needs none of them), and one
"build <class> <sha256> <cpu name> <features>" line per library. A build is
reproducible: the same sources, releases and linker give the same bytes in
any directory at any time (tests/kernels/test_classes.py).

A process takes the widest shipped class whose features its CPU has (from
/proc/cpuinfo, without importing numba or llvmlite; a class for some CPU
families only on one of them: Zen 5's two), only if the manifest's
source digest is that of the installed kernel sources (an edited or
upgraded source never runs an old build), and loads exactly the bytes it
hashed: the file is read once, its SHA-256 checked against the manifest,
and those bytes are copied into a sealed memfd that the dynamic loader maps.
The package directory is as trusted as the package's Python code beside it
(only the installer writes there); the digests make sure a damaged or
half-written library is refused, and the copy makes sure what runs is what
was checked. Anything else (no class fits, a mismatch, a memfd the loader
refuses) leaves agefast.kernels to its cache and to Numba's compile, as
before.

NUMBA_CPU_NAME or NUMBA_CPU_FEATURES in the environment ask Numba for a
particular target, AGEFAST_KERNEL_FORM for a form of the batch kernel: then
no shipped build is used.
"""

import functools
import hashlib
import os
import stat
from typing import NamedTuple

from ..io import portable
from . import _cache, _native

FORMAT = 2
_HERE = os.path.dirname(os.path.abspath(__file__))
DIRECTORY = os.path.join(_HERE, "prebuilt")
MANIFEST = "manifest"


class Build(NamedTuple):
    """A manifest's line for one class's library: its SHA-256 and the Numba target it was compiled for."""

    sha256: str
    cpu: str
    features: str


class CpuClass(NamedTuple):
    """A target the kernels are built for: its machine (os.uname's), Numba's CPU name and LLVM features;
    the form of the batch kernel where it is not the features' own (_common._form), and the CPU families
    ((vendor_id, cpu family) of /proc/cpuinfo) a class is for where it is not for every CPU with its features."""

    name: str
    machine: str
    cpu: str
    features: str
    form: str = ""
    families: tuple[tuple[str, int], ...] = ()


# The x86 classes are the x86-64 psABI levels distributions build for, and
# LLVM's CPU names of the same levels: `x86-64-v3` (AVX2, BMI1/2, FMA, F16C,
# LZCNT, MOVBE, on x86-64-v2's SSE4.2, POPCNT, CMPXCHG16B, LAHF) and
# `x86-64-v4` (AVX-512 F, BW, CD, DQ, VL), and v4 with IFMA and VBMI, which
# turn Poly1305 to radix 2^44 (_common.IFMA; Ice Lake, Sapphire Rapids, Zen
# 4 and 5 have both). Each feature list is what its CPU name implies (plus
# IFMA and VBMI; bar x87 and long NOPs, which every x86-64 CPU has, and
# CRC32, part of SSE4.2), so a class requires of a CPU what its code may use
# and nothing more (tests/kernels/test_classes.py disassembles each build).
# A CPU name of a core implied more: `skylake-avx512` brought rdseed, adx,
# clflushopt, xsavec, which no kernel executes and a hypervisor may hide
# (a Zen 5 guest without rdseed ran the avx2 build, 1.9x slower than IFMA).
# The levels' names carry their cores' tuning (LLVM: `x86-64-v3` Haswell's
# scheduling model, `x86-64-v4` Skylake-SP's): each class's library is byte
# for byte the one `haswell` and `skylake-avx512` made (benchmarks/HISTORY.md,
# 2026-12-04).
_X86_64_V3 = ("+64bit,+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+cx16,+sahf,+popcnt,+sse3,+ssse3,+sse4.1,+sse4.2,"
              "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave")
_X86_64_V4 = _X86_64_V3 + ",+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl"
# Widest first: a process takes the first its CPU can run. On every CPU
# measured the widest class it runs was its fastest, or no slower (docs/engine.md,
# "Kernels built with the package": Zen 4 and Zen 5 avx512ifma > avx512f >
# avx2; an Intel Xeon with IFMA, 2026-12-02, avx512f ~1.8x avx2, IFMA and
# avx512f within the noise), so no CPU family needs an order of its own.
# Zen 5 (AMD family 26) has builds of the IFMA and AVX2 classes of its own,
# in the split-wide form: two sets of blocks a step, for its vector
# instructions' latency of two cycles (IFMA 1.08-1.11x / 1.12-1.14x of the
# cipher alone against split's 0.98-1.01x / 0.98-1.03x; AVX2 1.02x against
# stitched's 0.92x; docs/engine.md). Zen 4, Intel and Zen 1-3 keep theirs:
# their rounds are bound by the vector pipes, not by the chains of their
# results (Zen 2's AVX2 with two sets: 0.73x).
_IFMA = _X86_64_V4 + ",+avx512ifma,+avx512vbmi"
CLASSES = (
    CpuClass("avx512ifma-zen5", "x86_64", "x86-64-v4", _IFMA, "split-wide", (("AuthenticAMD", 26),)),
    CpuClass("avx512ifma", "x86_64", "x86-64-v4", _IFMA),
    CpuClass("avx512f", "x86_64", "x86-64-v4", _X86_64_V4),
    CpuClass("avx2-zen5", "x86_64", "x86-64-v3", _X86_64_V3, "split-wide", (("AuthenticAMD", 26),)),
    CpuClass("avx2", "x86_64", "x86-64-v3", _X86_64_V3),
    # ARMv8-A with Advanced SIMD, which every 64-bit Arm Linux machine has.
    CpuClass("aarch64", "aarch64", "generic", "+neon,+fp-armv8"),
)
# LLVM's feature names that Linux's /proc/cpuinfo spells differently.
_CPUINFO_NAMES = {"64bit": "lm", "bmi": "bmi1", "lzcnt": "abm", "pclmul": "pclmulqdq", "sahf": "lahf_lm",
                  "sse3": "pni", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "neon": "asimd", "fp-armv8": "fp"}


def llvm_flags(features: str) -> frozenset[str]:
    """The /proc/cpuinfo flags of what an LLVM feature string ("+avx2,-avx512f,...") turns on."""
    return frozenset(_CPUINFO_NAMES.get(f[1:], f[1:]) for f in features.split(",") if f.startswith("+"))


def required_flags(cpu_class: CpuClass) -> frozenset[str]:
    """The /proc/cpuinfo flags a CPU must show to run a build of `cpu_class`."""
    return llvm_flags(cpu_class.features)


def _first_processor(cpuinfo: bytes) -> dict[bytes, str]:
    """The fields of the first processor in /proc/cpuinfo's text: name -> value."""
    fields: dict[bytes, str] = {}
    for line in cpuinfo.split(b"\n\n")[0].splitlines():
        name, _, value = line.partition(b":")
        fields.setdefault(name.strip(), value.strip().decode("ascii", "replace"))
    return fields


def cpuinfo_flags(cpuinfo: bytes) -> frozenset[str]:
    """The feature flags of the first processor in /proc/cpuinfo's text ("flags" on x86, "Features" on Arm)."""
    fields = _first_processor(cpuinfo)
    return frozenset(fields.get(b"flags", fields.get(b"Features", "")).split())


def cpuinfo_family(cpuinfo: bytes) -> tuple[str, int] | None:
    """(vendor_id, cpu family) of the first processor in /proc/cpuinfo's text, or None where it does not say."""
    fields = _first_processor(cpuinfo)
    vendor, family = fields.get(b"vendor_id"), fields.get(b"cpu family", "")
    return (vendor, int(family)) if vendor and family.isdigit() else None


def choose(machine: str, flags: frozenset[str], shipped: frozenset[str],
           family: tuple[str, int] | None = None) -> CpuClass | None:
    """The widest class among `shipped` that a `machine` CPU with `flags` (of `family`, if known) runs, or None;
    a class for some CPU families only where `family` is one of them."""
    for cpu_class in CLASSES:
        if (cpu_class.name in shipped and cpu_class.machine == machine and required_flags(cpu_class) <= flags
                and (not cpu_class.families or family in cpu_class.families)):
            return cpu_class
    return None


def runs_here(features: str) -> bool:
    """Whether this CPU has every instruction set a build for the LLVM `features` may use that some class names
    (the vector and bit-manipulation sets the kernels are built for): False where it would die of SIGILL. True
    where /proc/cpuinfo does not say (another system)."""
    named = frozenset().union(*(required_flags(c) for c in CLASSES))
    have = host_flags()
    return not have or llvm_flags(features) & named <= have


def _cpuinfo() -> bytes:
    try:
        with open("/proc/cpuinfo", "rb") as f:
            return f.read(1 << 16)
    except OSError:
        return b""


def host_flags() -> frozenset[str]:
    return cpuinfo_flags(_cpuinfo())


def host_family() -> tuple[str, int] | None:
    """This CPU's (vendor_id, cpu family), where /proc/cpuinfo says."""
    return cpuinfo_family(_cpuinfo())


def host_class(shipped: frozenset[str] | None = None) -> CpuClass | None:
    """The class among `shipped` (every class, where None) this CPU takes (choose's, with this CPU's flags and
    family), or None."""
    names = frozenset(c.name for c in CLASSES) if shipped is None else shipped
    cpuinfo = _cpuinfo()        # read once: on a machine of many cores the kernel takes its time to write it
    return choose(portable.machine(), cpuinfo_flags(cpuinfo), names, cpuinfo_family(cpuinfo))


def source_digest(directory: str) -> str:
    """The SHA-256 over the kernel sources in `directory` (the files _cache keys its entries on)."""
    h = hashlib.sha256()
    for name in _cache._SOURCES:
        with open(os.path.join(directory, name), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def read_manifest(text: str) -> tuple[dict[str, str], dict[str, Build]]:
    """(fields, {class: its build}) of a manifest; ValueError where it is malformed."""
    fields: dict[str, str] = {}
    builds: dict[str, Build] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "build":
            parts = value.split(" ")
            if len(parts) != 4:
                raise ValueError(f"not a build line: {line!r}")
            builds[parts[0]] = Build(*parts[1:])
        else:
            fields[name] = value
    if fields.get("format") != str(FORMAT) or "source" not in fields:
        raise ValueError("not a manifest of this format")
    return fields, builds


def write_manifest(source: str, record: dict[str, str], builds: dict[str, str]) -> str:
    """The manifest's text: `source` the source digest, `record` what built them (single-line values),
    `builds` {class: its library's SHA-256}, each with its class's target."""
    targets = {c.name: f"{c.cpu} {c.features}" for c in CLASSES}
    lines = [f"format {FORMAT}", f"source {source}", *(f"{k} {v}" for k, v in sorted(record.items()))]
    lines += [f"build {name} {digest} {targets[name]}" for name, digest in sorted(builds.items())]
    return "\n".join(lines) + "\n"


# Far above any build (a library is ~60 KB, a manifest ~1 KB): a file larger is not one.
_LARGEST = 16 << 20
# O_NONBLOCK: a FIFO in a build's place fails the read rather than block the open.
_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def _read(path: str) -> bytes:
    """The bytes of the regular file at `path`; OSError or ValueError for anything else (a FIFO would block the
    read, /dev/zero fill the memory)."""
    fd = os.open(path, _READ)
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = f.read(_LARGEST + 1)
    if len(data) > _LARGEST:
        raise ValueError("larger than any build")
    return data


@functools.cache     # the package directory does not change while a process runs
def verified() -> tuple[CpuClass, bytes] | str:
    """The class this CPU runs and its library's bytes, checked against the manifest; else why there are none."""
    asked = [name for name in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "AGEFAST_KERNEL_FORM") if os.environ.get(name)]
    if asked:
        return f"{asked[0]} asks for a build of its own"
    try:
        fields, builds = read_manifest(_read(os.path.join(DIRECTORY, MANIFEST)).decode("utf-8"))
        if fields["source"] != source_digest(_HERE):
            return "the shipped builds are of other kernel sources"
    except FileNotFoundError:
        return "none was built with this install"
    except (OSError, ValueError) as e:
        return f"the manifest of the builds cannot be read ({e})"
    cpu_class = host_class(frozenset(builds))
    if cpu_class is None:
        return f"this CPU runs none of the shipped builds ({', '.join(sorted(builds))})"
    build = builds[cpu_class.name]
    # compiled for another target than the class's (a class redefined
    # since): its code may need what the class does not require
    if (build.cpu, build.features) != (cpu_class.cpu, cpu_class.features):
        return f"the shipped {cpu_class.name} build was compiled for another target"
    try:
        data = _read(os.path.join(DIRECTORY, cpu_class.name + ".so"))
    except (OSError, ValueError) as e:
        return f"the shipped {cpu_class.name} build cannot be read ({e})"
    if hashlib.sha256(data).hexdigest() != build.sha256:
        return f"the shipped {cpu_class.name} build is not the one its manifest names"
    return cpu_class, data


def load() -> tuple[_native.Functions, str] | str:
    """The shipped build's functions and the LLVM features it was compiled for; else why there is none to load
    (where the loader refuses the memfd too: a kernel whose vm.memfd_noexec forbids mapping memfds executable),
    and the cache serves."""
    found = verified()
    if isinstance(found, str):
        return found
    cpu_class, data = found
    try:
        functions = _native.load_library(data, f"agefast-kernels-{cpu_class.name}")
    except OSError as e:
        return f"the shipped {cpu_class.name} build cannot be loaded here ({e})"
    return functions, cpu_class.features
