"""The compiled-kernel cache, in fresh processes: warm loads without numba; cold, stale, corrupt, racing,
unwritable and compiler-less caches all end with correct output."""

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agefast.kernels import _cache, _loader, _shipped
from unnamed_files import require_unnamed_files

ROOT = Path(__file__).resolve().parents[2]
AVX2 = next(c for c in _shipped.CLASSES if c.name == "avx2")
PROBE = """
import json, os, random, sys
from agefast import kernels
kernels.warm_up()
loaded = {name: name in sys.modules for name in ("numba", "numpy", "cryptography")}
from agefast.payload import rules
from agefast.payload.engine import choose
os.environ["AGEFAST_ENGINE"] = "cryptography"   # chunks: the reference
rng = random.Random(3)
key = rng.randbytes(32)
for n in (0, 1000, 3 * 65536 + 5):
    src = rng.randbytes(n)
    ref = bytearray(rules.sealed_size(n))
    w = choose(None, None).seal(key, 7, src, ref, True)
    got = bytearray(w)
    if kernels.seal_chunks(key, 7, src, got, True, threads=2) != w or got != ref:
        raise SystemExit(f"seal of {n} bytes differs")
    back = bytearray(n)
    if kernels.open_chunks(key, 7, bytes(ref), back, True, threads=2) != max(1, -(-n // 65536)) or back != src:
        raise SystemExit(f"open of {n} bytes differs")
print(json.dumps({**loaded, "isa": kernels.isa()}))
"""


def start(cache, cwd=ROOT, **env):
    # The private fallback folder too, so that no test reads or fills the user's own cache.
    full = dict(os.environ, NUMBA_CACHE_DIR=str(cache), XDG_CACHE_HOME=f"{cache}-xdg", **env)
    full.pop("AGEFAST_ENGINE", None)
    return subprocess.Popen([sys.executable, "-c", PROBE], cwd=cwd, env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.splitlines()[-1])


def probe(cache, **kw) -> dict:
    return finish(start(cache, **kw))


def entries(cache):
    return sorted((cache / "agefast-kernels").glob("*.entry"))


