"""Runs that need a fresh interpreter: the kernels' Python without the JIT, and a build for each CPU class."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agefast.kernels import _loader, _shipped
from agefast.kernels._common import FORMS
from tests.kernels import builds

from . import wycheproof

ROOT = Path(__file__).resolve().parents[2]


def run(args, cwd=ROOT, **env):
    full = dict(os.environ, **env)
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_kernels_without_jit():
    # The RFC vectors and short messages through the kernel Python itself (the
    # IR intrinsics are replaced by their big-integer stand-ins).
    out = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/kernels/test_primitives.py",
               "-k", "rfc or small_lengths"], NUMBA_DISABLE_JIT="1")
    assert "5 passed" in out


@pytest.mark.parametrize("form", ["", "split-wide"])
def test_batches_without_jit(tmp_path, form):
    # NUMBA_DISABLE_JIT=1: agefast.kernels runs the kernels' own Python (the
    # reference route), not the compiled library; in the host's form and in split-wide's 2 KiB steps.
    script = textwrap.dedent("""
        import os, sys
        from agefast.payload import rules
        from agefast.payload.engine import choose
        from agefast import kernels
        os.environ["AGEFAST_ENGINE"] = "cryptography"
        key = bytes(range(32))
        for n in (0, 100, 1500, 2600, 6000):     # through the stitched loop too, where the build has it
            src = (bytes(range(256)) * 24)[:n]
            ref = bytearray(rules.sealed_size(n))
            w = choose(None, None).seal(key, 2, src, ref, True)
            got = bytearray(w)
            assert kernels.seal_chunks(key, 2, src, got, True, threads=1) == w and got == ref
            back = bytearray(n)
            assert kernels.open_chunks(key, 2, bytes(ref), back, True, threads=1) == 1 and back == src
        # seal_file's reference: its I/O through os.pread / os.pwrite, its lock through ctypes
        plain = bytes(range(256)) * (kernels.FILE_BATCH * 256)
        ref = bytearray(kernels.FILE_BATCH * kernels.SEALED_CHUNK_SIZE)
        choose(None, None).seal(key, 0, plain, ref, False)
        with open("in", "wb") as f:
            f.write(b"x" * 10 + plain)
        src, dst = os.open("in", os.O_RDONLY), os.open("out", os.O_RDWR | os.O_CREAT, 0o600)
        kernels.seal_file(key, src, 10, dst, 3, 1, threads=1).wait()
        assert os.pread(dst, len(ref) + 1, 3) == ref
        try:
            kernels.seal_file(key, src, 10, dst, 3, 2, threads=1).wait()
        except EOFError:
            pass
        else:
            raise AssertionError("no EOFError")
        from agefast.kernels import _loader
        print("reference ok", _loader._functions.batch.__module__)
    """)
    out = run(["-c", script], NUMBA_DISABLE_JIT="1", AGEFAST_KERNEL_FORM=form, cwd=tmp_path)
    assert out == "reference ok agefast.kernels._loader\n"


def test_wycheproof_without_jit():
    # The Wycheproof vectors, each as one chunk, through the reference route (NUMBA_DISABLE_JIT=1:
    # the kernels' Python, the mask and the associated data read from the call as the build reads
    # them); behind whole chunks they would take minutes there.
    wycheproof.require()
    out = run(["-c", textwrap.dedent("""
        from agefast.kernels import _common
        from tests.kernels import wycheproof
        print(wycheproof.check(wycheproof.load(), _common.STITCHED, "reference/" + _common._form(), leads=(0,)))
    """)], NUMBA_DISABLE_JIT="1")
    line = out.splitlines()[-1]
    print("\n" + line)
    assert line.startswith("wycheproof reference/") and f": {len(wycheproof.load())} vectors" in line, out


def test_a_forked_child_keeps_using_the_engine(tmp_path):
    # The pool's threads do not survive a fork; before, the child's first
    # multi-threaded call waited for them forever. Files go through the
    # pipeline too, whose workers take the batch buffers that the jobs before
    # the fork kept (agefast.io.batch_buffers).
    script = textwrap.dedent("""
        import os, sys
        import agefast
        from agefast import x25519
        identity = x25519.Identity.generate()
        data = os.urandom(8 << 20)
        recipients = [identity.to_public()]
        plain = os.path.join(sys.argv[1], "plain")
        with open(plain, "wb") as f:
            f.write(data)
        def round_trip():
            sealed, out = (os.path.join(sys.argv[1], f"{name}-{os.getpid()}") for name in ("sealed", "out"))
            agefast.encrypt_file(plain, sealed, recipients, threads=2)
            agefast.decrypt_file(sealed, out, [identity], threads=2)
            with open(out, "rb") as f:
                through_files = f.read() == data
            os.unlink(sealed)
            os.unlink(out)
            return through_files and agefast.decrypt(agefast.encrypt(data, recipients, threads=2), [identity],
                                                     threads=2) == data
        assert round_trip()
        pid = os.fork()
        if pid == 0:
            os._exit(0 if round_trip() and round_trip() else 1)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), round_trip())
    """)
    full = dict(os.environ)
    full.pop("AGEFAST_ENGINE", None)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout == "child 0 True\n", proc.stderr[-3000:]


def test_a_child_forked_during_a_compile_never_compiles(tmp_path):
    # Forked while its parent compiled (a large job's background compile), a child's first large job waited for
    # ever on Numba's compiler lock, held by a thread that is not in the child. The child runs on cryptography
    # instead, until it finds a build to load.
    script = textwrap.dedent("""
        import os, threading
        import agefast
        from agefast import kernels, x25519
        from agefast.kernels import _loader, _shipped
        _shipped.load = lambda: "none here"    # no shipped build: only a compile would give the kernels
        started, release = threading.Event(), threading.Event()
        def compile_slowly(key):
            started.set()
            release.wait()
            raise RuntimeError("not compiled here")
        _loader._compile = compile_slowly
        kernels.compile_in_background()
        started.wait()
        pid = os.fork()
        if pid == 0:
            identity = x25519.Identity.generate()
            data = os.urandom(8 << 20)
            ok = agefast.decrypt(agefast.encrypt(data, [identity.to_public()], threads=2), [identity]) == data
            os._exit(0 if ok and not kernels.is_warm() else 1)
        _, status = os.waitpid(pid, 0)
        release.set()
        print("child", os.waitstatus_to_exitcode(status))
    """)
    full = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "empty"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    full.pop("AGEFAST_ENGINE", None)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", script], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout == "child 0\n", proc.stderr[-3000:]


def _build_checks(stitched: bool) -> str:
    """The checks a class's build must pass, as a script's lines: bit for bit
    with cryptography, every edge (parity.py), and the engine's calls."""
    return textwrap.dedent(f"""
        import random
        from agefast.payload import rules
        from agefast.payload.engine import choose
        from agefast import kernels
        from tests.kernels.parity import check_batches, check_chunks
        rng = random.Random(7)
        check_chunks(rng, stitched={stitched})
        check_batches(rng, stitched={stitched})
        key = rng.randbytes(32)
        for n in (0, 1000, 65536, 2 * 65536 + 4097):
            src = rng.randbytes(n)
            ref = bytearray(rules.sealed_size(n))
            w = choose(None, None).seal(key, 3, src, ref, True)
            got = bytearray(w)
            assert kernels.seal_chunks(key, 3, src, got, True, threads=1) == w and got == ref
            back = bytearray(n)
            assert kernels.open_chunks(key, 3, bytes(ref), back, True, threads=1) >= 1 and back == src
        print("build ok")
    """)


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory):
    """A kernel cache for each build the host runs, shared by this module's tests: a build compiles once,
    cold, in the first test that runs it, and later ones load it."""
    caches = {}

    def cache(cpu_class, form):
        if (cpu_class.name, form) not in caches:
            caches[cpu_class.name, form] = tmp_path_factory.mktemp(f"{cpu_class.name}-{form or 'shipped'}")
        return caches[cpu_class.name, form]

    return cache


