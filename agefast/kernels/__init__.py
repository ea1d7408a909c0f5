"""Numba ChaCha20-Poly1305 engine for batches of age STREAM chunks.

`seal_file` and `open_file` seal or open whole batches of one file into
another with pread and pwrite, on worker threads that need no GIL until
they end.

`seal_chunks` and `open_chunks` have exactly the semantics of
agefast.chunks.seal_chunks / open_chunks (same nonces, same return values, a
chunk's plaintext reaches `dst` only after its tag verified, so `dst` only
ever holds verified plaintext), plus `threads`:
the chunks of a batch are split into contiguous ranges, one per thread, each
running the GIL-free kernel.

Numba compiles the kernels (_engine) into C functions (_build): when the
package is built, for the CPU classes it ships (_shipped), and otherwise
once per machine, kept in a cache (_cache); a process loads the shipped
build its CPU runs, else the cached one, in milliseconds and calls it
through ctypes (_native) without importing numba or numpy. This is the
only package of agefast that imports numba, and only to compile.
NUMBA_DISABLE_JIT=1 runs the kernels' own Python instead (with numpy), for
tests.
"""

import errno
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from .. import _cpus
from . import _abi, _cache, _native, _shipped

if TYPE_CHECKING:
    import ctypes
    import queue

# With error highlighting on, numba initialises colorama, whose exit handler
# writes a colour reset to a terminal: a stray "\x1b[0m" after every agefast
# command that compiled the kernels. The setting is read when numba is
# imported (by _build or _engine, both submodules: this runs first).
os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")

CHUNK_SIZE = _abi.CHUNK
TAG_SIZE = _abi.TAG
SEALED_CHUNK_SIZE = CHUNK_SIZE + TAG_SIZE
FILE_BATCH = _abi.FILE_BATCH     # chunks in a batch of seal_file and open_file
_U64 = (1 << 64) - 1

__all__ = ["seal_chunks", "open_chunks", "seal_file", "open_file", "FileBatches", "WriteError", "isa", "warm_up", "is_warm", "cached"]

_functions: _native.Functions | None = None     # the loaded C functions (_abi), once warm_up ran
_isa: str | None = None
_load_lock = threading.Lock()
# A task: (function, its argument, the results list, the index of its result, the lock released when done).
_Task = tuple[Callable[[Any], Any], Any, list[Any], int, threading.Lock]
_tasks: "queue.SimpleQueue[_Task] | None" = None     # the worker threads' queue, once started
_workers = 0
_pool_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # A forked child has only the thread that forked: the pool's workers are
    # gone (a task sent to them would wait forever) and a lock another thread
    # held stays held. The loaded kernel is plain memory and stays valid.
    global _tasks, _workers, _pool_lock, _load_lock
    _tasks, _workers = None, 0
    _pool_lock = threading.Lock()
    _load_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _work(tasks: "queue.SimpleQueue[_Task]") -> None:
    while True:
        function, span, results, i, done = tasks.get()
        try:
            results[i] = function(span)
        except BaseException as e:
            results[i] = e
        finally:
            done.release()


_Span = TypeVar("_Span")
_Result = TypeVar("_Result")


def _map(function: Callable[[_Span], _Result], spans: list[_Span]) -> list[_Result]:
    """[function(span) for span in spans], in parallel: the first on this thread, the others on workers.

    The workers are daemon threads started on first need and kept (a small
    pool of our own: concurrent.futures costs a process ~5 ms to import).
    """
    global _tasks, _workers
    with _pool_lock:
        if _tasks is None:
            import queue

            _tasks = queue.SimpleQueue()
        while _workers < len(spans) - 1:
            threading.Thread(target=_work, args=(_tasks,), name="agefast-kernel", daemon=True).start()
            _workers += 1
        tasks = _tasks
    results: list[Any] = [None] * len(spans)
    waits: list[threading.Lock] = []
    for i in range(1, len(spans)):
        done = threading.Lock()
        done.acquire()
        tasks.put((function, spans[i], results, i, done))
        waits.append(done)
    try:
        results[0] = function(spans[0])
    finally:
        for done in waits:
            done.acquire()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def _isa_of(features: str) -> str:
    have = {f[1:] for f in features.split(",") if f.startswith("+")}
    if "avx512ifma" in have and "avx512f" in have:
        return "avx512ifma"
    for name in ("avx512f", "avx2"):
        if name in have:
            return name
    return "baseline"


