"""The compile's IR-only mode (_build._ir_only): Numba's libraries get no machine code inside it, and Numba works as
before after it; what the compile links, and the CPU name it emits for."""

import os
import struct

import numpy as np
import pytest
from numba import cfunc, njit, types

from agefast import kernels
from agefast.kernels import _build, _cache, _common, _shipped
from required import unavailable


def test_libraries_made_inside_have_no_machine_code_and_numba_jits_after():
    def add(a, b):
        return a + b

    with _build._ir_only():
        inside = cfunc(types.int64(types.int64, types.int64))(add)
    assert isinstance(inside._library, _build._IRLibrary) and inside.address == 0
    assert not inside._library.get_function(inside.native_name).is_declaration     # finalized: its IR is there

    after = njit(lambda a: a.sum() + 1)        # the JIT again: compiled, run, and right
    assert after(np.arange(5, dtype=np.int64)) == 11
    assert cfunc(types.int64(types.int64, types.int64))(add).ctypes(2, 3) == 5


def _text_relocations(elf: bytes) -> bool:
    """Whether a little-endian ELF64 shared library asks the loader to patch its code (DT_TEXTREL, DF_TEXTREL)."""
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        kind, _, offset, _, _, size = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if kind != 2:       # PT_DYNAMIC
            continue
        for at in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", elf, at)
            if tag == 0:    # DT_NULL
                break
            if tag == 22 or (tag == 30 and value & 4):     # DT_TEXTREL, or DT_FLAGS with DF_TEXTREL
                return True
    return False


def _loaded_library() -> bytes:
    """The shared library of the kernels this process loaded (shipped or cached)."""
    kernels.warm_up()
    shipped = _shipped.verified()
    entry = _cache.lookup(_cache.key())
    if not isinstance(shipped, str):
        return shipped[1]
    if entry is not None and entry[0] == "so":
        return entry[1]
    unavailable("the kernels were loaded from an object file: no C compiler driver linked a shared library here")


def test_the_kernels_library_is_position_independent():
    # Code emitted for Numba's JIT (the large code model) links into a shared
    # library only with text relocations on x86-64, and not at all on AArch64
    # (GNU ld refuses R_AARCH64_MOVW_UABS_G*): the compile emits PIC.
    library = _loaded_library()
    assert library[:4] == b"\x7fELF" and library[4] == 2 and library[5] == 1, "not a little-endian ELF64 library"
    assert not _text_relocations(library)


def test_each_big_body_is_compiled_once():
    # The ChaCha20 and stitched bodies (_common._call_outlined) are defined in
    # every Numba module that calls them; linked together they keep one copy
    # (linkonce_odr), where each module's private copy went through LLVM and
    # into the library again (six stitched loops in the avx2 library). Its
    # symbol table names each copy, ".9" and so on after the first.
    library = _loaded_library()
    bodies = [b"agefast_chacha20_xor_1k", b"agefast_chacha20_xor_256"]
    bodies += [b"agefast_stitched_steps"] if _common.STITCHED else []
    assert [library.count(name) for name in bodies] == [1] * len(bodies)


@pytest.mark.parametrize(("form", "features", "choices"), [
    ("", "+avx2", (True, False, False)), ("", "+avx2,+avx512f", (True, False, False)),
    ("", "+sse2", (False, False, False)), ("", "+avx2,+avx512f,+avx512ifma", (True, True, False)),
    ("", "+neon", (False, False, False)),
    ("stitched", "+avx2,+avx512f", (True, False, False)), ("two-pass", "+avx2", (False, False, False)),
    ("split", "+avx2,+avx512f,+avx512ifma", (True, True, False)), ("split", "+avx2", (True, True, False)),
    ("split-wide", "+avx2,+avx512f,+avx512ifma", (True, True, True))])
def test_the_form_of_the_batch_kernel(monkeypatch, form, features, choices):
    # By default split with IFMA's lanes, stitched on the other x86 classes, two passes elsewhere;
    # AGEFAST_KERNEL_FORM asks for any form anywhere. (A CPU whose class has a form of its own: below.)
    monkeypatch.setattr(_shipped, "host_class", lambda: None)
    monkeypatch.setattr(_common, "FEATURES", {f[1:] for f in features.split(",")})
    monkeypatch.setenv("AGEFAST_KERNEL_FORM", form)
    assert _common._choices()[1:] == choices


