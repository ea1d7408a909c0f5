"""The CPU classes (agefast.kernels._shipped.CLASSES): the class each real machine loads, what each class's build
executes (its disassembly), and that a build is the same bytes from any directory at any time."""

import collections
import hashlib
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import build_kernels
from agefast.kernels import _loader, _shipped

from . import instructions
from .machines import (CASCADE_LAKE, ICELAKE_SP, IVY_BRIDGE, NEOVERSE_N1, SAPPHIRE_RAPIDS, SKYLAKE_SP, WESTMERE,
                       ZEN2, ZEN3, ZEN4, ZEN5_GUEST, cpuinfo)

ROOT = Path(__file__).resolve().parents[2]
EVERY = frozenset(c.name for c in _shipped.CLASSES)
X86 = [c for c in _shipped.CLASSES if c.machine == "x86_64"]
ONE_SET = [c for c in X86 if c.name.startswith("avx512") and c.form != "split-wide"]    # zmm loops of 16 blocks


@pytest.mark.parametrize(("machine", "text", "wanted"), [
    ("x86_64", cpuinfo(ZEN5_GUEST), "avx512ifma"),         # no rdseed: no AVX-512 class needs it
    ("x86_64", cpuinfo(ZEN4), "avx512ifma"),
    ("x86_64", cpuinfo(SAPPHIRE_RAPIDS), "avx512ifma"),
    ("x86_64", cpuinfo(ICELAKE_SP), "avx512ifma"),
    ("x86_64", cpuinfo(CASCADE_LAKE), "avx512f"),
    ("x86_64", cpuinfo(SKYLAKE_SP), "avx512f"),
    ("x86_64", cpuinfo(ZEN3), "avx2"),
    ("x86_64", cpuinfo(ZEN2), "avx2"),
    ("x86_64", cpuinfo(IVY_BRIDGE), None),                 # AVX, no AVX2: the run-time compile serves it
    ("x86_64", cpuinfo(WESTMERE), None),                   # SSE4.2 only
    ("aarch64", cpuinfo(NEOVERSE_N1, "Features"), "aarch64"),
    ("aarch64", cpuinfo(ICELAKE_SP), None),                # flags of another architecture's names
    ("x86_64", b"", None),
], ids=["zen5-guest", "zen4", "sapphire-rapids", "ice-lake", "cascade-lake", "skylake-sp", "zen3", "zen2",
        "ivy-bridge-avx", "westmere-sse", "neoverse-n1", "x86-flags-on-arm", "no-flags"])
def test_each_machine_loads_the_widest_class_its_flags_allow(machine, text, wanted):
    # Widest is fastest on every CPU measured (_shipped.CLASSES' comment).
    chosen = _shipped.choose(machine, _shipped.cpuinfo_flags(text), EVERY, _shipped.cpuinfo_family(text))
    assert (chosen.name if chosen else None) == wanted


@pytest.mark.parametrize(("flags", "family", "wanted"), [
    (ZEN5_GUEST, ("AuthenticAMD", 26), "avx512ifma-zen5"),
    (ZEN4, ("AuthenticAMD", 25), "avx512ifma"),
    (ZEN3, ("AuthenticAMD", 26), "avx2-zen5"),                 # a Zen 5 guest shown only AVX2
    (ZEN3, ("AuthenticAMD", 25), "avx2"),
    (SAPPHIRE_RAPIDS, ("GenuineIntel", 6), "avx512ifma"),
    (ZEN5_GUEST, ("SomeVendor", 26), "avx512ifma"),
], ids=["zen5", "zen4", "zen5-avx2-guest", "zen3", "sapphire-rapids", "other-vendor"])
def test_zen5_takes_its_own_builds(flags, family, wanted):
    # _shipped.CLASSES: the split-wide form for AMD family 26 (its two-cycle vector latency), by the vendor_id
    # and cpu family of /proc/cpuinfo; any other CPU with the flags takes the class for every CPU.
    text = cpuinfo(flags, family=family)
    assert _shipped.cpuinfo_family(text) == family
    chosen = _shipped.choose("x86_64", _shipped.cpuinfo_flags(text), EVERY, _shipped.cpuinfo_family(text))
    assert chosen.name == wanted
    assert _shipped.cpuinfo_family(b"processor\t: 0\nflags\t\t: fpu\n") is None