def compiled_file(entry: Path) -> Path:
    meta = dict(line.split(" ", 1) for line in entry.read_text().splitlines())
    return entry.parent / f"{meta['sha256']}.{meta['kind']}"


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A cache filled by a cold process, and what that process reported."""
    cache = tmp_path_factory.mktemp("filled")
    return cache, probe(cache)


@pytest.fixture
def warm(filled, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(filled[0], cache)
    return cache


def test_a_cold_cache_compiles_and_a_warm_one_loads_without_numba(filled):
    cache, cold = filled
    assert cold["numba"]
    assert len(entries(cache)) == 1
    warm = probe(cache)
    # Nor cryptography: the command loads the kernels before it (agefast.cli.early_payload).
    assert not warm["numba"] and not warm["numpy"] and not warm["cryptography"], warm
    assert warm["isa"] == cold["isa"]


def test_a_corrupt_entry_is_rebuilt_never_loaded(warm):
    so = compiled_file(entries(warm)[0])
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0x40        # same size, one bit: only the checksum can tell
    so.write_bytes(data)
    assert probe(warm)["numba"]         # compiled again (the corrupt code would have been a crash or wrong output)
    assert not probe(warm)["numba"]     # and the entry is whole again


@pytest.mark.parametrize("damage", ["truncated", "flipped", "no record", "bad record"])
def test_lookup_misses_on_a_damaged_entry(warm, monkeypatch, damage):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(warm))
    record = entries(warm)[0]
    key = record.stem
    assert _cache.lookup(key) is not None
    so = compiled_file(record)
    if damage == "truncated":
        so.write_bytes(so.read_bytes()[:1000])
    elif damage == "flipped":
        data = bytearray(so.read_bytes())
        data[-1] ^= 1
        so.write_bytes(data)
    elif damage == "no record":
        record.unlink()
    else:
        record.write_bytes(record.read_bytes()[:20])
    assert _cache.lookup(key) is None


def test_the_key_covers_every_module_the_kernels_are_compiled_from():
    # The build imports every module whose code goes into the compiled object;
    # each must be in the key, or an edit to it would load stale machine code.
    # The snapshot is taken before agefast.kernels is imported: it imports _shipped, whose table names the CPU
    # each class's object is emitted for, and a snapshot after it missed that.
    probe = ("import sys\nimport agefast\nbefore = set(sys.modules)\n"
             "from agefast.kernels import _build\n"
             "print(*sorted(m for m in set(sys.modules) - before if m.startswith('agefast.')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    imported = {f"{name.rsplit('.', 1)[1]}.py" for name in done.stdout.split()}
    # What loads, calls and caches the kernels, not what they are compiled from.
    running = {"kernels.py", "io.py", "errors.py", "cpus.py", "lending.py", "portable.py", "trust.py", "_batches.py",
               "_cache.py", "batch_buffers.py",
               "_file_job.py", "_known_answer.py", "_loader.py", "_native.py", "_pool.py"}
    compiled = imported - running
    assert {"_build.py", "_aead.py", "_stitched.py", "_file_io.py", "_chacha20.py", "_poly1305.py",
            "_common.py", "_shipped.py"} <= compiled
    assert compiled <= {os.path.basename(source) for source in _cache._SOURCES}
    # and the modules the entry points read constants from, imported before the build
    assert {"_abi.py", os.path.join("..", "io", "pieces.py")} <= set(_cache._SOURCES)


def test_an_edited_kernel_source_gets_a_new_entry(warm, tmp_path):
    # _chacha20 holds no C entry point, only what the entry points call: the
    # edit Numba's own cache would not notice.
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "agefast", tree / "agefast", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tree / "agefast" / "kernels" / "_chacha20.py", "a") as f:
        f.write("\n# an edit\n")
    before = entries(warm)
    assert probe(warm, cwd=tree)["numba"]       # the old entry is not this source's
    assert len(entries(warm)) == 2 and set(before) < set(entries(warm))
    assert not probe(warm, cwd=tree)["numba"]


def test_two_processes_filling_an_empty_cache_at_once(tmp_path):
    procs = [start(tmp_path), start(tmp_path)]
    assert all(finish(p)["numba"] for p in procs)
    assert len(entries(tmp_path)) == 1
    assert not list((tmp_path / "agefast-kernels").glob(".*.partial"))
    assert not probe(tmp_path)["numba"]


def test_without_a_c_compiler_the_object_file_is_cached(tmp_path):
    no_cc = {"CC": str(tmp_path / "no-such-cc")}
    assert probe(tmp_path, **no_cc)["numba"]
    (record,) = entries(tmp_path)
    assert compiled_file(record).suffix == ".o"
    assert not probe(tmp_path, **no_cc)["numba"]     # loaded by llvmlite's MCJIT


def test_an_unwritable_cache_still_runs_and_says_it_keeps_nothing(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_bytes(b"")
    (tmp_path / "a-file-xdg").write_bytes(b"")     # the private fallback too
    proc = start(blocked)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0 and json.loads(out.splitlines()[-1])["numba"], err[-3000:]
    # A compile of seconds, every process: worth a line.
    assert "the compiled kernels could not be kept" in err and "every process compiles them again" in err


def test_with_no_cache_anywhere_and_no_shipped_build_the_kernels_compile_in_process(tmp_path):
    # Every cache folder under a plain file (root writes anywhere else), a
    # copy of the package without prebuilt/, and a temporary folder of its
    # own: the process compiles (one cold compile: 5.4 s of CPU, 14 s on a
    # loaded Zen 4 VM, 2026-12-05), runs what it compiled, bit-exact, and
    # leaves nothing behind anywhere.
    blocked = tmp_path / "a-file"
    blocked.write_bytes(b"")
    tree, scratch = tmp_path / "tree", tmp_path / "tmp"
    shutil.copytree(ROOT / "agefast", tree / "agefast", ignore=shutil.ignore_patterns("__pycache__", "prebuilt"))
    scratch.mkdir()
    before = sorted(tmp_path.rglob("*"))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(blocked), XDG_CACHE_HOME=str(blocked), HOME=str(blocked),
               TMPDIR=str(scratch), PYTHONDONTWRITEBYTECODE="1")
    env.pop("AGEFAST_ENGINE", None)
    proc = subprocess.Popen([sys.executable, "-c", PROBE], cwd=tree, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert finish(proc)["numba"]
    assert sorted(tmp_path.rglob("*")) == before and blocked.read_bytes() == b""


def test_the_key_covers_sources_cpu_settings_host_and_releases(monkeypatch, tmp_path):
    def fresh_key():
        _cache.key.cache_clear()
        return _cache.key()

    keys = [fresh_key()]
    # Set but empty is Numba's "" (it compiles for no CPU name), not unset; and every NUMBA_ setting counts, as
    # ones few would think of change the code (builds under these three had been stored under the plain key).
    for name, value in (("NUMBA_CPU_NAME", ""), ("NUMBA_DEBUGINFO", "1"), ("NUMBA_LLVM_REFPRUNE_PASS", "0")):
        monkeypatch.setenv(name, value)
        keys.append(fresh_key())
    monkeypatch.setenv("NUMBA_CPU_NAME", "haswell")
    keys.append(fresh_key())
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx2")
    keys.append(fresh_key())
    monkeypatch.setenv("AGEFAST_KERNEL_FORM", "two-pass")
    keys.append(fresh_key())
    monkeypatch.setenv("NUMBA_BOUNDSCHECK", "1")
    keys.append(fresh_key())
    # Numba reads its settings from this file in the current folder too: a CPU name there had compiled an
    # AVX-512 build under the plain key, which every later process on an AVX2 machine died of (SIGILL).
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".numba_config.yaml").write_text("cpu_name: x86-64-v4\n")
    keys.append(fresh_key())
    (tmp_path / ".numba_config.yaml").unlink()
    host = _cache._host_cpu()
    monkeypatch.setattr(_cache, "_host_cpu", lambda: host + b" other")
    keys.append(fresh_key())
    release = _cache._release
    monkeypatch.setattr(_cache, "_release", lambda name: release(name) + (b"#" if name == "numba" else b""))
    keys.append(fresh_key())
    monkeypatch.setattr(_cache, "_release", lambda name: release(name) + (b"#" if name == "llvmlite" else b""))
    keys.append(fresh_key())
    # the whole package: the sources include one outside agefast/kernels (io/pieces.py)
    for source in ("_build.py", "_stitched.py"):
        package = tmp_path / source / "agefast"
        shutil.copytree(Path(_cache._HERE).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
        copy = package / "kernels"
        with open(copy / source, "a") as f:
            f.write("\n")
        monkeypatch.setattr(_cache, "_HERE", str(copy))
        keys.append(fresh_key())
    monkeypatch.undo()
    assert len(set(keys)) == len(keys)
    assert fresh_key() == keys[0]
    # Where the cache is changes no code: entries copied to another folder stay good.
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert fresh_key() == keys[0]
    monkeypatch.undo()


class HalfWritten:
    """A file the cache writes to that takes half of the data, flushed, then calls `then` (which raises or waits)."""

    def __init__(self, f, then):
        self.f, self.then = f, then

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, data):
        self.f.write(data[:len(data) // 2])
        self.f.flush()
        self.then()


def interrupted():
    raise KeyboardInterrupt


@pytest.mark.parametrize("unnamed", [True, False], ids=["a file without a name", "a temporary name"])
def test_a_store_that_fails_half_way_leaves_no_temporary_file(tmp_path, monkeypatch, unnamed):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    if unnamed:
        require_unnamed_files(tmp_path)
    else:
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    real_fdopen = os.fdopen
    with monkeypatch.context() as half:     # only the write fails: the cache stays in tmp_path, not the user's
        half.setattr(_cache.os, "fdopen", lambda fd, mode: HalfWritten(real_fdopen(fd, mode), interrupted))
        with pytest.raises(KeyboardInterrupt):
            _cache.store("k", "so", b"compiled", {"cpu": "x", "features": "y"})
    assert os.listdir(tmp_path / "agefast-kernels") == []
    _cache.store("k", "so", b"compiled", {"cpu": "x", "features": "y"})     # and a store afterwards is whole
    assert _cache.lookup("k")[1] == b"compiled"
    assert sorted(os.listdir(tmp_path / "agefast-kernels")) == sorted([f"{hashlib.sha256(b'compiled').hexdigest()}.so",
                                                                        "k.entry"])


KILLED_WRITING = """
import os, time
from agefast.kernels import _cache
from tests.kernels.test_cache import HalfWritten

