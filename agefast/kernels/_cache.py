"""The on-disk cache of the compiled batch kernel (no numba here).

An entry is two files in the cache directory: `<key>.entry`, naming the
compiled file by its SHA-256 and recording what it was compiled for, and the
compiled file itself, `<sha256>.so` (a shared library) or `<sha256>.o` (an
object file, where no C compiler driver could link one). Both are written
into a file without a name (O_TMPFILE) and linked in when whole, so two
processes filling the cache at once each leave a whole entry and a kill
leaves nothing (where the system cannot make such a file, under a temporary
name renamed into place, which a kill leaves behind); the compiled file's
name is its checksum, so any pairing of the two files that a reader can meet is
consistent. A reader loads nothing whose bytes do not hash to the name: a
corrupt or truncated entry is a miss, compiled again and replaced.

The key covers everything the machine code depends on: the source of the
kernels and of the code that compiles them, the CPU (Numba's
NUMBA_CPU_NAME / NUMBA_CPU_FEATURES overrides, and the host's identity),
Numba's other settings (every NUMBA_ variable of the environment, and a
.numba_config.yaml) and agefast's AGEFAST_KERNEL_FORM, the
numba and llvmlite releases and the Python version. An edited kernel source
gets a new key, so an entry never goes stale.

Location, as for Numba's own cache of the kernels: NUMBA_CACHE_DIR if set,
else the user-wide cache ($XDG_CACHE_HOME or ~/.cache), never the package.

Trust: the cache holds machine code this process runs, so nothing in it may
come from another account (as OpenSSH treats ~/.ssh). Every folder agefast
creates is created 0700 and used only if it is owned by this process's
effective user and not writable by group or others; a folder that fails is
not used, with one warning, and the user-wide folder (or no cache) is used
instead. The folder is opened once and every entry is opened relative to that
descriptor, without following symbolic links, checked the same way with
fstat, and read from that one descriptor: the bytes hashed are the bytes
returned, and the caller loads those bytes, never the path again.
"""

import errno
import functools
import hashlib
import importlib.util
import os
import stat
import sys
import warnings
from collections.abc import Callable

from ..io.trust import path_refusal, refusal

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
_SOURCES = ("_common.py", "_chacha20.py", "_poly1305.py", "_next_key.py", "_chunk.py", "_aead.py", "_stitched.py",
            "_file_io.py", "_build.py", "_abi.py", "_shipped.py", os.path.join("..", "io", "pieces.py"))
# The environment that changes what is compiled: Numba's settings (its target, optimisation, vectorizers,
# ... : every NUMBA_ variable, _build_settings) and the form of the batch kernel (_common._form); and the
# file Numba reads its settings from, in the current folder where the process starts (with pyyaml installed).
_KERNEL_FORM = "AGEFAST_KERNEL_FORM"
_NUMBA_CONFIG_FILE = ".numba_config.yaml"


def _locations() -> list[tuple[str, tuple[str, ...]]]:
    """Where the cache may be, best first: (a folder the user chose, the folders agefast creates in it)."""
    user = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    private = (user, ("agefast", "kernels"))
    base = os.environ.get("NUMBA_CACHE_DIR")
    return [(base, ("agefast-kernels",)), private] if base else [private]


def directory() -> str:
    """The folder the cache is kept in where it passes the trust checks."""
    base, names = _locations()[0]
    return os.path.join(base, *names)


_warned: set[str] = set()


def warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(f"agefast: {message}", RuntimeWarning, stacklevel=3)


class _Untrusted(Exception):
    pass


_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _open_folder(base: str, names: tuple[str, ...]) -> int:
    """A descriptor of base/names..., each of `names` created 0700 where missing and checked.

    Raises _Untrusted (a folder that fails the checks) or OSError (one that
    cannot be created or opened).
    """
    os.makedirs(base, 0o700, exist_ok=True)
    folder = os.open(base, _FOLDER_FLAGS)
    path = base
    try:
        for name in names:
            path = os.path.join(path, name)
            try:
                os.mkdir(name, 0o700, dir_fd=folder)
            except FileExistsError:
                pass
            try:
                # O_NOFOLLOW: a symbolic link here could point anywhere, another account's folder included.
                inner = os.open(name, _FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=folder)
            except OSError as e:
                if e.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise _Untrusted(f"{path}: it is a symbolic link or not a folder") from None
                raise
            os.close(folder)
            folder = inner
            why = refusal(os.fstat(folder))
            if why:
                raise _Untrusted(f"{path}: {why}")
    except BaseException:
        os.close(folder)
        raise
    return folder


def _open_cache() -> int | None:
    """A descriptor of the first trusted cache folder, or None (compile in the process, store nothing)."""
    refused = []
    for base, names in _locations():
        try:
            folder = _open_folder(base, names)
        except _Untrusted as e:
            refused.append(str(e))
            continue
        except OSError:
            continue     # not creatable (a read-only home, say): as an unwritable cache always was, quietly
        if refused:
            warn_once(f"not using the kernel cache {'; '.join(refused)}; using {os.path.join(base, *names)}")
        return folder
    if refused:
        warn_once(f"not using the kernel cache {'; '.join(refused)}; compiling the kernels in this process")
    return None


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


