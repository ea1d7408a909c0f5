"""The kernels built with the package: which class a CPU takes, and what a shipped build must be to load."""

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agefast.kernels import _shipped
from required import unavailable

from .machines import ICELAKE_SP, IVY_BRIDGE, ZEN2, ZEN5_GUEST, cpuinfo

ROOT = Path(__file__).resolve().parents[2]
EVERY = frozenset(c.name for c in _shipped.CLASSES)


def test_only_a_shipped_class_is_chosen():
    flags = _shipped.cpuinfo_flags(cpuinfo(ICELAKE_SP))
    assert _shipped.choose("x86_64", flags, frozenset({"avx2", "avx512f"})).name == "avx512f"
    assert _shipped.choose("x86_64", flags, frozenset({"avx2"})).name == "avx2"
    assert _shipped.choose("x86_64", flags, frozenset()) is None


def test_the_flags_of_the_first_processor_are_read():
    flags = _shipped.cpuinfo_flags(cpuinfo(ZEN2))
    assert {"avx2", "bmi1", "pni", "lahf_lm"} <= flags and "fpu" in flags and len(flags) > 10


def test_the_manifest_reads_back_what_was_written():
    record = {"python": "3.11.7", "numba": "0.68.1", "llvmlite": "0.50.0", "llvm": "22.1.0",
              "linker": "cc -shared -nostdlib: cc (Debian 12.2.0-14) 12.2.0; GNU ld (GNU Binutils for Debian) 2.40"}
    text = _shipped.write_manifest("ab" * 32, record, {"avx2": "cd" * 32})
    fields, builds = _shipped.read_manifest(text)
    assert fields == {"format": "2", "source": "ab" * 32, **record}
    avx2 = next(c for c in _shipped.CLASSES if c.name == "avx2")
    assert builds == {"avx2": _shipped.Build("cd" * 32, avx2.cpu, avx2.features)}    # the target it was built for
    with pytest.raises(ValueError):
        _shipped.read_manifest(text.replace("format 2", "format 1"))
    with pytest.raises(ValueError):
        _shipped.read_manifest(text.replace(f" {avx2.cpu} ", " "))


@pytest.fixture(scope="module")
def host_build():
    """(the class this machine runs, a shared library of the kernels for this machine), from the kernel cache."""
    from agefast import kernels
    from agefast.kernels import _cache

    cpu_class = _shipped.host_class()
    if cpu_class is None:
        pytest.skip("no shipped class fits this CPU")
    kernels.warm_up()      # fills the cache if it is cold
    entry = _cache.lookup(_cache.key())
    if entry is None or entry[0] != "so":
        unavailable("the kernel cache holds no shared library (no C compiler driver)")
    return cpu_class, entry[1]


def ship(directory: Path, cpu_class, library: bytes, source: str | None = None) -> Path:
    """A prebuilt/ folder as the build makes it, holding `library` as `cpu_class`'s build."""
    directory.mkdir()
    (directory / f"{cpu_class.name}.so").write_bytes(library)
    source = source or _shipped.source_digest(os.path.dirname(_shipped.__file__))
    (directory / "manifest").write_text(_shipped.write_manifest(
        source, {"numba": "0", "llvmlite": "0"}, {cpu_class.name: hashlib.sha256(library).hexdigest()}))
    return directory


def test_a_build_for_another_target_than_its_class_is_refused(tmp_path, host_build, monkeypatch):
    # A build compiled when the class was defined otherwise (say, a CPU name
    # implying rdseed) may execute what the class no longer requires.
    cpu_class, library = host_build
    prebuilt = ship(tmp_path / "prebuilt", cpu_class, library)
    monkeypatch.setattr(_shipped, "DIRECTORY", str(prebuilt))
    manifest = prebuilt / "manifest"
    _shipped.verified.cache_clear()
    try:
        assert not isinstance(_shipped.verified(), str)
        manifest.write_text(manifest.read_text().replace(f" {cpu_class.cpu} ", " skylake-avx512 "))
        _shipped.verified.cache_clear()
        assert _shipped.verified() == f"the shipped {cpu_class.name} build was compiled for another target"
    finally:
        _shipped.verified.cache_clear()


def test_what_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, host_build):
    # A FIFO had held the process in its read, /dev/zero filled the memory.
    cpu_class, library = host_build
    prebuilt = ship(tmp_path / "prebuilt", cpu_class, library)
    os.mkfifo(tmp_path / "fifo")
    why = textwrap.dedent("""
        import sys
        from agefast.kernels import _shipped
        _shipped.DIRECTORY = sys.argv[1]
        print(_shipped.verified())
    """)
    for there in (tmp_path / "fifo", Path("/dev/zero")):
        (prebuilt / f"{cpu_class.name}.so").unlink()
        (prebuilt / f"{cpu_class.name}.so").symlink_to(there)
        done = subprocess.run([sys.executable, "-c", why, str(prebuilt)], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                              capture_output=True, text=True, timeout=60)
        assert done.stdout == f"the shipped {cpu_class.name} build cannot be read (not a regular file)\n", done.stderr


