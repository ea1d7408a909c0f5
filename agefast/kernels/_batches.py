"""seal_chunks and open_chunks: a batch of chunks in buffers, split into ranges that threads take in turn.

The arguments are checked here; the compiled kernel never raises on them.
"""

from typing import TYPE_CHECKING, Any, NamedTuple

from ..io import cpus, lending
from . import _abi, _loader, _native
from ._pool import map_spans

if TYPE_CHECKING:
    import ctypes
    from collections.abc import Iterator

CHUNK_SIZE = _abi.CHUNK
TAG_SIZE = _abi.TAG
SEALED_CHUNK_SIZE = CHUNK_SIZE + TAG_SIZE


# The helpers below run once per call; a 64 KiB chunk seals in ~17 µs.

def _key(key: Any) -> bytes:
    """The 32-byte key as bytes, which ctypes passes to a voidptr argument as
    a pointer to its (immutable) data, without a copy."""
    if type(key) is bytes:
        data: bytes = key
    else:
        try:
            data = bytes(memoryview(key).cast("B"))
        except TypeError:
            raise TypeError("key must be a bytes-like object") from None
    if len(data) != 32:
        raise ValueError("key must be 32 bytes")
    return data


def key_buffer(key: Any) -> "ctypes.Array[ctypes.c_char]":
    """The key in memory of its own, for the file kernel's threads."""
    return _native.key_buffer(_key(key))


def _counter(counter: object, chunks: int = 1) -> int:
    """`counter`, where it and the batch's `chunks` after it are under 2**64: the kernels count in 64 bits, and
    past 2**64 a chunk's nonce would be an earlier chunk's (age's counter has 88 bits; no file gets there)."""
    if type(counter) is not int:
        raise TypeError("counter must be an int")
    if not 0 <= counter <= (1 << 64) - chunks:
        raise ValueError("counter out of range: a batch's chunks must be numbered below 2**64")
    return counter


def threads_for(threads: object, chunks: int) -> int:
    if threads is None:
        # One chunk runs on one thread: no need to ask for the CPUs (a system call).
        threads = cpus.count() if chunks > 1 else 1
    elif type(threads) is not int:      # an int itself skips the two isinstance calls (~30 ns a call)
        if not isinstance(threads, int) or isinstance(threads, bool):
            raise TypeError("threads must be an int or None")
    if threads < 1:
        raise ValueError("threads must be at least 1")
    return min(threads, chunks)


# A batch split over threads is cut into up to SPANS_PER_THREAD ranges a thread,
# of SPAN_MIN_CHUNKS chunks or more, taken in turn (_pool.map_spans): a thread
# that another process slows takes fewer, and a range's call, a few us of
# Python and ctypes, is next to nothing beside 32 chunks' ~0.8 ms of work.
SPANS_PER_THREAD = 8
SPAN_MIN_CHUNKS = 32


def _ranges(chunks: int, parts: int) -> "Iterator[tuple[int, int]]":
    """Split chunk indices 0..chunks into `parts` contiguous (start, stop) ranges."""
    step, extra = divmod(chunks, parts)
    start = 0
    for i in range(parts):
        stop = start + step + (i < extra)
        yield start, stop
        start = stop


class Nonces(NamedTuple):
    """RFC 8439's nonce and associated data in a batch's calls (_abi.BATCH_AEAD, agefast.kernels._rfc8439):
    each chunk's nonce is age's XOR `mask`, and each authenticates the `aad_size` bytes at address `aad`."""

    mask: bytes
    aad: int
    aad_size: int


def _checked(result: int) -> int:
    """A batch call's result; a negative one is the compiled wrapper's report of a failed call (_build)."""
    if result < 0:
        raise RuntimeError("the batch kernel failed")
    return result


def _run(mode: int, k: bytes, counter: int, s_at: int, n: int, dst: object, need: int, final: bool,
         threads: int | None, chunks: int, step_in: int, step_out: int, nonces: Nonces | None = None) -> int:
    """Run the batch over `chunks` chunks of the n bytes at address s_at into `dst`, lent here
    (`need` bytes or more), split into ranges for its threads, under age's nonces or `nonces`; bytes
    written (SEAL) or leading chunks verified (OPEN)."""
    try:
        d_at, m, d_hold = lending.lend(dst, writable=True)
    except BufferError:
        raise TypeError("dst must be a writable buffer") from None
    try:
        if m < need:
            raise ValueError(f"dst must hold at least {need} bytes")
        parts = threads_for(threads, chunks)
        if parts > 1:
            return _run_spans(mode, k, counter, s_at, n, d_at, m, final, parts, chunks, step_in, step_out, nonces)
        # No spans: the call itself, ~15 us for a 64 KiB chunk on AVX-512, is the cost. Here, not in
        # _run_spans, whose closure's cells (one per variable it shares) cost a call on one chunk 0.2 us.
        call = _native.batch_call(k, counter, s_at, n, d_at, m, final, mode)
        if nonces is not None:
            _native.set_nonce_mask_and_aad(call, *nonces)
        return _checked(_loader.functions().batch(call))
    finally:
        lending.release(d_hold)