def _jit_disabled() -> bool:
    return os.environ.get("NUMBA_DISABLE_JIT", "0").strip() not in ("", "0")


def _reference() -> tuple[_native.Functions, str]:
    """NUMBA_DISABLE_JIT=1: the kernels' own Python (slow), called as the compiled functions are."""
    import numpy as np

    from . import _engine

    def array(address: int, size: int, dtype: Any = np.uint8) -> Any:
        if not size:
            return np.zeros(0, dtype)
        return np.ctypeslib.as_array(_native.at(address, size)).view(dtype)

    # _engine is exempt from type checking (pyproject.toml): its kernels are Numba's.
    def batch(key: Any, counter: int, src: int, n: int, dst: int, m: int, final: bool, mode: int,
              scratch: object) -> int:
        k = np.frombuffer(bytearray(key.raw), np.uint8)
        result: int = _engine._batch(  # type: ignore[no-untyped-call]
            k, np.uint64(counter), array(src, n), array(dst, m), final != 0, mode,
            _engine._scratch())  # type: ignore[no-untyped-call]
        return result

    def file_batches(key: Any, mode: int, src_fd: int, src_at: int, dst_fd: int, dst_at: int, first: int,
                     stride: int, batches: int, src: int, dst: int, scratch: object, stop: int, lock: int) -> int:
        k = np.frombuffer(bytearray(key.raw), np.uint8)
        arrays = _engine._scratch()  # type: ignore[no-untyped-call]
        result: int = _engine._file_batches(  # type: ignore[no-untyped-call]
            k, mode, src_fd, src_at, dst_fd, dst_at, first, stride, batches, array(src, _abi.FILE_BUFFER_SIZE),
            array(dst, _abi.FILE_BUFFER_SIZE), arrays, array(stop, 8, np.int64), lock)
        return result

    return _native.Functions(batch, file_batches), _isa_of(",".join("+" + f for f in _engine.FEATURES))


def _compile(key: str) -> tuple[_native.Functions, str]:
    """Numba's cold compile (seconds); stores the result in the cache where it can."""
    import tempfile

    from . import _build

    obj, cpu, features = _build.compile_object()  # type: ignore[no-untyped-call]  # exempt, as _engine
    meta = {"cpu": cpu, "features": features}
    with tempfile.TemporaryDirectory(prefix="agefast-kernels-") as scratch_dir:
        shared = _build.link_shared(obj, scratch_dir)
        if shared is None:
            kind, data = "o", obj
        else:
            kind = "so"
            with open(shared, "rb") as f:
                data = f.read()
    try:
        _cache.store(key, kind, data, meta)
    except OSError:
        pass    # an unwritable or untrusted cache: this process runs what it compiled, the next compiles again
    return _loaded(kind, data), _isa_of(features)


def _loaded(kind: str, data: bytes) -> _native.Functions:
    return _native.load_library(data) if kind == "so" else _native.load_object(data)


def _load() -> tuple[_native.Functions, str]:
    if _jit_disabled():
        return _reference()
    shipped = _shipped.load()
    if shipped is not None:
        functions, features = shipped
        return functions, _isa_of(features)
    key = _cache.key()
    entry = _cache.lookup(key)
    if entry is None:
        return _compile(key)
    kind, data, meta = entry
    return _loaded(kind, data), _isa_of(meta["features"])


def warm_up() -> None:
    """Load the compiled kernels (from the cache: milliseconds; the first time on a machine, compile: seconds)."""
    global _functions, _isa
    if _functions is None:
        with _load_lock:
            if _functions is None:
                functions, _isa = _load()
                _functions = functions