@pytest.mark.parametrize(("target", "wide"), [({}, True), ({"CPU_NAME": "x86-64-v4"}, False),
                                               ({"CPU_FEATURES": "+avx512f,+avx512ifma"}, False)])
def test_a_build_for_a_cpu_whose_class_has_a_form_of_its_own_takes_it(monkeypatch, target, wide):
    # Zen 5's class is split-wide: a compile for the host's own features (the cache's) takes it, so an
    # editable install runs what the wheel would ship it; one for a target of Numba's (a class's build,
    # which build_kernels gives its form by AGEFAST_KERNEL_FORM) takes the features' default.
    zen5 = next(c for c in _shipped.CLASSES if c.form == "split-wide")
    monkeypatch.setattr(_shipped, "host_class", lambda: zen5)
    monkeypatch.setattr(_common, "FEATURES", {"avx2", "avx512f", "avx512ifma"})
    monkeypatch.delenv("AGEFAST_KERNEL_FORM", raising=False)
    monkeypatch.setattr(_common.config, "CPU_NAME", None)
    monkeypatch.setattr(_common.config, "CPU_FEATURES", None)
    for name, value in target.items():
        monkeypatch.setattr(_common.config, name, value)
    assert _common._choices()[1:] == (True, True, wide)


def test_an_unknown_form_is_refused(monkeypatch):
    monkeypatch.setenv("AGEFAST_KERNEL_FORM", "zmm")
    with pytest.raises(ValueError, match="AGEFAST_KERNEL_FORM"):
        _common._choices()


@pytest.mark.parametrize("setting, value, fragment", [
    ("CPU_FEATURES", "garbage", "NUMBA_CPU_FEATURES is not a list"),
    ("ENABLE_AVX", False, "AVX turned off"),
    ("OPT", 0, "NUMBA_OPT=0"),
], ids=["features-not-a-list", "avx-off", "opt-0"])
def test_a_setting_numba_cannot_compile_the_kernels_under_is_refused_before_it_tries(setting, value, fragment,
                                                                                       monkeypatch):
    # LLVM had ended the process (an abort on the features, "couldn't allocate output register for constraint
    # 'v'" with AVX off: also a CPU name Numba does not trust with AVX, and a .numba_config.yaml in the current
    # folder), or every process compiled for seconds to fail (NUMBA_OPT=0). A warning and cryptography instead.
    from numba.core import config

    from agefast.kernels import _loader

    assert _build.refusal() is None
    monkeypatch.setattr(config, setting, value)
    assert fragment in _build.refusal()
    monkeypatch.setattr(_build, "compile_object", lambda: pytest.fail("compiled"))
    with pytest.raises(RuntimeError, match="the kernels cannot be compiled here: .*" + fragment):
        _loader._compile("a key")


class _Codegen:
    """What _object_cpu asks of Numba's codegen: the target's features and this CPU's own name."""

    def __init__(self, features: str) -> None:
        self.features = features

    def _get_host_cpu_features(self) -> str:
        return self.features

    def _get_host_cpu_name(self) -> str:
        return "its-own-name"


@pytest.mark.parametrize("cpu_class", [c for c in _shipped.CLASSES if c.machine == os.uname().machine],
                         ids=lambda c: c.name)
def test_a_build_here_is_tuned_as_its_class_is_shipped(monkeypatch, cpu_class):
    # Emitted for Zen 4's own name (znver4), the kernels ran ~10% slower than
    # for the class's (then skylake-avx512, now x86-64-v4 with its tuning); a
    # feature switched off stays off.
    monkeypatch.setattr(_build.config, "CPU_NAME", None)
    assert _build._object_cpu(_Codegen(cpu_class.features + ",-sha")) == cpu_class.cpu
    monkeypatch.setattr(_build.config, "CPU_NAME", "its-own-name")     # NUMBA_CPU_NAME, as the shipped builds set
    assert _build._object_cpu(_Codegen(cpu_class.features)) == "its-own-name"


def test_a_cpu_of_no_class_is_emitted_for_its_own_name(monkeypatch):
    monkeypatch.setattr(_build.config, "CPU_NAME", None)
    assert _build._object_cpu(_Codegen("+64bit,+sse,+sse2,-avx2")) == "its-own-name"


