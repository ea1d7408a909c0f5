"""Loading the compiled kernels: from the cache in milliseconds, or compiled once per machine (seconds).

Numba compiles the kernels (_chacha20, _poly1305, _aead, _file_io) into C
functions (_build), kept in a cache (_cache); every later process loads them
and calls them through ctypes (_native) without importing numba or numpy.
NUMBA_DISABLE_JIT=1 runs the kernels' own Python instead (with numpy), for
tests. A job that would rather not wait for a compile starts one in the
background (compile_in_background) and runs on cryptography meanwhile;
kernels that cannot be loaded leave every job to cryptography (load_or_warn).

numba is an extra (agefast[jit]): a wheel's shipped builds need none of it.
Where none of them runs on this CPU and numba is not installed, there are
no kernels to load (Unavailable): every job runs on cryptography, as it
would without agefast's kernels, and only `agefast --warm-up` says why.
"""

import contextlib
import os
import threading
import warnings
from typing import Any

from . import _abi, _cache, _known_answer, _native, _shipped
from ..errors import EngineError
from ..io import portable, trust

_functions: _native.Functions | None = None     # the loaded C functions (_abi), once warm_up ran
_isa: str | None = None
_load_lock = threading.Lock()
_unloadable = False     # loading failed in this process: not tried again
_compiling: threading.Thread | None = None      # the background load, once started
_start_lock = threading.Lock()
_in_compile = False     # a compile is under way in this process, on some thread (one at a time: _load_lock)
_forked_mid_compile = False     # this process was forked while its parent compiled


class Unavailable(EngineError):
    """There are no kernels in this process, by how agefast is installed: no
    shipped build runs on this CPU, and numba, which would compile them, cannot
    be imported. The message says so; every job runs on cryptography."""


def _after_fork_in_child() -> None:
    # A forked child has only the thread that forked: a lock another thread
    # held stays held, and a background compile is gone. The loaded kernel is
    # plain memory and stays valid. Forked during a compile, Numba's state is
    # the parent's half way (its compiler lock held: a compile here waited
    # for ever): the child may load a build, never compile one.
    global _load_lock, _start_lock, _compiling, _forked_mid_compile
    _load_lock, _start_lock = threading.Lock(), threading.Lock()
    _compiling = None
    _forked_mid_compile = _forked_mid_compile or _in_compile


portable.after_fork_in_child(_after_fork_in_child)


def _isa_of(features: str) -> str:
    have = {f[1:] for f in features.split(",") if f.startswith("+")}
    if "avx512ifma" in have and "avx512f" in have:
        return "avx512ifma"
    for name in ("avx512f", "avx2", "neon"):
        if name in have:
            return name
    return "baseline"


def _jit_disabled() -> bool:
    """As Numba reads NUMBA_DISABLE_JIT (numba.core.config): an int, anything else its default, 0. "true" had
    sent agefast down the reference route while Numba compiled, and every large job failed."""
    try:
        return int(os.environ.get("NUMBA_DISABLE_JIT", "0")) != 0
    except ValueError:
        return False


def _reference() -> tuple[_native.Functions, str]:
    """NUMBA_DISABLE_JIT=1: the kernels' own Python (slow), called as the compiled functions are."""
    import numpy as np

    from . import _aead, _common, _file_io

    def array(address: int, size: int, dtype: Any = np.uint8) -> Any:
        if not size:
            return np.zeros(0, dtype)
        return np.ctypeslib.as_array(_native.at(address, size)).view(dtype)

    # The kernel modules are exempt from type checking (pyproject.toml): their kernels are Numba's.
    def batch(call: Any) -> int:
        key, counter, src, n, dst, m, final, mode = _native.batch_arguments(call)
        mask, aad, aad_size = _native.nonce_mask_and_aad(call)
        k = np.frombuffer(bytearray(key), np.uint8)
        result: int = _aead._batch(  # type: ignore[no-untyped-call]
            k, np.frombuffer(bytearray(mask), np.uint8), array(aad, aad_size), np.uint64(counter), array(src, n),
            array(dst, m), final != 0, mode, _aead._scratch())  # type: ignore[no-untyped-call]
        return result

    def file_batches(key: Any, mode: int, src_fd: int, src_at: int, dst_fd: int, dst_at: int, first: int,
                     stride: int, batches: int, src: int, dst: int, scratch: object, stop: int, lock: int) -> int:
        k = np.frombuffer(bytearray(key.raw), np.uint8)
        arrays = _aead._scratch()  # type: ignore[no-untyped-call]
        result: int = _file_io._file_batches(  # type: ignore[no-untyped-call]
            k, mode, src_fd, src_at, dst_fd, dst_at, first, stride, batches, array(src, _abi.FILE_BUFFER_SIZE),
            array(dst, _abi.FILE_BUFFER_SIZE), arrays, array(stop, 8, np.int64), lock)
        return result

    return _native.Functions(batch, file_batches), _isa_of(",".join("+" + f for f in _common.FEATURES))


