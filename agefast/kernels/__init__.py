"""Numba ChaCha20-Poly1305 engine for batches of age STREAM chunks.

`seal_chunks` and `open_chunks` have exactly the semantics of
agefast.chunks.seal_chunks / open_chunks (same nonces, same return values, a
chunk's plaintext reaches `dst` only after its tag verified, so `dst` only
ever holds verified plaintext), plus `threads`:
the chunks of a batch are split into contiguous ranges, one per thread, each
running the GIL-free kernel. This is the only package of agefast that imports
numba; agefast.chunks imports it lazily, for large batches only.
"""

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# With error highlighting on, numba initialises colorama, whose exit handler
# writes a colour reset to a terminal: a stray "\x1b[0m" after every agefast
# command that used the engine. The setting is read when numba is imported.
os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")

from . import _engine  # noqa: E402  (after the environment is set)

CHUNK_SIZE = _engine.CHUNK
TAG_SIZE = _engine.TAG
SEALED_CHUNK_SIZE = CHUNK_SIZE + TAG_SIZE

__all__ = ["seal_chunks", "open_chunks", "isa", "warm_up", "is_warm"]

_pool = None
_pool_lock = threading.Lock()
_warm = False


def _cpu_count() -> int:
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        return count() or 1
    return len(os.sched_getaffinity(0))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_cpu_count(), thread_name_prefix="agefast-kernel")
        return _pool


# The helpers below run once per call; a 64 KiB chunk seals in ~17 µs, so each
# takes the cheapest numpy route for the common argument types.

def _key(key) -> np.ndarray:
    if type(key) is not bytes:
        try:
            key = bytes(memoryview(key).cast("B"))
        except TypeError:
            raise TypeError("key must be a bytes-like object") from None
    if len(key) != 32:
        raise ValueError("key must be 32 bytes")
    return np.frombuffer(bytearray(key), np.uint8)


def _counter(counter) -> np.uint64:
    if type(counter) is not int:
        raise TypeError("counter must be an int")
    if not 0 <= counter < 1 << 64:
        raise ValueError("counter out of range")
    return np.uint64(counter)


def _bytes_view(obj, readonly: bool) -> memoryview:
    view = memoryview(obj)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view.toreadonly() if readonly else view


def _source(src) -> np.ndarray:
    # Always a read-only array, so the kernels are compiled for one source
    # type whether the caller passes bytes or a bytearray.
    return np.frombuffer(_bytes_view(src, True), np.uint8)


def _destination(dst, size: int) -> np.ndarray:
    view = _bytes_view(dst, False)
    if view.readonly:
        raise TypeError("dst must be a writable buffer")
    if len(view) < size:
        raise ValueError(f"dst must hold at least {size} bytes")
    return np.frombuffer(view, np.uint8)


def _threads(threads, chunks: int) -> int:
    if threads is None:
        threads = _cpu_count()
    if not isinstance(threads, int) or isinstance(threads, bool):
        raise TypeError("threads must be an int or None")
    if threads < 1:
        raise ValueError("threads must be at least 1")
    return min(threads, chunks)


def _ranges(chunks: int, parts: int):
    """Split chunk indices 0..chunks into `parts` contiguous (start, stop) ranges."""
    step, extra = divmod(chunks, parts)
    start = 0
    for i in range(parts):
        stop = start + step + (i < extra)
        yield start, stop
        start = stop


def seal_chunks(key, counter: int, src, dst, final: bool, threads: int | None = None) -> int:
    """Seal the plaintext in `src` as consecutive chunks into `dst`; returns bytes written.

    `src` must hold a whole number of chunks unless `final`. `threads=None`
    uses every CPU this process may run on.
    """
    k, ctr, s = _key(key), _counter(counter), _source(src)
    n = len(s)
    final = bool(final)
    if not final and (n == 0 or n % CHUNK_SIZE):
        raise ValueError("a non-final batch must hold whole chunks")
    chunks = max(1, -(-n // CHUNK_SIZE))
    d = _destination(dst, n + chunks * TAG_SIZE)
    parts = _threads(threads, chunks)
    if parts == 1:
        return _engine._batch(k, ctr, s, d, final, _engine.SEAL)

    def run(span):
        a, b = span
        return _engine._batch(k, ctr + np.uint64(a), s[a * CHUNK_SIZE:b * CHUNK_SIZE],
                              d[a * SEALED_CHUNK_SIZE:], final and b == chunks, _engine.SEAL)

    return sum(_executor().map(run, _ranges(chunks, parts)))


def open_chunks(key, counter: int, src, dst, final: bool, threads: int | None = None) -> int:
    """Open consecutive sealed chunks from `src` into `dst`; returns how many leading chunks verified.

    A chunk is decrypted into `dst` only after its tag verified, so `dst` only
    ever holds verified plaintext. When the return value k is short of the
    number of chunks in `src`, chunk k failed and its part of `dst` was not
    written. With one thread nothing of `dst` after it was touched either;
    with several, each thread verifies and decrypts its own range in one pass
    and stops at its first failure, so chunks after k (in other threads'
    ranges) may hold their verified plaintext. Release only the first k.
    """
    k, ctr, s = _key(key), _counter(counter), _source(src)
    n = len(s)
    final = bool(final)
    if n < TAG_SIZE or (not final and n % SEALED_CHUNK_SIZE):
        raise ValueError("a batch must hold whole sealed chunks")
    chunks = -(-n // SEALED_CHUNK_SIZE)
    d = _destination(dst, max(0, n - chunks * TAG_SIZE))
    parts = _threads(threads, chunks)
    if parts == 1:
        return _engine._batch(k, ctr, s, d, final, _engine.OPEN)

    def run(span):
        a, b = span
        return a + _engine._batch(k, ctr + np.uint64(a), s[a * SEALED_CHUNK_SIZE:b * SEALED_CHUNK_SIZE],
                                  d[a * CHUNK_SIZE:], final and b == chunks, _engine.OPEN)

    spans = list(_ranges(chunks, parts))
    reached = list(_executor().map(run, spans))
    return next((r for r, (_, b) in zip(reached, spans) if r < b), chunks)


def isa() -> str:
    """The widest vector instruction set the kernels are compiled for.

    "avx512ifma" (Poly1305 in radix 2^44 on vpmadd52luq/huq, ChaCha20 in zmm),
    "avx512f", "avx2" or "baseline".
    """
    if _engine.IFMA:
        return "avx512ifma"
    for name in ("avx512f", "avx2"):
        if name in _engine.FEATURES:
            return name
    return "baseline"


def warm_up() -> None:
    """Compile (or load from Numba's cache) every kernel the public functions use."""
    global _warm
    key = bytes(32)
    sealed = bytearray(SEALED_CHUNK_SIZE)
    seal_chunks(key, 0, bytes(CHUNK_SIZE), sealed, True, threads=1)
    open_chunks(key, 0, sealed, bytearray(CHUNK_SIZE), True, threads=1)
    _warm = True


def is_warm() -> bool:
    """Whether warm_up has run in this process, so calls cost no compile or load."""
    return _warm