def test_each_class_names_its_vector_instructions():
    # kernels.isa() of a process on each class's build (`agefast --warm-up` prints it): the Arm build's NEON had
    # been "baseline", as if it had no vector code.
    assert {c.name: _loader._isa_of(c.features) for c in _shipped.CLASSES} == {
        "avx512ifma-zen5": "avx512ifma", "avx512ifma": "avx512ifma", "avx512f": "avx512f", "avx2-zen5": "avx2",
        "avx2": "avx2", "aarch64": "neon"}
    assert _loader._isa_of("+sse4.2,+popcnt") == "baseline"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """builds(cpu_class, root=the checkout): the path of its library as the package build compiles it from the
    source tree `root` (build_kernels._compile), compiled once per module."""
    made: dict[tuple[str, Path], Path] = {}

    def build(cpu_class, root: Path = ROOT) -> Path:
        if (cpu_class.name, root) not in made:
            out = tmp_path_factory.mktemp(cpu_class.name) / f"{cpu_class.name}.so"
            done, report, _ = build_kernels._compile(cpu_class, str(out), str(root))
            assert done, report
            made[cpu_class.name, root] = out
        return made[cpu_class.name, root]

    return build


@pytest.mark.requires_tool("objdump", "cc")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x86 classes compile on an x86-64 machine")
@pytest.mark.parametrize("cpu_class", X86, ids=lambda c: c.name)
def test_a_class_build_executes_only_the_extensions_the_class_requires(builds, cpu_class):
    # Each x86 build is compiled (~6 s of CPU on Zen 4) and its every
    # instruction classified: one needing an extension the class does not
    # list, or one the table does not know, fails.
    allowed = {f[1:] for f in cpu_class.features.split(",") if f.startswith("+")}
    used: collections.Counter[str] = collections.Counter()
    beyond = {}
    for raw, text in instructions.disassemble(str(builds(cpu_class))):
        needs = instructions.extensions(raw, text)
        used.update(needs)
        for extension in needs - allowed:
            beyond.setdefault(extension, text)
    assert not beyond, f"{cpu_class.name} executes {beyond}"
    assert used[_loader._isa_of(cpu_class.features)], used     # its own extension (zmm, IFMA, ymm): its vector code


