"""The on-disk cache of the compiled batch kernel (no numba here).

An entry is two files in the cache directory: `<key>.entry`, naming the
compiled file by its SHA-256 and recording what it was compiled for, and the
compiled file itself, `<sha256>.so` (a shared library) or `<sha256>.o` (an
object file, where no C compiler driver could link one). Both are written
under a temporary name and renamed into place, so two processes filling the
cache at once each leave a whole entry; the compiled file's name is its
checksum, so any pairing of the two files that a reader can meet is
consistent. A reader loads nothing whose bytes do not hash to the name: a
corrupt or truncated entry is a miss, compiled again and replaced.

The key covers everything the machine code depends on: the source of the
kernels and of the code that compiles them, the CPU (Numba's
NUMBA_CPU_NAME / NUMBA_CPU_FEATURES overrides, and the host's identity), the
numba and llvmlite releases and the Python version. An edited kernel source
gets a new key, so an entry never goes stale.

Location, as for Numba's own cache of the kernels: NUMBA_CACHE_DIR if set,
else the user-wide cache ($XDG_CACHE_HOME or ~/.cache), never the package.
"""

import functools
import hashlib
import importlib.util
import os
import sys

# SHA-256 from hashlib, not from cryptography: the command starts sealing a
# large file before it imports cryptography (agefast.cli.early_payload), and
# cryptography's hashes module costs a fresh process 11-17 ms, hashlib 3-5 ms
# (its OpenSSL binding, _hashlib), which that start needs anyway for the
# payload key.

_FORMAT = 1
_HERE = os.path.dirname(os.path.abspath(__file__))
# What the compiled code is made from: this package's kernel source and the
# code that compiles it (agefast.kernels.__init__ and _native only call it),
# and the rule for the size of the pieces the file kernel writes (io/pieces).
_SOURCES = ("_common.py", "_chacha20.py", "_poly1305.py", "_aead.py", "_file_io.py", "_build.py", "_abi.py",
            os.path.join("..", "io", "pieces.py"))
_NUMBA_SETTINGS = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_OPT", "NUMBA_ENABLE_AVX")


def directory() -> str:
    base = os.environ.get("NUMBA_CACHE_DIR")
    if base:
        return os.path.join(base, "agefast-kernels")
    user = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(user, "agefast", "kernels")


def _host_cpu() -> bytes:
    """The host CPU's identity and features, as the kernel reports them, without loading LLVM.

    Elsewhere than Linux, LLVM's own view (through llvmlite, ~40 ms).
    """
    try:
        with open("/proc/cpuinfo", "rb") as f:
            first = f.read(1 << 16).split(b"\n\n")[0]
    except OSError:
        first = b""
    wanted = (b"vendor_id", b"cpu family", b"model", b"model name", b"flags", b"CPU implementer",
              b"CPU architecture", b"CPU variant", b"CPU part", b"Features")
    lines = [line for line in first.splitlines() if line.split(b":")[0].strip() in wanted]
    if lines:
        return b"\n".join(lines)
    import llvmlite.binding as ll

    cpu: str = ll.get_host_cpu_name() + "\n" + ll.get_host_cpu_features().flatten()
    return cpu.encode()


def _release(package: str) -> bytes:
    """The version file of an installed package, read without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        return b""
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "_version.py"), "rb") as f:
            return f.read()
    except OSError:
        return b""


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@functools.cache     # what it reads does not change while a process runs
def key() -> str:
    h = hashlib.sha256()
    h.update(b"agefast-kernels %d\n" % _FORMAT)
    for name in _SOURCES:
        with open(os.path.join(_HERE, name), "rb") as f:
            h.update(_sha256(f.read()))
    for name in _NUMBA_SETTINGS:
        h.update(f"{name}={os.environ.get(name, '')}\n".encode())
    h.update(_sha256(_host_cpu()))
    h.update(_sha256(_release("numba")))
    h.update(_sha256(_release("llvmlite")))
    h.update(f"{sys.version}\n{sys.implementation.cache_tag}\n".encode())
    return h.hexdigest()


# An entry's record: one "name value" line per field (json costs a process 2-4 ms to import).
_FIELDS = ("format", "kind", "sha256", "cpu", "features")


def lookup(entry_key: str) -> tuple[str, str, bytes, dict[str, str]] | None:
    """(kind "so" or "o", path, bytes, record) of a verified entry, or None."""
    folder = directory()
    try:
        with open(os.path.join(folder, entry_key + ".entry"), encoding="utf-8") as f:
            meta = dict(line.rstrip("\n").split(" ", 1) for line in f)
        digest, kind = meta["sha256"], meta["kind"]
        if meta["format"] != str(_FORMAT) or kind not in ("so", "o") or set(meta) != set(_FIELDS):
            return None
        path = os.path.join(folder, f"{digest}.{kind}")
        with open(path, "rb") as f:
            data = f.read()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if _sha256(data).hex() != digest:
        return None
    return kind, path, data, meta


def _write_atomically(path: str, data: bytes) -> None:
    # As outputs are written (a signal just after the temporary file is
    # created does not leave it behind), and without importing tempfile.
    from agefast.io.replace import create_partial

    fd, temporary = create_partial(*os.path.split(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def store(entry_key: str, kind: str, data: bytes, meta: dict[str, str]) -> str:
    """Write an entry (meta: "cpu" and "features", single lines); returns the compiled file's path. Raises OSError where the cache is not writable."""
    folder = directory()
    os.makedirs(folder, exist_ok=True)
    digest = _sha256(data).hex()
    path = os.path.join(folder, f"{digest}.{kind}")
    _write_atomically(path, data)
    record = dict(meta, format=_FORMAT, kind=kind, sha256=digest)
    text = "".join(f"{name} {record[name]}\n" for name in _FIELDS)
    _write_atomically(os.path.join(folder, entry_key + ".entry"), text.encode())
    return path