def _without_jit(e: ImportError) -> Unavailable:
    shipped = _shipped.verified()
    why = shipped if isinstance(shipped, str) else "the loader refused the shipped build"
    return Unavailable(f"no kernel build shipped with agefast runs here ({why}), and numba and llvmlite, which "
                       f"would compile one, cannot be imported ({e}; pip install 'agefast[jit]' adds them)")


def _compile(key: str) -> tuple[_native.Functions, str]:
    """Numba's cold compile (seconds); stores the result in the cache where it can."""
    import tempfile

    try:
        from . import _build
    except ImportError as e:
        raise _without_jit(e) from None

    why = _build.refusal()
    if why is not None:
        raise RuntimeError(f"the kernels cannot be compiled here: {why}")
    obj, cpu, features = _build.compile_object()  # type: ignore[no-untyped-call]  # exempt, as the kernel modules
    if not _shipped.runs_here(features):
        # Asked for by NUMBA_CPU_NAME / NUMBA_CPU_FEATURES, or by a .numba_config.yaml in the current folder:
        # neither run here nor cached, where a later process would load it.
        raise RuntimeError(f"the kernels were compiled for {cpu} ({features}), whose instructions this CPU lacks")
    meta = {"cpu": cpu, "features": features}
    kind, data = "o", obj      # the object itself, loaded by llvmlite, where it cannot be linked here
    folder = _link_folder()
    if folder is not None:
        with tempfile.TemporaryDirectory(prefix="agefast-kernels-", dir=folder) as scratch_dir:
            shared = _build.link_shared(obj, scratch_dir)
            if shared is not None:
                with open(shared, "rb") as f:
                    kind, data = "so", f.read()
    functions, isa = _loaded(kind, data), _isa_of(features)
    _survives_here(functions, isa, cpu)
    try:
        _cache.store(key, kind, data, meta)
    except OSError as e:
        # An unwritable or untrusted cache: this process runs what it compiled, the next compiles again.
        _cache.warn_once(f"the compiled kernels could not be kept ({e}): every process compiles them again")
    return functions, isa


def _survives_here(functions: _native.Functions, isa: str, cpu: str) -> None:
    """RuntimeError where a fresh build dies running here, or answers wrongly: its known-answer check first runs
    in a forked child.

    A CPU name implies instructions no feature string lists (NUMBA_CPU_NAME=icelake-server with
    NUMBA_CPU_FEATURES=+avx2 emits AVX-512), and code for one this CPU lacks dies of SIGILL, which no check
    in this process survives; stored, it would kill every later process too. The child says it passed through
    a pipe (its exit status is lost where SIGCHLD is ignored or reaped by the program). Where there is no
    fork, the check in warm_up is all."""
    if not hasattr(os, "fork"):
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:    # the child: the check, then out at once, nothing of the parent's run or flushed
        try:
            os.close(read_end)
            _known_answer.check(functions, isa)
            os.write(write_end, b"passed")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        with open(read_end, "rb") as said:
            passed = said.read() == b"passed"
    finally:
        with contextlib.suppress(ChildProcessError):   # reaped already, where SIGCHLD is ignored
            os.waitpid(pid, 0)
    if not passed:
        raise RuntimeError(f"the kernels compiled for {cpu} die or answer wrongly on this CPU (instructions it "
                           "lacks?): neither run nor kept")


def _compiling_here(key: str) -> tuple[_native.Functions, str]:
    global _in_compile
    _in_compile = True      # what a child forked meanwhile finds
    try:
        return _compile(key)
    finally:
        _in_compile = False


def _link_folder() -> str | None:
    """Where to link the kernels: the temporary folder, else the cache's, where no other account can rename or
    replace what lies there; else None (the object is loaded as it is, unlinked).

    The link reads the object and writes the library by path, in a new 0700
    folder. In a TMPDIR another account may write (and not sticky), it could
    rename that folder and put its own in its place, and hand the linker its
    object: the library cached and run would be its code. The folder is
    named by the real path that was checked: a link on the way (TMPDIR=
    /tmp/x, x a link of another account's) could point elsewhere by the time
    the link runs.
    """
    import tempfile

    folder = os.path.realpath(tempfile.gettempdir())
    if trust.above_refusal(folder) is None:
        return folder
    folder = os.path.realpath(_cache.directory())
    if os.path.isdir(folder) and trust.path_refusal(folder) is None:
        return folder
    return None


