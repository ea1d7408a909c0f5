"""The STREAM payload: 64 KiB ChaCha20-Poly1305 chunks, the last one flagged.

Both directions work a batch of chunks at a time through agefast.chunks, in
buffers allocated once per stream, so the per-chunk cost is the AEAD itself.
The reader looks one byte past each batch to learn whether the batch ends the
file, because only then may its last chunk carry the final flag; it releases
plaintext only of chunks whose tags verified.
"""

from typing import TYPE_CHECKING, Any

from . import chunks
from .chunks import CHUNK_SIZE, SEALED_CHUNK_SIZE, TAG_SIZE
from ._typing import Buffer
from .errors import PayloadError

if TYPE_CHECKING:
    from ._source import Source


NONCE_SIZE = 16
BATCH_CHUNKS = 16


# Each write(2) of a file at a known offset hands it at most FILE_WRITE_SIZE
# bytes, cut at the file's FILE_WRITE_SIZE boundaries. On Linux a write into
# the page cache gets folios as large as the write and its alignment in the
# file allow, and on the project's VM, once the host has taken back memory
# the guest freed, the large ones often come from memory the host must fault
# in again (32 KiB is order 3, the largest order the page allocator keeps
# per-CPU lists of). The command decrypting 1 GiB into a new file wrote
# 128 KiB pieces at 3.2-3.9 GB/s until 0.7-0.9 GiB in, then at 0.3-0.5 GB/s;
# 32 KiB pieces went at a steady 2.2-2.9 GB/s. Over whole commands on 1 GiB,
# interleaved, 32 KiB pieces were the faster in 22 of 24 pairs (median
# 0.59 / 0.53 s decrypting / encrypting, against 2.13 / 1.98 s; Go age, whose
# decryption writes 32 KiB too, 1.35 / 1.09 s); on 256 MiB, before any
# slowdown, they cost 0.02 s (0.186 s against 0.163 s). Pieces that start
# off a boundary get runs of smaller folios, so each ends on one
# (benchmarks/HISTORY.md, "Write size, again" and after). Other destinations
# (pipes, wrappers such as the armor writer, memory) get WRITE_SIZE pieces:
# fewer calls.
WRITE_SIZE = 128 << 10
FILE_WRITE_SIZE = 32 << 10


def write_failed(dst: Any, error: OSError) -> OSError:
    """`error`, raised writing to `dst`, naming `dst`'s file where it names
    none (a file object's write or flush does not), so that "No space left
    on device" says where, as Go age's "write PATH: ..." does."""
    name = getattr(dst, "name", None)
    if error.filename is not None or not error.errno or isinstance(error, BlockingIOError) \
            or not isinstance(name, str):
        return error
    return OSError(error.errno, error.strerror, name)


def write_all(dst: Any, data: Buffer, at: int | None = None) -> None:
    """Write all of `data`, also to raw writers that accept only part of it.
    `at`, where known, is the file offset data lands at: pieces are then at
    most FILE_WRITE_SIZE, cut at the file's FILE_WRITE_SIZE boundaries; else
    at most WRITE_SIZE. A failed write's OSError names the file (write_failed)."""
    mv = memoryview(data).cast("B")
    size = WRITE_SIZE if at is None else FILE_WRITE_SIZE
    piece = size if at is None else size - at % size
    while mv:
        try:
            n = dst.write(mv[:piece])
        except OSError as e:
            raise write_failed(dst, e) from None
        if n is None:
            raise BlockingIOError("the destination accepted no data (non-blocking write returned None)")
        mv = mv[n:]
        piece = size if n == piece else piece - n


def flush(dst: object) -> None:
    """Flush `dst` if it buffers (a raw writer need not have flush()); a
    failure names the file, as write_all's do."""
    method = getattr(dst, "flush", None)
    if method is not None:
        try:
            method()
        except OSError as e:
            raise write_failed(dst, e) from None