def is_warm() -> bool:
    """Whether the kernels are loaded in this process, so calls cost no compile or load."""
    return _functions is not None


def cached() -> bool:
    """Whether warm_up would load the kernels (shipped or cached: milliseconds) rather than compile them."""
    return (_functions is not None or _jit_disabled() or _shipped.verified() is not None
            or _cache.lookup(_cache.key()) is not None)


def isa() -> str:
    """The widest vector instruction set the kernels are compiled for.

    "avx512ifma" (Poly1305 in radix 2^44 on vpmadd52luq/huq, ChaCha20 in zmm),
    "avx512f", "avx2" or "baseline".
    """
    warm_up()
    return _isa  # type: ignore[return-value]  # set by warm_up


# The helpers below run once per call; a 64 KiB chunk seals in ~17 µs.

def _key(key: Any) -> "ctypes.Array[ctypes.c_char]":
    if type(key) is not bytes:
        try:
            key = bytes(memoryview(key).cast("B"))
        except TypeError:
            raise TypeError("key must be a bytes-like object") from None
    if len(key) != 32:
        raise ValueError("key must be 32 bytes")
    return _native.key_buffer(key)


def _counter(counter: object) -> int:
    if type(counter) is not int:
        raise TypeError("counter must be an int")
    if not 0 <= counter < 1 << 64:
        raise ValueError("counter out of range")
    return counter


def _threads(threads: object, chunks: int) -> int:
    if threads is None:
        threads = _cpus.count()
    if not isinstance(threads, int) or isinstance(threads, bool):
        raise TypeError("threads must be an int or None")
    if threads < 1:
        raise ValueError("threads must be at least 1")
    return min(threads, chunks)


def _ranges(chunks: int, parts: int) -> Iterator[tuple[int, int]]:
    """Split chunk indices 0..chunks into `parts` contiguous (start, stop) ranges."""
    step, extra = divmod(chunks, parts)
    start = 0
    for i in range(parts):
        stop = start + step + (i < extra)
        yield start, stop
        start = stop


def _lend_source(src: object) -> _native.Lent:
    return _native.Lent(src, writable=False)


def _lend_destination(dst: object, size: int) -> _native.Lent:
    try:
        lent = _native.Lent(dst, writable=True)
    except BufferError:
        raise TypeError("dst must be a writable buffer") from None
    if lent.size < size:
        lent.release()
        raise ValueError(f"dst must hold at least {size} bytes")
    return lent


def _run(mode: int, k: "ctypes.Array[ctypes.c_char]", counter: int, s: _native.Lent, d: _native.Lent,
         final: bool, threads: int | None, chunks: int, step_in: int, step_out: int) -> list[int]:
    """Run the batch over `chunks` chunks of s into d, split into per-thread ranges; the per-range results."""
    parts = _threads(threads, chunks)
    warm_up()
    batch = _functions.batch  # type: ignore[union-attr]  # set by warm_up

    def run(span: tuple[int, int]) -> int:
        a, b = span
        src_at, dst_at = a * step_in, a * step_out
        size = min(b * step_in, s.size) - src_at
        result = batch(k, (counter + a) & _U64, s.address + src_at, size, d.address + dst_at, d.size - dst_at,
                       final and b == chunks, mode, _native.scratch())
        if result < 0:      # the compiled wrapper's report of a failed call (_build)
            raise RuntimeError("the batch kernel failed")
        return result

    if parts == 1:
        return [run((0, chunks))]
    return _map(run, list(_ranges(chunks, parts)))