def _native_build(cpu_class, form, cache) -> tuple[str, dict]:
    """The head of a script that checks it runs the build of `cpu_class` in `form` ("": the form it ships
    in), and the environment that gives it that build, from `cache`."""
    built = form or builds.SHIPPED_FORMS[cpu_class.name]
    isa = _loader._isa_of(cpu_class.features)
    head = textwrap.dedent(f"""
        from agefast import kernels
        from agefast.kernels import _common
        assert kernels.isa() == {isa!r} and _common.STITCHED == {built != "two-pass"}, kernels.isa()
        assert _common.SPLIT == {built.startswith("split")} and _common.WIDE == {built == "split-wide"}
    """)
    return head, {"NUMBA_CACHE_DIR": str(cache), "AGEFAST_KERNEL_FORM": form or cpu_class.form,
                  **builds.target_env(cpu_class)}


@pytest.mark.parametrize(("cpu_class", "form"), builds.BUILDS, ids=builds.IDS)
def test_each_class_build(tmp_path, build_cache, cpu_class, form):
    # Each class's build (its Numba target, as the package ships it), one
    # cold compile, every check of it. A tampered chunk leaves zeros where the
    # build is stitched or split, and the two-pass builds leave it untouched.
    # An Arm build's vector code is NEON, which isa() counts as the baseline.
    # Where the CPU cannot run an AVX-512 build, its code still runs, lowered
    # for AVX2 (tests/kernels/lowered.py): the CPUs at hand may have no
    # AVX-512 for days of changes to the kernels.
    built = form or builds.SHIPPED_FORMS[cpu_class.name]
    stitched = built != "two-pass"
    lanes = built != "stitched"     # Poly1305 on vector lanes for some of each chunk
    if builds.runs_natively(cpu_class):
        head, env = _native_build(cpu_class, form, build_cache(cpu_class, form))
    elif builds.runs_lowered(cpu_class):
        # The IFMA build's lanes go through the vpmadd52 stand-ins, the others' not; ChaCha20 is
        # transposed from 16 blocks a vector, and for each Poly1305 key from four (_chunk._key).
        ifma = "+avx512ifma" in cpu_class.features.split(",")
        madd52 = f" and (seen['madd52'] > 0) == {ifma}" if lanes else ""
        head = builds.lowered_head(cpu_class) + textwrap.dedent(f"""
            from agefast import kernels
            from agefast.kernels import _common
            kernels.warm_up()
            assert _common.STITCHED == {stitched} and _common.SPLIT == {built.startswith("split")}
            assert _common.WIDE == {built == "split-wide"}
            assert seen["widths"] == {{16, 4}}{madd52}, seen
        """)
        # a cache of its own: the lowered build is cached under the AVX2 target (lowered.py)
        env = {"NUMBA_CACHE_DIR": str(tmp_path), "AGEFAST_KERNEL_FORM": form or cpu_class.form,
               **builds.target_env(builds.AVX2)}
    else:
        pytest.skip(f"this CPU cannot run the {cpu_class.name} build")
    out = run(["-c", head + _build_checks(stitched)], **env)
    assert "build ok" in out