def test_without_numba_the_message_says_why_no_shipped_build_runs(tmp_path, monkeypatch):
    from agefast.kernels import _loader

    monkeypatch.setattr(_shipped, "DIRECTORY", str(tmp_path))
    _shipped.verified.cache_clear()
    try:
        message = str(_loader._without_jit(ImportError("No module named 'numba'")))
    finally:
        _shipped.verified.cache_clear()
    assert message.startswith("no kernel build shipped with agefast runs here (none was built with this install), "
                              "and numba and llvmlite")


LOAD = textwrap.dedent("""
    import os, sys
    from agefast import kernels
    from agefast.kernels import _cache, _shipped
    from agefast.payload import rules
    from agefast.payload.engine import Engine
    _shipped.DIRECTORY = sys.argv[1]
    print(kernels.cached())
    if kernels.cached():
        key = bytes(range(32))
        src = bytes(range(256)) * 1000
        ref = bytearray(rules.sealed_size(len(src)))
        Engine(None, 1).seal(key, 5, src, ref, True)      # cryptography
        got = bytearray(len(ref))
        kernels.seal_chunks(key, 5, src, got, True, threads=2)
        print(got == ref, "numba" in sys.modules, "llvmlite" in sys.modules, 
          # the loader maps a shipped build from a memfd named after its class
          "shipped" if "memfd:agefast-kernels-" in open("/proc/self/maps").read() else "cached")
    # what the cache holds: a lookup may make its (empty, private) folder
    print(os.listdir(_cache.directory()) if os.path.exists(_cache.directory()) else [])
""")


