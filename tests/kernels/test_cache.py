"""The compiled-kernel cache, in fresh processes: warm loads without numba; cold, stale, corrupt, racing,
unwritable and compiler-less caches all end with correct output."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agefast.kernels import _cache

ROOT = Path(__file__).resolve().parents[2]
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
    full = dict(os.environ, NUMBA_CACHE_DIR=str(cache), **env)
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
    probe = ("import sys\nfrom agefast import kernels\nbefore = set(sys.modules)\n"
             "from agefast.kernels import _build\n"
             "print(*sorted(m for m in set(sys.modules) - before if m.startswith('agefast.')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    compiled = {f"{name.rsplit('.', 1)[1]}.py" for name in done.stdout.split()}
    assert {"_build.py", "_aead.py", "_file_io.py", "_chacha20.py", "_poly1305.py", "_common.py"} <= compiled
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


def test_an_unwritable_cache_still_runs(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_bytes(b"")
    assert probe(blocked)["numba"]


def test_the_key_covers_sources_cpu_settings_host_and_releases(monkeypatch, tmp_path):
    def fresh_key():
        _cache.key.cache_clear()
        return _cache.key()

    keys = [fresh_key()]
    monkeypatch.setenv("NUMBA_CPU_NAME", "haswell")
    keys.append(fresh_key())
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx2")
    keys.append(fresh_key())
    host = _cache._host_cpu()
    monkeypatch.setattr(_cache, "_host_cpu", lambda: host + b" other")
    keys.append(fresh_key())
    release = _cache._release
    monkeypatch.setattr(_cache, "_release", lambda name: release(name) + (b"#" if name == "numba" else b""))
    keys.append(fresh_key())
    monkeypatch.setattr(_cache, "_release", lambda name: release(name) + (b"#" if name == "llvmlite" else b""))
    keys.append(fresh_key())
    copy = tmp_path / "kernels"
    shutil.copytree(Path(_cache._HERE), copy)
    with open(copy / "_build.py", "a") as f:
        f.write("\n")
    monkeypatch.setattr(_cache, "_HERE", str(copy))
    keys.append(fresh_key())
    monkeypatch.undo()
    assert len(set(keys)) == len(keys)
    assert fresh_key() == keys[0]


def test_a_store_that_fails_half_way_leaves_no_temporary_file(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(_cache.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _cache.store("k", "so", b"compiled", {"cpu": "x", "features": "y"})
    assert os.listdir(tmp_path / "agefast-kernels") == []