def open_batch(key: bytes, counter: int, sealed: Buffer, plain: Buffer, at_end: bool,
               threads: int | None = None, split: bool = True) -> tuple[int, int, str | None]:
    """Open consecutive sealed chunks into `plain`, as age's reader does.

    `at_end` says the payload ends with `sealed`. Returns (chunks, size,
    problem): how many chunks verified, how many plaintext bytes they released
    into `plain`, and why the payload is invalid, if it is. A full-size chunk
    is first opened as a middle chunk and, if that fails, as a full-size final
    chunk, so that a file whose final chunk is full needs no look-ahead to
    decrypt and data after a final chunk is reported as such. `threads` and
    `split` are as for chunks.open_chunks.
    """
    sealed = memoryview(sealed)
    plain = memoryview(plain)
    full, rest = divmod(len(sealed), SEALED_CHUNK_SIZE)
    done = 0
    while done < full:
        done += chunks.open_chunks(key, counter + done, sealed[done * SEALED_CHUNK_SIZE:full * SEALED_CHUNK_SIZE],
                                   plain[done * CHUNK_SIZE:], False, threads=threads, split=split)
        if done == full:
            break
        one = sealed[done * SEALED_CHUNK_SIZE:(done + 1) * SEALED_CHUNK_SIZE]
        if chunks.open_chunks(key, counter + done, one, plain[done * CHUNK_SIZE:], True,
                              threads=threads, split=split) != 1:
            return done, done * CHUNK_SIZE, f"failed to authenticate payload chunk {counter + done}"
        done += 1
        if done < full or rest or not at_end:
            return done, done * CHUNK_SIZE, "trailing data after the final chunk"
        return done, done * CHUNK_SIZE, None
    size = done * CHUNK_SIZE
    if not at_end:
        return done, size, None
    if rest == 0:
        return done, size, "the payload has no chunks" if counter + done == 0 else "the payload ends without a final chunk"
    if rest < TAG_SIZE:
        return done, size, "the payload is truncated inside a chunk"
    if rest == TAG_SIZE and counter + done:
        return done, size, "the final chunk is empty"
    if chunks.open_chunks(key, counter + done, sealed[full * SEALED_CHUNK_SIZE:], plain[size:], True,
                          threads=threads, split=split) != 1:
        return done, size, f"failed to authenticate payload chunk {counter + done}"
    return done + 1, size + rest - TAG_SIZE, None