def test_a_c_compiler_driver_another_account_could_change_is_not_run(tmp_path, monkeypatch):
    def driver(folder):
        folder.mkdir()
        cc = folder / "cc"
        cc.write_text("#!/bin/sh\nexit 1\n")
        cc.chmod(0o755)
        return cc

    open_folder = tmp_path / "open"
    theirs = driver(open_folder)
    open_folder.chmod(0o777)
    mine = driver(tmp_path / "mine")
    monkeypatch.setenv("CC", str(theirs))
    assert _build._driver() is None
    monkeypatch.setenv("CC", f"{mine} -v")
    assert _build._driver() == [str(mine), "-v"]
    # found in the current folder through a relative PATH entry
    monkeypatch.setenv("CC", "cc")
    monkeypatch.setenv("PATH", ".")
    monkeypatch.chdir(mine.parent)
    assert _build._driver() is None


def test_the_linker_the_driver_looks_up_is_never_another_accounts(tmp_path, monkeypatch):
    # `cc -print-prog-name=ld` says plain "ld": gcc's collect2 looks it up on PATH, where an `ld` in the current
    # folder (a relative entry) or in a folder another account may write ran during the cold compile.
    if _build._driver() is None:
        pytest.skip("no C compiler driver here")
    marker = tmp_path / "ran"
    folders = {"theirs": tmp_path / "theirs", "sticky": tmp_path / "sticky", "here": tmp_path / "here"}
    for folder in folders.values():
        folder.mkdir()
        ld = folder / "ld"
        ld.write_text(f"#!/bin/sh\necho {folder.name} >> {marker}\nexit 1\n")
        ld.chmod(0o755)
    folders["theirs"].chmod(0o777)
    folders["sticky"].chmod(0o1777)
    monkeypatch.chdir(folders["here"])
    monkeypatch.setenv("PATH", os.pathsep.join([".", "", str(folders["theirs"]), str(folders["sticky"]),
                                                os.environ["PATH"]]))
    line = _build.linker()
    assert not marker.exists() and "unknown" not in line.rsplit(";", 1)[1], line
    search = _build.trust.trusted_search_path(os.environ["PATH"])
    assert not {".", "", *map(str, folders.values())} & set(search.split(os.pathsep))
    # No trusted folder at all: an empty PATH would have been the current folder.
    monkeypatch.setenv("CC", _build._driver()[0])
    monkeypatch.setenv("PATH", os.pathsep.join([".", str(folders["theirs"])]))
    _build.linker()
    assert not marker.exists()


def test_the_driver_is_pointed_at_no_other_folder_by_cc_or_the_environment(tmp_path, monkeypatch):
    # COMPILER_PATH (or CC="cc -B<folder>") made gcc run the `ld` of a folder another account could write, and
    # the library it linked was cached and loaded by every later process.
    if _build._driver() is None:
        pytest.skip("no C compiler driver here")
    cc = _build._driver()[0]
    marker = tmp_path / "ran"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "ld").write_text(f"#!/bin/sh\necho ran >> {marker}\nexec ld \"$@\"\n")
    (theirs / "ld").chmod(0o755)
    theirs.chmod(0o777)
    for variable in ("COMPILER_PATH", "GCC_EXEC_PREFIX"):
        monkeypatch.setenv(variable, f"{theirs}/")
        made = tmp_path / variable
        made.mkdir()
        _build.link_shared(b"", str(made))     # gcc runs its linker on any input
        monkeypatch.delenv(variable)
    assert not marker.exists()
    for argument in (f"-B{theirs}/", f"-B {theirs}/", f"--prefix={theirs}/", f"--prefix {theirs}/",
                     f"--sysroot={theirs}", "-fuse-ld=gold", f"-fplugin={theirs}/p.so", f"@{theirs}/args",
                     f"-Wl,@{theirs}/args", f"-Xlinker @{theirs}/args", "-mllvm -x", f"-mfoo={theirs}", "gcc"):
        monkeypatch.setenv("CC", f"{cc} {argument}")
        assert _build._driver() is None, argument
    monkeypatch.setenv("CC", f"{cc} -m64 -march=x86-64-v3 --target=x86_64-linux-gnu -O2 -g -v")
    assert _build._driver() == [cc, "-m64", "-march=x86-64-v3", "--target=x86_64-linux-gnu", "-O2", "-g", "-v"]