def stalled():
    print("half written", flush=True)
    time.sleep(60)

real_fdopen = os.fdopen
os.fdopen = lambda fd, mode: HalfWritten(real_fdopen(fd, mode), stalled)
_cache.store("k", "so", b"compiled" * 1000, {"cpu": "x", "features": "y"})
"""


def test_a_store_killed_half_way_leaves_nothing_in_the_cache(tmp_path):
    require_unnamed_files(tmp_path)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "xdg"),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITING], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=60)
    assert line == "half written\n", err
    assert os.listdir(tmp_path / "agefast-kernels") == []


def test_a_store_replaces_an_old_file_of_its_name_and_never_writes_through_a_symbolic_link(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "agefast-kernels"
    folder.mkdir(mode=0o700)
    digest = hashlib.sha256(b"compiled").hexdigest()
    (folder / f"{digest}.so").write_bytes(b"compiled, then corrupted")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"not the cache's")
    (folder / "k.entry").symlink_to(elsewhere)
    _cache.store("k", "so", b"compiled", {"cpu": "x", "features": "y"})
    assert _cache.lookup("k")[1] == b"compiled"
    assert elsewhere.read_bytes() == b"not the cache's" and not (folder / "k.entry").is_symlink()
    assert sorted(os.listdir(folder)) == sorted([f"{digest}.so", "k.entry"])


# ---------------------------------------------------------------- trust: nothing another account can write is loaded

NOBODY = 65534
as_root = pytest.mark.requires_root("chown to another account")


@pytest.fixture
def trusting(warm, tmp_path, monkeypatch):
    """The warm cache as this process's cache, an empty private fallback, and warnings not yet given."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(warm))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(_cache, "_warned", set())
    return warm / "agefast-kernels"