class PayloadWriter:
    """Seals what is written to it onto `dst`; close() seals the final chunk.

    Writes of a whole batch or more are sealed straight from the caller's
    buffer. Any of their chunks could turn out to be the final one, so the
    last chunk of such a batch is held back: its sealed bytes wait in
    _held_sealed, and its plaintext (one chunk, the only copy made) in
    _held_plain. The next write proves it was not final and releases it;
    close() seals it again as the final chunk.

    `at` is where in its file the payload starts, where known (write_all).
    """

    def __init__(self, dst: Any, payload_key: bytes, threads: int | None = None, at: int | None = None) -> None:
        self._dst = dst
        self._at = at
        self._key = payload_key
        self._threads = threads
        self._plain = bytearray(BATCH_CHUNKS * CHUNK_SIZE)
        self._sealed = bytearray(BATCH_CHUNKS * SEALED_CHUNK_SIZE)
        self._held_plain = bytearray(CHUNK_SIZE)
        self._held_sealed = bytearray(SEALED_CHUNK_SIZE)
        self._held = False
        self._fill = 0
        self._counter = 0

    def write(self, data: Buffer) -> int:
        mv = memoryview(data).cast("B")
        batch = len(self._plain)
        pos = 0
        while pos < len(mv):
            if self._held:
                # More data follows, so the held chunk was not the final one.
                self._put(self._held_sealed)
                self._held = False
            if self._fill == batch:
                # More data follows, so none of these chunks is the final one.
                self._seal(memoryview(self._plain), final=False)
                self._fill = 0
            if self._fill == 0 and len(mv) - pos >= batch:
                self._seal_holding_last(mv[pos:pos + batch])
                pos += batch
                continue
            take = min(len(mv) - pos, batch - self._fill)
            self._plain[self._fill:self._fill + take] = mv[pos:pos + take]
            self._fill += take
            pos += take
        return len(mv)

    def _put(self, sealed: Buffer) -> None:
        write_all(self._dst, sealed, self._at)
        if self._at is not None:
            self._at += memoryview(sealed).nbytes

    def _seal(self, plain: memoryview, final: bool) -> None:
        size = chunks.seal_chunks(self._key, self._counter, plain, self._sealed, final, threads=self._threads)
        self._put(memoryview(self._sealed)[:size])
        self._counter += -(-len(plain) // CHUNK_SIZE)

    def _seal_holding_last(self, plain: memoryview) -> None:
        """Seal whole chunks as not final; write all but the last, hold that one."""
        size = chunks.seal_chunks(self._key, self._counter, plain, self._sealed, False, threads=self._threads)
        sealed = memoryview(self._sealed)
        self._put(sealed[:size - SEALED_CHUNK_SIZE])
        self._held_sealed[:] = sealed[size - SEALED_CHUNK_SIZE:size]
        self._held_plain[:] = plain[len(plain) - CHUNK_SIZE:]
        self._held = True
        self._counter += len(plain) // CHUNK_SIZE

    def close(self) -> None:
        if self._held:
            self._counter -= 1
            self._seal(memoryview(self._held_plain), final=True)
            self._held = False
            return
        self._seal(memoryview(self._plain)[:self._fill], final=True)


class PayloadReader:
    """Opens the payload from a Source; a reader object with `readinto`.

    Once it has failed it raises the same error on every later call.
    """

    def __init__(self, source: "Source", payload_key: bytes, threads: int | None = None) -> None:
        self._src = source
        self._key = payload_key
        self._threads = threads
        # One byte of look-ahead past a whole batch tells whether it is last.
        self._sealed = bytearray(BATCH_CHUNKS * SEALED_CHUNK_SIZE + 1)
        self._plain = bytearray(BATCH_CHUNKS * CHUNK_SIZE)
        self._carry = 0
        self._start = 0
        self._end = 0
        self._counter = 0
        self._done = False
        self._error: PayloadError | None = None  # raised once the verified plaintext is drained

    def _next_batch(self, plain: memoryview) -> int:
        """Open the next batch into `plain`; return the plaintext size."""
        sealed = memoryview(self._sealed)
        n = self._carry + self._src.readinto(sealed[self._carry:])
        more = n == len(sealed)
        size = n - 1 if more else n
        done, released, problem = open_batch(self._key, self._counter, sealed[:size], plain, not more,
                                             self._threads)
        self._counter += done
        if problem is not None:
            self._error = PayloadError(problem)
            self._done = True
        elif more:
            sealed[0] = sealed[n - 1]
            self._carry = 1
        else:
            self._done = True
        return released

    def readinto(self, b: Buffer) -> int:
        mv = memoryview(b).cast("B")
        n = 0
        while n < len(mv):
            if self._start == self._end:
                if self._done:
                    if self._error is not None and n == 0:
                        raise self._error
                    break
                try:
                    if len(mv) - n >= len(self._plain):
                        # Open straight into the caller's buffer: open_chunks
                        # never leaves unverified plaintext in it.
                        n += self._next_batch(mv[n:n + len(self._plain)])
                    else:
                        self._start, self._end = 0, self._next_batch(memoryview(self._plain))
                except BlockingIOError:
                    # The source has nothing for now and kept what it had; hand
                    # over what is ready, and the caller retries for the rest.
                    if n:
                        return n
                    raise
                continue
            take = min(len(mv) - n, self._end - self._start)
            mv[n:n + take] = memoryview(self._plain)[self._start:self._start + take]
            self._start += take
            n += take
        return n