def load_in_a_fresh_process(prebuilt: Path, cache: Path | None) -> str:
    """What LOAD prints with `prebuilt` as the shipped builds; `cache`: an empty kernel cache, else the warm one."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
    env["PYTHONPATH"] = str(ROOT)
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, "-c", LOAD, str(prebuilt)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_shipped_build_loads_without_numba_or_a_compile(tmp_path, host_build):
    out = load_in_a_fresh_process(ship(tmp_path / "prebuilt", *host_build), cache=tmp_path / "cache")
    assert out == "True\nTrue False False shipped\n[]\n"


def test_a_damaged_shipped_build_is_refused_for_the_cache(tmp_path, host_build):
    cpu_class, library = host_build
    damaged = bytearray(library)
    damaged[len(damaged) // 2] ^= 1
    prebuilt = ship(tmp_path / "prebuilt", cpu_class, library)
    (prebuilt / f"{cpu_class.name}.so").write_bytes(damaged)
    assert load_in_a_fresh_process(prebuilt, cache=tmp_path / "cache") == "False\n[]\n"
    assert load_in_a_fresh_process(prebuilt, cache=None).startswith("True\nTrue False False cached\n")


def test_a_build_of_other_kernel_sources_is_ignored(tmp_path, host_build):
    prebuilt = ship(tmp_path / "prebuilt", *host_build, source="00" * 32)
    assert load_in_a_fresh_process(prebuilt, cache=tmp_path / "cache") == "False\n[]\n"
    assert load_in_a_fresh_process(prebuilt, cache=None).startswith("True\nTrue False False cached\n")


def test_a_shipped_build_the_loader_refuses_leaves_the_kernels_to_the_cache(tmp_path, host_build):
    # as where a loader refuses the shipped library (dlopen fails): the
    # first load, the shipped build's, fails; the cache's compile loads
    refuse = ("from agefast.kernels import _native\n"
              "real = _native.load_library\n"
              "refused = []\n"
              "def load_library(data, *label):\n"
              "    if not refused:\n"
              "        refused.append(data)\n"
              "        raise OSError('failed to map segment from shared object')\n"
              "    return real(data, *label)\n"
              "_native.load_library = load_library\n")
    prebuilt = ship(tmp_path / "prebuilt", *host_build)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
    done = subprocess.run([sys.executable, "-c", refuse + LOAD, str(prebuilt)], env=dict(env, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True\nTrue False False cached\n")


@pytest.mark.parametrize("setting", [("NUMBA_CPU_NAME", "haswell"), ("AGEFAST_KERNEL_FORM", "two-pass")])
def test_a_numba_target_or_a_kernel_form_in_the_environment_passes_the_shipped_builds_by(
        tmp_path, host_build, monkeypatch, setting):
    monkeypatch.setattr(_shipped, "DIRECTORY", str(ship(tmp_path / "prebuilt", *host_build)))
    _shipped.verified.cache_clear()
    try:
        assert not isinstance(_shipped.verified(), str)
        _shipped.verified.cache_clear()
        monkeypatch.setenv(*setting)
        assert _shipped.verified() == f"{setting[0]} asks for a build of its own"
    finally:
        _shipped.verified.cache_clear()


def test_the_build_compiles_the_classes_asked_for(capsys):
    import build_kernels

    zen2 = _shipped.cpuinfo_flags(cpuinfo(ZEN2))
    names = lambda classes: [c.name for c in classes]  # noqa: E731
    assert names(build_kernels.selected("", "x86_64", zen2)) == ["avx2"]
    assert names(build_kernels.selected("host", "x86_64", _shipped.cpuinfo_flags(cpuinfo(ICELAKE_SP)))) == [
        "avx512ifma"]
    assert names(build_kernels.selected("host", "x86_64", _shipped.cpuinfo_flags(cpuinfo(IVY_BRIDGE)))) == []
    zen5 = _shipped.cpuinfo_flags(cpuinfo(ZEN5_GUEST))
    assert names(build_kernels.selected("host", "x86_64", zen5, ("AuthenticAMD", 26))) == ["avx512ifma-zen5"]
    assert names(build_kernels.selected("host", "x86_64", zen5, ("AuthenticAMD", 25))) == ["avx512ifma"]
    assert names(build_kernels.selected("all", "x86_64", zen2)) == ["avx512ifma-zen5", "avx512ifma", "avx512f",
                                                                    "avx2-zen5", "avx2"]
    assert names(build_kernels.selected("all", "aarch64", frozenset())) == ["aarch64"]
    assert names(build_kernels.selected("none", "x86_64", zen2)) == []
    assert names(build_kernels.selected("avx2, avx512f", "x86_64", zen2)) == ["avx512f", "avx2"]
    for typo in ("avx2, avx512fx", "AVX2", "bogus"):     # a typo had built nothing, the install going on
        with pytest.raises(build_kernels.BuildFailed, match="no class"):
            build_kernels.selected(typo, "x86_64", zen2)


def test_a_class_that_fails_to_compile_is_left_out_where_the_host_chose_it(tmp_path, monkeypatch, capsys):
    import build_kernels

    def compile_class(cpu_class, out):
        if cpu_class.name == "avx2":
            return False, "avx2 failed after 1 s: no C compiler driver", {}
        Path(out).write_bytes(b"a library")
        return True, f"{cpu_class.name} compiled in 1 s", {"numba": "0.68.1", "linker": "cc -shared"}

    monkeypatch.setattr(build_kernels, "_compile", compile_class)
    # two x86 classes, whatever machine builds and whatever the setting names (the setting still decides
    # whether a failure fails the build)
    avx512f, avx2 = [c for c in _shipped.CLASSES if c.name in ("avx2", "avx512f")]
    chosen = {"": [avx512f, avx2], "avx2,avx512f": [avx512f, avx2], "avx2": [avx2]}
    monkeypatch.setattr(build_kernels, "selected", lambda setting, machine, flags, family: chosen[setting])
    prebuilt = tmp_path / "prebuilt"
    monkeypatch.setenv("AGEFAST_BUILD_KERNELS", "")
    build_kernels.ship(str(prebuilt))
    fields, builds = _shipped.read_manifest((prebuilt / "manifest").read_text())
    assert {name: build.sha256 for name, build in builds.items()} == {
        "avx512f": hashlib.sha256(b"a library").hexdigest()}
    assert fields["source"] == _shipped.source_digest(os.path.dirname(_shipped.__file__))
    assert fields["numba"] == "0.68.1" and fields["linker"] == "cc -shared"    # the record of the build that worked
    assert sorted(p.name for p in prebuilt.iterdir()) == ["avx512f.so", "manifest"]
    assert "avx2 failed after 1 s: no C compiler driver" in capsys.readouterr().err

    # asked for by name (or by "all"), a class that fails fails the build, and nothing is left to ship
    for setting in ("avx2,avx512f", "avx2"):
        monkeypatch.setenv("AGEFAST_BUILD_KERNELS", setting)
        with pytest.raises(build_kernels.BuildFailed, match="avx2 failed after 1 s: no C compiler driver"):
            build_kernels.ship(str(prebuilt))
        assert not prebuilt.exists()

    chosen[""] = [avx2]
    monkeypatch.setenv("AGEFAST_BUILD_KERNELS", "")
    build_kernels.ship(str(prebuilt))
    assert not prebuilt.exists()
    assert "nothing shipped: the kernels compile at run time where numba is installed" in capsys.readouterr().err