def seal_chunks(key: Any, counter: int, src: object, dst: object, final: bool, threads: int | None = None) -> int:
    """Seal the plaintext in `src` as consecutive chunks into `dst`; returns bytes written.

    `src` must hold a whole number of chunks unless `final`. `threads=None`
    uses every CPU this process may run on.
    """
    k, ctr = _key(key), _counter(counter)
    final = bool(final)
    s = _lend_source(src)
    try:
        n = s.size
        if not final and (n == 0 or n % CHUNK_SIZE):
            raise ValueError("a non-final batch must hold whole chunks")
        chunks = max(1, -(-n // CHUNK_SIZE))
        d = _lend_destination(dst, n + chunks * TAG_SIZE)
        try:
            return sum(_run(_abi.SEAL, k, ctr, s, d, final, threads, chunks, CHUNK_SIZE, SEALED_CHUNK_SIZE))
        finally:
            d.release()
    finally:
        s.release()


def open_chunks(key: Any, counter: int, src: object, dst: object, final: bool, threads: int | None = None) -> int:
    """Open consecutive sealed chunks from `src` into `dst`; returns how many leading chunks verified.

    A chunk is decrypted into `dst` only after its tag verified, so `dst` only
    ever holds verified plaintext. When the return value k is short of the
    number of chunks in `src`, chunk k failed and its part of `dst` was not
    written. With one thread nothing of `dst` after it was touched either;
    with several, each thread verifies and decrypts its own range in one pass
    and stops at its first failure, so chunks after k (in other threads'
    ranges) may hold their verified plaintext. Release only the first k.
    """
    k, ctr = _key(key), _counter(counter)
    final = bool(final)
    s = _lend_source(src)
    try:
        n = s.size
        if n < TAG_SIZE or (not final and n % SEALED_CHUNK_SIZE):
            raise ValueError("a batch must hold whole sealed chunks")
        chunks = -(-n // SEALED_CHUNK_SIZE)
        d = _lend_destination(dst, max(0, n - chunks * TAG_SIZE))
        try:
            reached = _run(_abi.OPEN, k, ctr, s, d, final, threads, chunks, SEALED_CHUNK_SIZE, CHUNK_SIZE)
        finally:
            d.release()
    finally:
        s.release()
    spans = list(_ranges(chunks, len(reached)))
    return next((a + r for r, (a, b) in zip(reached, spans) if a + r < b), chunks)


class WriteError(OSError):
    """A write of the output file failed (FileBatches.wait): its errno says why."""


class FileBatches:
    """Whole batches of one file being sealed or opened into another on worker threads (seal_file, open_file)."""

    def __init__(self, mode: int, key: "ctypes.Array[ctypes.c_char]", src_fd: int, src_at: int, dst_fd: int,
                 dst_at: int, batches: int, workers: int) -> None:
        self._batches = batches
        self._stop = _native.Flag()
        self._lock = _native.Mutex()
        # Each worker's (result, errno), or what it raised instead: until it ends, an error.
        self._results: list[tuple[int, int] | BaseException] = [RuntimeError("a file worker did not end")] * workers
        self._threads = [threading.Thread(target=self._work, name="agefast-file-batches", daemon=True,
                                          args=(i, key, mode, src_fd, src_at, dst_fd, dst_at, i, workers, batches))
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def _work(self, i: int, *args: Any) -> None:
        try:
            src, dst = _native.page_aligned(_abi.FILE_BUFFER_SIZE), _native.page_aligned(_abi.FILE_BUFFER_SIZE)
            try:
                _native.clear_errno()
                file_batches = _functions.file_batches  # type: ignore[union-attr]  # loaded before the threads start
                result = file_batches(*args, src.address, dst.address, _native.scratch(), self._stop.address,
                                      self._lock.address)
                self._results[i] = (result, _native.last_errno())
            finally:
                src.release()
                dst.release()
        except BaseException as e:     # raised by wait(), in the caller's thread
            self._results[i] = e

    def stop(self) -> None:
        """End the work after the batches under way; returns once no worker reads or writes."""
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _endings(self) -> "list[tuple[int, int, int] | BaseException]":
        """Each worker's (batch it ended at, why, errno) by _abi's file_batches
        results (batches for every batch done), or what it raised instead."""
        endings: "list[tuple[int, int, int] | BaseException]" = []
        for outcome in self._results:
            if isinstance(outcome, BaseException):
                endings.append(outcome)
                continue
            result, code = outcome
            if result < 0:      # the compiled wrapper's report of a failed call (_build)
                endings.append(RuntimeError("the file kernel failed"))
            elif result == _abi.FILE_DONE:
                endings.append((self._batches, _abi.FILE_DONE, 0))
            else:
                batch, why = divmod(result - _abi.ENDED_AT, _abi.ENDINGS)
                endings.append((batch, why, code))
        return endings

    def wait(self) -> int | None:
        """Return once every batch is done: None, or the first batch that did not
        verify (open_file; every batch before it was opened and written).

        Raises OSError for a failed read, WriteError for a failed write,
        EOFError where the input ended before its last batch (the file shrank
        while it was read).
        """
        for thread in self._threads:
            thread.join()
        failed = None
        for ending in self._endings():
            if isinstance(ending, BaseException):
                raise ending
            batch, why, code = ending
            if why in (_abi.READ_FAILED, _abi.WRITE_FAILED):
                code = code or errno.EIO   # a write that moved nothing set no errno
                raise (WriteError if why == _abi.WRITE_FAILED else OSError)(code, os.strerror(code))
            if why == _abi.INPUT_ENDED:
                raise EOFError("the input ended before its last batch")
            if why == _abi.NOT_VERIFIED:
                # Each worker went through its batches in order up to its
                # first failure, so every batch below the least one verified.
                failed = batch if failed is None else min(failed, batch)
            elif why == _abi.STOPPED:
                raise RuntimeError("the file batches were stopped")
        return failed

    def written(self) -> int:
        """How many leading batches are written whole, once the workers ended
        (after wait() or stop()), however they ended.

        Each worker writes its batches in order, and ends at a batch before
        which all of its own are written; one that raised instead is known to
        have written none from its first. Every batch below the least of
        those was written.
        """
        return min([self._batches, *(first if isinstance(ending, BaseException) else ending[0]
                                     for first, ending in enumerate(self._endings()))])


def _file_batches(mode: int, key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
                  threads: int | None) -> FileBatches:
    k = _key(key)
    for name, value in (("src_fd", src_fd), ("src_at", src_at), ("dst_fd", dst_fd), ("dst_at", dst_at),
                        ("batches", batches)):
        if type(value) is not int:
            raise TypeError(f"{name} must be an int")
        if value < 0:
            raise ValueError(f"{name} must not be negative")
    workers = _threads(threads, max(1, batches))
    warm_up()
    return FileBatches(mode, k, src_fd, src_at, dst_fd, dst_at, batches, workers)


def seal_file(key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
              threads: int | None = None) -> FileBatches:
    """Start sealing `batches` batches of FILE_BATCH full chunks, none final, counters from 0.

    Batch b is read from `src_fd` at src_at + b * FILE_BATCH * CHUNK_SIZE and
    written to `dst_fd` at dst_at + b * FILE_BATCH * SEALED_CHUNK_SIZE, with
    pread and pwrite from compiled code on `threads` worker threads (None:
    every CPU), none of which needs the GIL until it ends: the caller's
    thread runs on meanwhile. Returns at once; the caller must wait() or
    stop() before it closes either file.
    """
    return _file_batches(_abi.SEAL, key, src_fd, src_at, dst_fd, dst_at, batches, threads)


def open_file(key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
              threads: int | None = None) -> FileBatches:
    """Start opening `batches` batches of FILE_BATCH sealed chunks, none final, counters from 0.

    As seal_file, the other way: batch b is read at src_at + b * FILE_BATCH *
    SEALED_CHUNK_SIZE and written at dst_at + b * FILE_BATCH * CHUNK_SIZE,
    only once every chunk of it verified. A worker ends at its first batch
    that does not verify; wait() returns the least such batch. Batches after
    it (other workers') may have been written: verified plaintext, but not to
    be released (agefast._file_batches cuts the output back to written()).
    """
    return _file_batches(_abi.OPEN, key, src_fd, src_at, dst_fd, dst_at, batches, threads)