def bit_exact(functions) -> None:
    """The loaded functions seal as cryptography's ChaCha20Poly1305 does (one final chunk, counter 5)."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    from agefast import kernels

    key, src = bytes(range(32)), bytes(range(256)) * 40
    got = bytearray(len(src) + 16)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_loader, "_functions", functions)
        assert kernels.seal_chunks(key, 5, src, got, True, threads=1) == len(got)
    assert bytes(got) == ChaCha20Poly1305(key).encrypt((5).to_bytes(11, "big") + b"\x01", src, None)


def make_untrusted(path: Path, how: str, tmp_path: Path) -> Path:
    """Give a folder or file of the cache what makes it untrusted; returns where it now is."""
    if how == "another owner":
        os.chown(path, NOBODY, -1)
    elif how == "group-writable":
        path.chmod(path.stat().st_mode | stat.S_IWGRP)
    elif how == "world-writable":
        path.chmod(path.stat().st_mode | stat.S_IWOTH)
    else:   # the same content behind a symbolic link: the link's target may be anyone's
        moved = tmp_path / "elsewhere"
        path.rename(moved)
        path.symlink_to(moved)
        return moved
    return path


@as_root
@pytest.mark.parametrize("how", ["another owner", "group-writable", "world-writable", "symlink"])
def test_an_untrusted_folder_is_not_used_and_the_private_fallback_is(trusting, tmp_path, how):
    from agefast import kernels

    key = entries(trusting.parent)[0].stem
    kind, data, meta = _cache.lookup(key)
    make_untrusted(trusting, how, tmp_path)
    reason = {"another owner": f"owned by uid {NOBODY}", "symlink": "symbolic link"}.get(how, "writable by group")
    expected = f"{re.escape(str(trusting))}: it is (a )?{reason}.*; using {re.escape(str(tmp_path / 'xdg'))}"
    with pytest.warns(RuntimeWarning, match=expected) as warned:
        assert _cache.lookup(key) is None               # the fallback is empty
        _cache.store(key, kind, data, meta)              # and takes the entry
        assert _cache.lookup(key) == (kind, data, meta)
    assert len(warned) == 1                              # one warning, however often the cache is used
    private = tmp_path / "xdg" / "agefast" / "kernels"
    assert [stat.S_IMODE(p.stat().st_mode) for p in (private.parent, private)] == [0o700, 0o700]
    functions, _ = _loader._load()
    bit_exact(functions)


@as_root
def test_a_process_runs_no_code_from_another_accounts_folder(filled, tmp_path):
    # As the attack: another account made the folder and put a library in it
    # under a record with the library's own checksum. Loading it would fail
    # (it is not a library); the process uses its private folder instead.
    hostile = tmp_path / "shared" / "agefast-kernels"
    shutil.copytree(filled[0] / "agefast-kernels", hostile)
    shutil.copytree(filled[0] / "agefast-kernels", tmp_path / "shared-xdg" / "agefast" / "kernels")
    record = entries(tmp_path / "shared")[0]
    planted = b"not a library" * 1000
    digest = hashlib.sha256(planted).hexdigest()
    compiled_file(record).unlink()
    (hostile / f"{digest}.so").write_bytes(planted)
    record.write_text(re.sub(r"sha256 \w+", f"sha256 {digest}", record.read_text()))
    for path in (hostile, *hostile.iterdir()):
        os.chown(path, NOBODY, -1)
    proc = start(tmp_path / "shared")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert not json.loads(out.splitlines()[-1])["numba"]      # loaded from the private folder, bit-exact
    assert err.count("RuntimeWarning") == 1 and f"{hostile}: it is owned by uid {NOBODY}" in err


@pytest.mark.parametrize("file", ["record", "compiled"])
@pytest.mark.parametrize("how", [pytest.param("another owner", marks=as_root), "group-writable",
                                 "world-writable", "symlink"])
def test_an_untrusted_entry_is_a_miss(trusting, tmp_path, file, how):
    record = entries(trusting.parent)[0]
    key = record.stem
    kind, data, meta = _cache.lookup(key)
    path = record if file == "record" else compiled_file(record)
    target = make_untrusted(path, how, tmp_path)
    assert _cache.lookup(key) is None
    _cache.store(key, kind, data, meta)         # replaces the name, never writes through a link
    assert _cache.lookup(key) == (kind, data, meta)
    if how == "symlink":
        assert not path.is_symlink() and target.read_bytes() == path.read_bytes()


def test_what_is_loaded_is_what_was_hashed(trusting, monkeypatch):
    # The compiled file is rewritten in place (and its name taken by
    # another file) after it was verified and before it is loaded.
    from agefast import kernels
    from agefast.kernels import _native

    record = entries(trusting.parent)[0]
    so = compiled_file(record)
    verified = _cache.lookup

    def swapped_after_verifying(key):
        entry = verified(key)
        with open(so, "r+b") as f:
            f.write(b"\0" * so.stat().st_size)
        (so.parent / "other").write_bytes(b"not a library")
        os.replace(so.parent / "other", so)
        return entry

    monkeypatch.setattr(_cache, "lookup", swapped_after_verifying)
    functions, _ = _loader._load()
    bit_exact(functions)
    with open(f"/proc/self/fd/{_native._keep[-1]}", "rb") as loaded:
        assert hashlib.sha256(loaded.read()).hexdigest() == so.stem != hashlib.sha256(so.read_bytes()).hexdigest()


def test_folders_and_entries_are_private_whatever_the_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    old = os.umask(0)
    try:
        _cache.store("k", "so", b"compiled", {"cpu": "x", "features": "y"})
        monkeypatch.delenv("NUMBA_CACHE_DIR")
        _cache.store("k", "so", b"compiled", {"cpu": "x", "features": "y"})
    finally:
        os.umask(old)
    for folder in (tmp_path / "numba" / "agefast-kernels", tmp_path / "xdg" / "agefast" / "kernels"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {0o600}
    assert stat.S_IMODE((tmp_path / "xdg" / "agefast").stat().st_mode) == 0o700


@as_root
def test_numbas_own_cache_is_used_only_where_trusted(tmp_path):
    # Numba's cache of the single-message kernels loads pickles: a folder of
    # another account's is declined, NUMBA_CACHE_DIR's then the user-wide one.
    show = ("from tests.kernels import calls\n"
            "print(getattr(calls.chacha20_kernel._cache, '_impl', None) and calls.chacha20_kernel._cache._impl.locator"
            ".get_cache_path())\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), XDG_CACHE_HOME=str(tmp_path / "xdg"))

    def located():
        done = subprocess.run([sys.executable, "-c", show], cwd=ROOT, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return Path(done.stdout.split()[-1]), done.stderr

    first, _ = located()
    assert first.parent == tmp_path / "numba"
    os.chown(first, NOBODY, -1)
    second, err = located()
    assert second.is_relative_to(tmp_path / "xdg") and f"{first}: it is owned by uid {NOBODY}" in err
    os.chown(second, NOBODY, -1)
    nowhere, err = located()
    assert str(nowhere) == "None" and err.count("RuntimeWarning") == 2


def test_the_kernels_are_linked_only_where_no_other_account_can_change_the_folder(tmp_path, monkeypatch):
    # The link reads and writes by path in a new folder: in a TMPDIR another account may write, it could put
    # its own folder in that one's place and hand the linker its object, and the library cached and run would
    # be its code. Such a TMPDIR gives way to the cache's folder, else to no link (the object, loaded unlinked).
    import tempfile

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    theirs.chmod(0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(theirs))
    cache = tmp_path / "cache"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache))
    assert _loader._link_folder() is None
    (cache / "agefast-kernels").mkdir(parents=True, mode=0o700)
    assert _loader._link_folder() == str(cache / "agefast-kernels")
    sticky = tmp_path / "sticky"        # as /tmp: nobody renames what is not theirs
    sticky.mkdir()
    sticky.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(sticky))
    assert _loader._link_folder() == str(sticky)
    # Named by the real path that was checked, never through a link: another account's link to the sticky
    # folder could point to its own by the time the linker runs (it had won 7 of 300 cold compiles).
    for folder, link in ((sticky, tmp_path / "tmp-link"), (cache, tmp_path / "cache-link")):
        link.symlink_to(folder)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp-link"))
    assert _loader._link_folder() == os.path.realpath(sticky)
    monkeypatch.setattr(tempfile, "tempdir", str(theirs))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache-link"))
    assert _loader._link_folder() == os.path.realpath(cache / "agefast-kernels")


def test_an_entry_for_instructions_this_cpu_lacks_is_a_miss(warm, monkeypatch):
    # Whatever settings reached the compile without reaching the key, what an entry says it was compiled for is
    # checked against /proc/cpuinfo before it runs: a build for AVX-512 had killed each process (SIGILL).
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(warm))
    record = entries(warm)[0]
    text = record.read_text()
    features = dict(line.split(" ", 1) for line in text.splitlines())["features"]
    # a CPU with all the entry's instructions but IFMA (which the entry itself may name, on a CPU that has it)
    without = ",".join(f for f in features.split(",") if f != "+avx512ifma")
    monkeypatch.setattr(_shipped, "host_flags", lambda: _shipped.llvm_flags(without) | {"a flag"})
    record.write_text(text.replace(features, without))
    assert _loader._entry(record.stem) is not None
    record.write_text(text.replace(features, without + ",+avx512ifma"))
    assert _loader._entry(record.stem) is None


@pytest.mark.parametrize("features, runs", [("+avx2,+bmi2,+sse4a,+clzero", True), ("+avx2,+avx512f", False),
                                            ("+avx2,-avx512f", True)])
def test_a_build_runs_here_where_the_cpu_has_every_class_instruction_set_it_may_use(monkeypatch, features, runs):
    monkeypatch.setattr(_shipped, "host_flags", lambda: _shipped.required_flags(AVX2))
    assert _shipped.runs_here(features) is runs
    monkeypatch.setattr(_shipped, "host_flags", frozenset)      # no /proc/cpuinfo: nothing to tell by
    assert _shipped.runs_here(features)


def test_a_compile_for_instructions_this_cpu_lacks_is_neither_run_nor_cached(monkeypatch):
    from agefast.kernels import _build

    stored = []
    monkeypatch.setattr(_build, "compile_object", lambda: (b"object", "x86-64-v4", "+avx2,+avx512f"))
    monkeypatch.setattr(_shipped, "host_flags", lambda: _shipped.required_flags(AVX2))
    monkeypatch.setattr(_cache, "store", lambda *args: stored.append(args))
    with pytest.raises(RuntimeError, match=r"compiled for x86-64-v4 \(\+avx2,\+avx512f\), whose instructions "
                                           "this CPU lacks"):
        _loader._compile("key")
    assert stored == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_compile_whose_code_dies_here_is_neither_run_nor_cached(monkeypatch):
    # A CPU name implies instructions no feature string lists: icelake-server with +avx2 emitted AVX-512, whose
    # SIGILL killed the process at its known-answer check, and every later one that loaded the entry.
    import signal

    from agefast.kernels import _build, _known_answer

    stored = []
    monkeypatch.setattr(_build, "compile_object", lambda: (b"object", "icelake-server", "+avx2"))
    monkeypatch.setattr(_build, "link_shared", lambda obj, folder: None)
    monkeypatch.setattr(_loader, "_loaded", lambda kind, data: object())
    # (SIGKILL for the SIGILL it stands for: a faulthandler, as pytest's, would print a dump of the child.)
    monkeypatch.setattr(_known_answer, "check", lambda functions, isa: os.kill(os.getpid(), signal.SIGKILL))
    monkeypatch.setattr(_shipped, "host_flags", lambda: _shipped.required_flags(AVX2))
    monkeypatch.setattr(_cache, "store", lambda *args: stored.append(args))
    with pytest.raises(RuntimeError, match="compiled for icelake-server die or answer wrongly on this CPU"):
        _loader._compile("key")
    assert stored == []
    # A wrong answer is refused too (it had been stored, and every later process failed its check); and so
    # where the program ignores SIGCHLD, which loses the child's exit status.

    def wrong(functions, isa):
        raise _known_answer.WrongAnswer("wrong")
    monkeypatch.setattr(_known_answer, "check", wrong)
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        with pytest.raises(RuntimeError, match="die or answer wrongly"):
            _loader._compile("key")
        monkeypatch.setattr(_known_answer, "check", lambda functions, isa: None)
        assert _loader._compile("key")[1] == "avx2" and len(stored) == 1
    finally:
        signal.signal(signal.SIGCHLD, previous)