def _loaded(kind: str, data: bytes) -> _native.Functions:
    return _native.load_library(data) if kind == "so" else _native.load_object(data)


def _entry(key: str) -> tuple[str, bytes, dict[str, str]] | None:
    """The cache's verified entry for `key`, if this CPU runs it: one compiled for what it lacks (where the
    settings of the compile were not all in the key) would kill the process with SIGILL."""
    entry = _cache.lookup(key)
    return entry if entry is not None and _shipped.runs_here(entry[2]["features"]) else None


def _load() -> tuple[_native.Functions, str]:
    if _jit_disabled():
        return _reference()
    shipped = _shipped.load()
    if not isinstance(shipped, str):
        functions, features = shipped
        return functions, _isa_of(features)
    try:
        key = _cache.key()
    except ImportError as e:    # no /proc/cpuinfo, and no llvmlite to name the CPU by
        raise _without_jit(e) from None
    entry = _entry(key)
    if entry is None:
        if _forked_mid_compile:
            raise Unavailable("this process was forked while its parent compiled the kernels, whose compiler "
                              "is not whole here; they were not in the cache yet")
        return _compiling_here(key)
    kind, data, meta = entry
    return _loaded(kind, data), _isa_of(meta["features"])


def warm_up() -> None:
    """Load the compiled kernels (from the cache: milliseconds; the first time on a machine, compile: seconds).

    Raises Unavailable where there are none to load or compile here.
    """
    global _functions, _isa
    if _functions is None:
        with _load_lock:
            if _functions is None:
                functions, isa = _load()
                if not _jit_disabled():     # the reference route is what the builds are checked by
                    _known_answer.check(functions, isa)
                _functions, _isa = functions, isa


def is_warm() -> bool:
    """Whether the kernels are loaded in this process, so calls cost no compile or load."""
    return _functions is not None


def cached() -> bool:
    """Whether warm_up would load the kernels (shipped or cached: milliseconds) rather than compile them."""
    if _functions is not None or _jit_disabled() or not isinstance(_shipped.verified(), str):
        return True
    try:
        key = _cache.key()
    except ImportError:     # no /proc/cpuinfo and no llvmlite to name this CPU: no entry can be known to be its
        return False
    return _entry(key) is not None


def isa() -> str:
    """The widest vector instruction set the kernels are compiled for.

    "avx512ifma" (Poly1305 in radix 2^44 on vpmadd52luq/huq, ChaCha20 in zmm),
    "avx512f", "avx2", "neon" (64-bit Arm's Advanced SIMD) or "baseline".
    """
    warm_up()
    return _isa  # type: ignore[return-value]  # set by warm_up


def functions() -> _native.Functions:
    """The loaded C functions, loaded first where need be."""
    if _functions is None:      # checked here too: every batch call asks, and a call of warm_up is ~0.05 us
        warm_up()
    return _functions  # type: ignore[return-value]  # set by warm_up


def load_or_warn() -> bool:
    """warm_up(); False where the kernels cannot be loaded in this process (say,
    a cache on a noexec mount): warned once, not tried again, and the job
    stays on cryptography. False, unwarned, under NUMBA_DISABLE_JIT, where they
    would run as Python."""
    global _unloadable
    if _unloadable:
        return False
    if _jit_disabled() and _functions is None:
        # The kernels' own Python, hundreds of times slower than cryptography: for tests of the kernels, which
        # call them or warm_up (AGEFAST_ENGINE=numba), not for a job of someone who debugs their own Numba code.
        _unloadable = True
        return False
    try:
        warm_up()
        return True
    except Unavailable:
        _unloadable = True      # as installed, not a failure: nothing to warn about
        return False
    except Exception as e:
        _unloadable = True
        warnings.warn(f"agefast: the Numba engine could not be loaded, staying on cryptography: {e}",
                      RuntimeWarning)
        return False


def compile_in_background() -> None:
    """Load the kernels (compiling them if the cache is cold) in a thread of their own, once per process."""
    global _compiling
    with _start_lock:
        if _compiling is None and not _unloadable and _functions is None:
            _compiling = threading.Thread(target=load_or_warn, name="agefast-engine-load", daemon=True)
            _compiling.start()