def _loops(path: str, function: str) -> list[list[tuple[int, str]]]:
    """Each loop in `function` of the library at `path`, longest first: (address, Intel syntax) of each of its
    instructions, from a backward branch's target to that branch."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-M", "intel", path], capture_output=True,
                         text=True, check=True).stdout
    branches = re.findall(rf"^ *([0-9a-f]+):\s+j\w+\s+([0-9a-f]+) <{function}\+0x[0-9a-f]+>", out, re.MULTILINE)
    backward = sorted(((int(source, 16) - int(target, 16), int(target, 16)) for source, target in branches),
                      reverse=True)
    code = [(int(a, 16), text.strip()) for a, text in re.findall(r"^ *([0-9a-f]+):\t(.*)$", out, re.MULTILINE)]
    return [[(a, text) for a, text in code if start <= a <= start + length] for length, start in backward if length > 0]


def _longest_loop(path: str, function: str) -> list[tuple[int, str]]:
    """(address, Intel syntax) of each instruction of the longest loop in `function` of the library at `path`."""
    return _loops(path, function)[0]


def _loop_start(path: str, function: str) -> int:
    """The address of the longest loop in `function` of the library at `path`."""
    return _longest_loop(path, function)[0][0]


@pytest.mark.requires_tool("objdump", "cc")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x86 classes compile on an x86-64 machine")
def test_the_avx2_stitched_loop_starts_on_a_64_byte_boundary(builds):
    # _common._align_loop: on Zen 2 the same loop ran ~10% slower 16 bytes
    # past a boundary, where changes elsewhere in the kernels had put it.
    avx2 = next(c for c in X86 if c.name == "avx2")
    start = _loop_start(str(builds(avx2)), "agefast_stitched_steps")
    assert start % 64 == 0, hex(start)


@pytest.mark.requires_tool("objdump", "cc")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x86 classes compile on an x86-64 machine")
@pytest.mark.parametrize("cpu_class", ONE_SET, ids=lambda c: c.name)
def test_the_zmm_loop_prefetches_the_source_before_it_reads_it(builds, cpu_class):
    # _stitched._PREFETCH: on Zen 5 the same 16 prefetches after the
    # iteration's loads (folded into its XORs) gained nothing of the 10%.
    loop = [text for _, text in _longest_loop(str(builds(cpu_class)), "agefast_stitched_steps")]
    prefetches = [k for k, text in enumerate(loop) if text.startswith("prefetcht0")]
    assert len(prefetches) == 16, loop
    source = re.search(r"\[(\w+\+\w+\*1)", loop[prefetches[0]]).group(1)     # base + index, as the loads address it
    reads = [k for k, text in enumerate(loop) if f"ZMMWORD PTR [{source}" in text and not text.startswith("vmovdqu64 ZMMWORD")]
    assert len(reads) == 16 and prefetches[-1] < reads[0], (prefetches, reads)


@pytest.mark.requires_tool("objdump", "cc")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x86 classes compile on an x86-64 machine")
@pytest.mark.parametrize("cpu_class", ONE_SET, ids=lambda c: c.name)
def test_the_zmm_loop_runs_its_rounds_as_loops_of_one_double_round(builds, cpu_class):
    # _stitched._ROLLED: an iteration's 80 quarter rounds unrolled (320 rotates, 15 KB of code) ran on Zen 5 in
    # spells 15-20% slower, probably out of the op cache; rolled, at one speed.
    loops = _loops(str(builds(cpu_class)), "agefast_stitched_steps")
    rotates = [sum(text.startswith("vprold") for _, text in loop) for loop in loops]
    inner = [loop for loop, n in zip(loops[1:], rotates[1:]) if n]
    # every rotate in an inner loop of one double round (8 quarter rounds, 4 each), with Poly1305 steps beside it
    assert inner and rotates[0] == 32 * len(inner) and all(n == 32 for n in rotates[1:] if n), rotates
    assert all(any(text.startswith("mulx") for _, text in loop) for loop in inner), "no Poly1305 step in a loop"
    assert all(loop[-1][0] - loop[0][0] < 2048 for loop in inner), [loop[-1][0] - loop[0][0] for loop in inner]


@pytest.mark.requires_tool("objdump", "cc")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x86 classes compile on an x86-64 machine")
@pytest.mark.parametrize("cpu_class", [c for c in X86 if c.form == "split-wide"], ids=lambda c: c.name)
def test_the_split_wide_loop_runs_two_sets_and_spreads_its_prefetches(builds, cpu_class):
    # Zen 5's classes (split-wide). _stitched._SETS: two sets of blocks in each double round (in zmm 64
    # rotates, not 32; in ymm 32 shifts left, two for each of 16 quarter rounds), and _stitched._PREFETCH:
    # in each double round _SPREAD lines of the source and as many of the destination (4 in zmm, 2 in ymm),
    # none at the iteration's start (32 there left open slower from memory on Zen 5).
    zmm = "+avx512f" in cpu_class.features.split(",")
    rotation, per_round, spread = ("vprold", 64, 4) if zmm else ("vpslld", 32, 2)
    loops = _loops(str(builds(cpu_class)), "agefast_stitched_steps")
    rotates = [sum(text.startswith(rotation) for _, text in loop) for loop in loops]
    prefetches = [sum(text.startswith("prefetcht0") for _, text in loop) for loop in loops]
    inner = [k for k, n in enumerate(rotates) if k and n]
    assert inner and rotates[0] == per_round * len(inner) and all(rotates[k] == per_round for k in inner), rotates
    assert all(prefetches[k] == 2 * spread for k in inner) and prefetches[0] == 2 * spread * len(inner), prefetches


@pytest.mark.parametrize(("raw", "text", "needs"), [
    ("62f17d48fec1", "vpaddd zmm0,zmm0,zmm1", {"avx512f"}),
    ("62f17d28fec1", "vpaddd ymm0,ymm0,ymm1", {"avx512f", "avx512vl"}),
    ("c5fdfec1", "vpaddd ymm0,ymm0,ymm1", {"avx2"}),
    ("c5f9fec1", "vpaddd xmm0,xmm0,xmm1", {"avx"}),
    ("c5fe6f00", "vmovdqu ymm0,YMMWORD PTR [rax]", {"avx"}),
    ("62f27d4800c1", "vpshufb zmm0,zmm0,zmm1", {"avx512f", "avx512bw"}),
    ("62f2f548b4c2", "vpmadd52luq zmm0,zmm1,zmm2", {"avx512f", "avx512ifma"}),
    ("c4e2fbf6c1", "mulx rax,rax,rcx", {"bmi2"}),
    ("480fc7f8", "rdseed rax", {"rdseed"}),
    ("f0480fc101", "lock xadd QWORD PTR [rcx],rax", set()),
    ("662e0f1f840000000000", "data16 cs nop WORD PTR [rax+rax*1+0x0]", set()),
])
def test_the_instruction_table(raw, text, needs):
    assert instructions.extensions(bytes.fromhex(raw), text) == needs


@pytest.mark.parametrize(("raw", "text"), [
    ("c4e2f1b4c2", "vpmadd52luq xmm0,xmm1,xmm2"),           # VEX: AVX-IFMA, not the AVX-512 IFMA the table knows
    ("62f27d4850c1", "vpdpbusd zmm0,zmm0,zmm1"),            # VNNI: in no class, in no table
    ("c5fdfec1", "vpaddd zmm0,zmm0,zmm1"),                  # a zmm outside EVEX
    ("0f0b", "(bad)"),
])
def test_an_instruction_the_table_does_not_know_fails(raw, text):
    with pytest.raises(instructions.UnknownInstruction):
        instructions.extensions(bytes.fromhex(raw), text)


@pytest.mark.requires_tool("cc")
def test_a_class_builds_to_the_same_bytes_from_another_directory(builds, tmp_path):
    # Issue 47: the host's class from the checkout and from a copy of its
    # sources elsewhere, compiled at another time, in another process: the
    # same SHA-256 (~6 s of CPU for the second compile on Zen 4).
    host = _shipped.host_class()
    if host is None:
        pytest.skip("no shipped class fits this CPU")
    copy = tmp_path / "another" / "checkout"
    for part in ("agefast", "build_kernels"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__", "prebuilt"))
    first, second = builds(host), builds(host, copy)
    assert first.read_bytes()[:4] == b"\x7fELF"
    assert hashlib.sha256(first.read_bytes()).hexdigest() == hashlib.sha256(second.read_bytes()).hexdigest()


def test_the_builders_settings_stay_out_of_a_class_build(monkeypatch, tmp_path):
    # A kernel form or Numba setting in the builder's environment would make
    # its build other bytes than the class's (and ship a form the loader does
    # not expect); the class's target replaces the builder's.
    seen = {}

    def run(command, env, **kwargs):
        seen.update(env)
        raise OSError("not run")

    monkeypatch.setattr(build_kernels.subprocess, "run", run)
    for name, value in (("AGEFAST_KERNEL_FORM", "two-pass"), ("NUMBA_OPT", "0"), ("NUMBA_CPU_NAME", "znver4")):
        monkeypatch.setenv(name, value)
    avx2 = next(c for c in _shipped.CLASSES if c.name == "avx2")
    assert not build_kernels._compile(avx2, str(tmp_path / "avx2.so"))[0]
    assert "AGEFAST_KERNEL_FORM" not in seen and "NUMBA_OPT" not in seen
    assert (seen["NUMBA_CPU_NAME"], seen["NUMBA_CPU_FEATURES"]) == (avx2.cpu, avx2.features)
    # a class of a form of its own is built in it, whatever the builder asks
    zen5 = next(c for c in _shipped.CLASSES if c.form)
    seen.clear()
    assert not build_kernels._compile(zen5, str(tmp_path / "zen5.so"))[0]
    assert seen["AGEFAST_KERNEL_FORM"] == "split-wide" and "NUMBA_OPT" not in seen