def _build_settings() -> list[tuple[str, str | None]]:
    """Every NUMBA_ variable of the environment and AGEFAST_KERNEL_FORM, with their values (None: not set).

    All of Numba's: besides the CPU, the optimisation level and vectorisers, settings few would think of
    change the code (NUMBA_DEBUGINFO, NUMBA_LLVM_REFPRUNE_PASS: a build under either had been stored under
    the key of the default one, which every later process then ran). A set but empty one is Numba's ""
    (NUMBA_CPU_NAME= compiles for no CPU name), not unset.
    """
    names = sorted(name for name in os.environ if is_build_setting(name) and name != _KERNEL_FORM)
    return [(name, os.environ.get(name)) for name in [*names, _KERNEL_FORM]]


def is_build_setting(name: str) -> bool:
    """Whether the environment variable `name` may change the kernels' code (the key counts it): not
    NUMBA_CACHE_DIR, where the cache is, whose entries stay good wherever they are."""
    return (name.startswith("NUMBA_") and name != "NUMBA_CACHE_DIR") or name == _KERNEL_FORM


@functools.cache     # what it reads does not change while a process runs
def key() -> str:
    h = hashlib.sha256()
    h.update(b"agefast-kernels %d\n" % _FORMAT)
    for name in _SOURCES:
        with open(os.path.join(_HERE, name), "rb") as f:
            h.update(_sha256(f.read()))
    for name, value in _build_settings():
        h.update(f"{name}={value!r}\n".encode())
    try:
        with open(_NUMBA_CONFIG_FILE, "rb") as f:
            h.update(b"numba config file " + _sha256(f.read()))
    except OSError:
        pass
    h.update(_sha256(_host_cpu()))
    h.update(_sha256(_release("numba")))
    h.update(_sha256(_release("llvmlite")))
    h.update(f"{sys.version}\n{sys.implementation.cache_tag}\n".encode())
    return h.hexdigest()


# An entry's record: one "name value" line per field (json costs a process 2-4 ms to import).
_FIELDS = ("format", "kind", "sha256", "cpu", "features")


def _read(folder: int, name: str) -> bytes:
    """The bytes of the regular file `name` in `folder`, read through one descriptor checked by fstat.

    Raises OSError where it is missing, a symbolic link, not a regular file or not trusted (refusal).
    """
    # O_NONBLOCK: a FIFO put here must not hang the open; a regular file ignores it.
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or refusal(st):
            raise PermissionError(errno.EPERM, "not a trusted cache entry", name)
        with open(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def lookup(entry_key: str) -> tuple[str, bytes, dict[str, str]] | None:
    """(kind "so" or "o", the compiled bytes, record) of a verified entry, or None.

    The bytes are the ones that were hashed: load them, not the file again.
    """
    folder = _open_cache()
    if folder is None:
        return None
    try:
        meta = dict(line.split(" ", 1) for line in _read(folder, entry_key + ".entry").decode().splitlines())
        digest, kind = meta["sha256"], meta["kind"]
        if meta["format"] != str(_FORMAT) or kind not in ("so", "o") or set(meta) != set(_FIELDS):
            return None
        data = _read(folder, f"{digest}.{kind}")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(folder)
    if _sha256(data).hex() != digest:
        return None
    return kind, data, meta


def _write_atomically(folder: int, name: str, data: bytes) -> None:
    # As outputs are written (agefast.io.replace): into a file without a name
    # (O_TMPFILE) linked in when whole, so even SIGKILL leaves nothing behind;
    # else under a temporary name renamed into place, which a kill leaves.
    from agefast.io.replace import create_partial, unnamed_file

    with unnamed_file(folder) as unnamed:
        if unnamed is not None:
            with os.fdopen(unnamed.fd, "wb") as f:
                f.write(data)
            _link_over(folder, name, unnamed.link)
            return
    fd, temporary = create_partial("", name, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        os.unlink(temporary, dir_fd=folder)
        raise


def _link_over(folder: int, name: str, link: Callable[[str], None]) -> None:
    """link(name), an old file of that name removed first: never written through (a symbolic link goes, not its target)."""
    # WHY not a second name renamed over the old one, as outputs do: a kill
    # between the link and the rename would leave that name behind. A cache
    # may lack an entry for a moment (a reader compiles again), never hold a
    # partial one. A writer that takes the name between our unlink and link
    # placed a whole file of the same checksum or key, and keeps it.
    try:
        link(name)
        return
    except FileExistsError:
        pass
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        pass
    try:
        link(name)
    except FileExistsError:
        pass


def store(entry_key: str, kind: str, data: bytes, meta: dict[str, str]) -> None:
    """Write an entry (meta: "cpu" and "features", single lines). Raises OSError where there is no writable trusted cache."""
    folder = _open_cache()
    if folder is None:
        raise PermissionError(errno.EPERM, "no trusted kernel cache", directory())
    try:
        digest = _sha256(data).hex()
        _write_atomically(folder, f"{digest}.{kind}", data)
        record = dict(meta, format=_FORMAT, kind=kind, sha256=digest)
        text = "".join(f"{name} {record[name]}\n" for name in _FIELDS)
        _write_atomically(folder, entry_key + ".entry", text.encode())
    finally:
        os.close(folder)