# Every form of each x86 class (the one it ships in as ""), and the Arm class as it ships.
_FORMS = [(c, f) for c in _shipped.CLASSES if c.machine == "x86_64"
          for f in ("",) + tuple(f for f in FORMS if f != builds.SHIPPED_FORMS[c.name] and not c.form)]
_FORMS += [(c, "") for c in _shipped.CLASSES if c.machine != "x86_64"]


@pytest.mark.parametrize(("cpu_class", "form"), _FORMS,
                         ids=[f"{c.name}-{f or builds.SHIPPED_FORMS[c.name]}" for c, f in _FORMS])
def test_wycheproof_each_class_and_form(build_cache, cpu_class, form):
    # The Wycheproof vectors (wycheproof.py) on each class's build in each form the host runs: the
    # classes' real code, not lowered (that is test_each_class_build's).
    wycheproof.require()
    if not builds.runs_natively(cpu_class):
        pytest.skip(f"this CPU cannot run the {cpu_class.name} build")
    built = form or builds.SHIPPED_FORMS[cpu_class.name]
    head, env = _native_build(cpu_class, form, build_cache(cpu_class, form))
    out = run(["-c", head + textwrap.dedent(f"""
        from tests.kernels import wycheproof
        print(wycheproof.check(wycheproof.load(), {built != "two-pass"}, "{cpu_class.name}/{built}"))
    """)], **env)
    line = out.splitlines()[-1]
    print("\n" + line)
    assert line.startswith(f"wycheproof {cpu_class.name}/{built}: {len(wycheproof.load())} vectors"), out


def test_the_kernel_caches_live_outside_the_package(tmp_path):
    # Numba's default would cache inside the installed package, where pip
    # leaves it behind on uninstall; the user-wide cache or NUMBA_CACHE_DIR
    # take it instead, for the compiled batch kernel and for Numba's own cache
    # of the single-message kernels the tests call.
    probe = ("from agefast.kernels import _cache\n"
             "from tests.kernels import calls\n"
             "loc = calls.chacha20_kernel._cache._impl.locator\n"
             "print(type(loc).__bases__[-1].__name__, loc.get_cache_path(), _cache.directory())\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    kind, path, ours = done.stdout.split()
    assert kind == "UserWideCacheLocator" and path.startswith(str(tmp_path / "xdg")), done.stderr
    assert ours == str(tmp_path / "xdg" / "agefast" / "kernels")
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "own")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    kind, path, ours = done.stdout.split()
    assert kind == "UserProvidedCacheLocator" and path.startswith(str(tmp_path / "own")), done.stderr
    assert ours == str(tmp_path / "own" / "agefast-kernels")