def _run_spans(mode: int, k: bytes, counter: int, s_at: int, n: int, d_at: int, m: int, final: bool, parts: int,
               chunks: int, step_in: int, step_out: int, nonces: Nonces | None) -> int:
    """_run's batch split into ranges that `parts` threads take in turn (_pool.map_spans)."""
    batch = _loader.functions().batch

    def run(span: tuple[int, int]) -> int:
        a, b = span
        src_at, dst_at = a * step_in, a * step_out
        size = min(b * step_in, n) - src_at
        call = _native.batch_call(k, counter + a, s_at + src_at, size, d_at + dst_at, m - dst_at,
                                  final and b == chunks, mode)
        if nonces is not None:
            _native.set_nonce_mask_and_aad(call, *nonces)
        return _checked(batch(call))

    spans = list(_ranges(chunks, max(parts, min(parts * SPANS_PER_THREAD, chunks // SPAN_MIN_CHUNKS))))
    results = map_spans(run, spans, parts)
    if mode == _abi.SEAL:
        return sum(results)
    # the chunks before the first range that stopped short
    return next((a + r for r, (a, b) in zip(results, spans) if a + r < b), chunks)


def seal_chunks(key: Any, counter: int, src: object, dst: object, final: bool, threads: int | None = None) -> int:
    """Seal the plaintext in `src` as consecutive chunks into `dst`; returns bytes written.

    `src` must hold a whole number of chunks unless `final`. `threads=None`
    uses every CPU this process may run on.
    """
    k = _key(key)
    _counter(counter)
    final = bool(final)
    s_at, n, s_hold = lending.lend(src, writable=False)
    try:
        if not final and (n == 0 or n % CHUNK_SIZE):
            raise ValueError("a non-final batch must hold whole chunks")
        chunks = max(1, -(-n // CHUNK_SIZE))
        return _run(_abi.SEAL, k, _counter(counter, chunks), s_at, n, dst, n + chunks * TAG_SIZE, final, threads,
                    chunks, CHUNK_SIZE, SEALED_CHUNK_SIZE)
    finally:
        lending.release(s_hold)


def open_chunk(key: bytes, counter: int, sealed: bytes, final: bool) -> bytes | None:
    """One sealed chunk, chunk `counter` (final or not), opened into new bytes; None where it does not verify.

    What open_chunks does for one chunk, with nothing around the call but
    checks of types: random access opens a chunk at a time, and for one
    64 KiB chunk on AVX-512 open_chunks' lending, checks and thread choice
    cost ~1 us more (15.9 against 16.9 us, 2026-12-05, Zen 4).
    """
    if type(key) is not bytes or type(sealed) is not bytes:
        raise TypeError("key and sealed must be bytes")
    if len(key) != 32:
        raise ValueError("key must be 32 bytes")
    if not TAG_SIZE <= len(sealed) <= SEALED_CHUNK_SIZE:
        raise ValueError("a sealed chunk is a tag and at most CHUNK_SIZE bytes")
    plain, opened = _native.open_into_new_bytes(_loader.functions().batch, key, _counter(counter), sealed, bool(final))
    return plain if _checked(opened) == 1 else None


def open_chunks(key: Any, counter: int, src: object, dst: object, final: bool, threads: int | None = None) -> int:
    """Open consecutive sealed chunks from `src` into `dst`; returns how many leading chunks verified.

    Once this returns, `dst` holds verified plaintext and nothing else of what
    it opened. When the return value k is short of the number of chunks in
    `src`, chunk k failed and its part of `dst` holds zeros where the kernels
    are stitched (every x86 class: a chunk is decrypted while its tag is
    computed, and one that fails is overwritten before this returns), else
    was not written (two passes, as on Arm: verified first). With one thread
    nothing of `dst` after it was touched either;
    with several, the batch is cut into ranges, each verified and decrypted in
    one pass that stops at its first failure, so chunks after k (in other
    ranges) may hold their verified plaintext. Release only the first k.
    """
    k = _key(key)
    _counter(counter)
    final = bool(final)
    s_at, n, s_hold = lending.lend(src, writable=False)
    try:
        # A last chunk shorter than a tag is none: the kernels would write past the plaintext it leaves room for.
        if n < TAG_SIZE or (not final and n % SEALED_CHUNK_SIZE) or 0 < n % SEALED_CHUNK_SIZE < TAG_SIZE:
            raise ValueError("a batch must hold whole sealed chunks, and a last one of at least a tag")
        chunks = -(-n // SEALED_CHUNK_SIZE)
        return _run(_abi.OPEN, k, _counter(counter, chunks), s_at, n, dst, n - chunks * TAG_SIZE, final, threads,
                    chunks, SEALED_CHUNK_SIZE, CHUNK_SIZE)
    finally:
        lending.release(s_hold)
