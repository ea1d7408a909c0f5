"""The STREAM payload: 64 KiB ChaCha20-Poly1305 chunks, the last one flagged.

Both directions work a batch of chunks at a time through the job's engine, in
buffers that grow from one chunk to a batch and are then used again, so the
per-chunk cost is the AEAD itself and a small file pays for no batch.
The reader looks one byte past each batch to learn whether the batch ends the
file, because only then may its last chunk carry the final flag; it releases
plaintext only of chunks whose tags verified.
"""

from typing import TYPE_CHECKING, Any

from .engine import Engine
from .rules import (CHUNK_SIZE, PEEK_SIZE, SEALED_CHUNK_SIZE, STREAM_BATCH, TAG_SIZE, end_problem,
                    next_stream_batch, opened_before_failure)
from .._typing import Buffer
from ..errors import PayloadError, TruncatedError, again
from ..io.writes import write_all

if TYPE_CHECKING:
    from ..io.source import Source


def open_batch(engine: Engine, key: bytes, counter: int, sealed: Buffer, plain: Buffer, at_end: bool,
               split: bool = True) -> tuple[int, int, PayloadError | None]:
    """Open consecutive sealed chunks into `plain`, as age's reader does.

    `at_end` says the payload ends with `sealed`. Returns (chunks, size,
    problem): how many chunks verified, how many plaintext bytes they released
    into `plain`, and why the payload is invalid, if it is (a TruncatedError
    where it ends early). A full-size chunk is first opened as a middle chunk
    and, if that fails, as a full-size final chunk, so that a file whose final
    chunk is full needs no look-ahead to decrypt and data after a final chunk
    is reported as such. The one exception is a full chunk that ends the
    payload: only the final form can be valid there, so it is opened as final
    first, and as a middle chunk only to tell a truncated payload from a
    forged one once that failed (opening it as a middle chunk first cost a 64
    KiB payload its chunk twice). Such a payload is first opened whole, the
    chunks before it with it, in one call: opened as 15 chunks and then 1, a
    payload of exactly 16 was never split over the engine's threads
    (KERNEL_SPLIT_BATCH; 1 MiB on Zen 2 decrypted in 768 us against 516 for
    its encryption, when 15 chunks were also too few for the kernels). Where
    that call does not verify every chunk, they are opened again one kind at
    a time, to say why. `split` is as for Engine.open.
    """
    sealed = memoryview(sealed)
    plain = memoryview(plain)
    full, rest = divmod(len(sealed), SEALED_CHUNK_SIZE)
    ends_whole = at_end and rest == 0 and full > 0
    if ends_whole and full > 1 and engine.open(key, counter, sealed, plain, True, split) == full:
        return full, full * CHUNK_SIZE, None
    middle = full - 1 if ends_whole else full
    done = 0
    while done < middle:
        done += engine.open(key, counter + done, sealed[done * SEALED_CHUNK_SIZE:middle * SEALED_CHUNK_SIZE],
                            plain[done * CHUNK_SIZE:], False, split)
        if done == middle:
            break
        one = sealed[done * SEALED_CHUNK_SIZE:(done + 1) * SEALED_CHUNK_SIZE]
        if engine.open(key, counter + done, one, plain[done * CHUNK_SIZE:], True, split) != 1:
            return done, done * CHUNK_SIZE, PayloadError(f"failed to authenticate payload chunk {counter + done}")
        return done + 1, (done + 1) * CHUNK_SIZE, PayloadError("trailing data after the final chunk")
    size = done * CHUNK_SIZE
    if ends_whole:
        last = sealed[done * SEALED_CHUNK_SIZE:]
        if engine.open(key, counter + done, last, plain[size:], True, split) == 1:
            return done + 1, size + CHUNK_SIZE, None
        if engine.open(key, counter + done, last, plain[size:], False, split) == 1:
            # The last whole chunk is a middle one, so none was final: the
            # file was cut at a chunk boundary (age: "unexpected EOF").
            return done + 1, size + CHUNK_SIZE, _cut_after(counter + done)
        return done, size, PayloadError(f"failed to authenticate payload chunk {counter + done}")
    if not at_end:
        return done, size, None
    if rest == 0 and counter:
        # An empty batch after middle chunks: none of them was final.
        return done, size, _cut_after(counter - 1)
    problem = end_problem((counter + done) * SEALED_CHUNK_SIZE + rest)
    if problem is not None:
        return done, size, problem
    if engine.open(key, counter + done, sealed[full * SEALED_CHUNK_SIZE:], plain[size:], True, split) != 1:
        # A short last chunk that does not verify as the final one is a final
        # chunk that was damaged or a chunk that was cut short; its tag, the
        # only thing that could tell, is what failed (or is gone). Age calls
        # it an authentication failure; the message also names the cut.
        return done, size, PayloadError(f"failed to authenticate payload chunk {counter + done}, the last in "
                                        "the file: it is damaged, or the file is truncated")
    return done + 1, size + rest - TAG_SIZE, None


def _cut_after(chunk: int) -> TruncatedError:
    return TruncatedError(f"the file is truncated: it ends after chunk {chunk}, without a final chunk")


class PayloadWriter:
    """Seals what is written to it onto `dst`; close() seals the final chunk.

    Writes of a whole batch or more are sealed straight from the caller's
    buffer. Any of their chunks could turn out to be the final one, so the
    last chunk of such a batch is held back: its sealed bytes wait in
    _held_sealed, and its plaintext (one chunk, the only copy made) in
    _held_plain. The next write proves it was not final and releases it;
    close() seals it again as the final chunk.

    Smaller writes gather in a batch of one chunk first, and more after each
    whole one (rules.next_stream_batch): buffers of STREAM_BATCH chunks,
    cleared for every writer, were most of encrypting a small file to armor in
    memory (900 us of 1 KiB's, where pyrage takes 58; 2026-12-07, Zen 5).

    `at` is where in its file the payload starts, where known (write_all).
    """

    def __init__(self, dst: Any, payload_key: bytes, engine: Engine, at: int | None = None) -> None:
        self._dst = dst
        self._at = at
        self._key = payload_key
        self._engine = engine
        self._plain = bytearray(CHUNK_SIZE)
        self._sealed = bytearray(SEALED_CHUNK_SIZE)
        self._held_plain, self._held_sealed = bytearray(), bytearray()   # made for the first whole batch
        self._held = False
        self._fill = 0
        self._counter = 0

    def write(self, data: Buffer) -> int:
        mv = memoryview(data).cast("B")
        batch = STREAM_BATCH * CHUNK_SIZE
        pos = 0
        while pos < len(mv):
            if self._held:
                # More data follows, so the held chunk was not the final one.
                self._put(self._held_sealed)
                self._held = False
            if self._fill == len(self._plain):
                # More data follows, so none of these chunks is the final one.
                self._seal(memoryview(self._plain), final=False)
                self._fill = 0
                self._grow(next_stream_batch(len(self._plain) // CHUNK_SIZE))
            if self._fill == 0 and len(mv) - pos >= batch:
                self._grow(STREAM_BATCH)
                self._seal_holding_last(mv[pos:pos + batch])
                pos += batch
                continue
            take = min(len(mv) - pos, len(self._plain) - self._fill)
            self._plain[self._fill:self._fill + take] = mv[pos:pos + take]
            self._fill += take
            pos += take
        return len(mv)

    def _grow(self, chunks: int) -> None:
        """Batches of `chunks` chunks (STREAM_BATCH at most) from now on, if
        more than today's; only while no plaintext waits in the batch."""
        if chunks * CHUNK_SIZE > len(self._plain):
            self._plain = bytearray(chunks * CHUNK_SIZE)
            self._sealed = bytearray(chunks * SEALED_CHUNK_SIZE)

    def _put(self, sealed: Buffer) -> None:
        write_all(self._dst, sealed, self._at)
        if self._at is not None:
            self._at += memoryview(sealed).nbytes

    def _seal(self, plain: memoryview, final: bool) -> None:
        size = self._engine.seal(self._key, self._counter, plain, self._sealed, final)
        self._put(memoryview(self._sealed)[:size])
        self._counter += -(-len(plain) // CHUNK_SIZE)

    def _seal_holding_last(self, plain: memoryview) -> None:
        """Seal whole chunks as not final; write all but the last, hold that one."""
        size = self._engine.seal(self._key, self._counter, plain, self._sealed, False)
        sealed = memoryview(self._sealed)
        self._put(sealed[:size - SEALED_CHUNK_SIZE])
        if not self._held_sealed:
            self._held_plain, self._held_sealed = bytearray(CHUNK_SIZE), bytearray(SEALED_CHUNK_SIZE)
        self._held_sealed[:] = sealed[size - SEALED_CHUNK_SIZE:size]
        self._held_plain[:] = plain[len(plain) - CHUNK_SIZE:]
        self._held = True
        self._counter += len(plain) // CHUNK_SIZE

    def flush(self) -> None:
        """Seal and write every gathered chunk known not to be the final one: all but the last, whole or not (a
        final chunk may be whole), which stays gathered."""
        keep = self._fill % CHUNK_SIZE or min(self._fill, CHUNK_SIZE)
        done = self._fill - keep
        if done:
            self._seal(memoryview(self._plain)[:done], final=False)
            self._plain[:keep] = self._plain[done:self._fill]
            self._fill = keep

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

    def __init__(self, source: "Source", payload_key: bytes, engine: Engine) -> None:
        self._src = source
        self._key = payload_key
        self._engine = engine
        # A batch of one chunk first, more after each whole one (rules.next_stream_batch):
        # buffers of STREAM_BATCH chunks, cleared for every reader, were most of decrypting
        # a small armored file (1,040 us of 1 KiB's, where pyrage takes 116; 2026-12-06,
        # Zen 2). One byte of look-ahead past a whole batch tells whether it is last.
        self._sealed = bytearray(SEALED_CHUNK_SIZE + 1)
        self._plain = bytearray(CHUNK_SIZE)
        self._whole = False     # the last batch was whole: the next may be larger
        self._carry = 0
        self._start = 0
        self._end = 0
        self._counter = 0
        self._done = False
        self._error: Exception | None = None  # raised once the verified plaintext is drained

    def _grow(self) -> None:
        """After a whole batch, larger batches (rules.next_stream_batch), the look-ahead byte kept; only
        between batches, when the plaintext buffer has been read."""
        self._whole = False
        chunks = next_stream_batch(len(self._plain) // CHUNK_SIZE)
        if chunks * CHUNK_SIZE == len(self._plain):
            return
        sealed = bytearray(chunks * SEALED_CHUNK_SIZE + 1)
        sealed[:self._carry] = self._sealed[:self._carry]
        self._sealed, self._plain = sealed, bytearray(chunks * CHUNK_SIZE)

    def _next_batch(self, plain: memoryview) -> int:
        """Open the next batch into `plain` (as large as the plaintext buffer); return the plaintext size."""
        sealed = memoryview(self._sealed)
        got, failure = self._src.fill(sealed[self._carry:])
        n = self._carry + got
        more = n == len(sealed) or failure is not None
        size = opened_before_failure(n, SEALED_CHUNK_SIZE) if failure is not None else n - 1 if more else n
        done, released, problem = open_batch(self._engine, self._key, self._counter, sealed[:size], plain, not more)
        self._counter += done
        if problem is not None or failure is not None:
            self._error = problem or failure    # a chunk that failed comes before the read that failed after it
            self._done = True
        elif more:
            sealed[0] = sealed[n - 1]
            self._carry = 1
            self._whole = True
        else:
            self._done = True
        return released

    def peek(self) -> bytes:
        """Verified plaintext from the position on, without moving it: up to PEEK_SIZE bytes of what was opened,
        else of the next batch, opened now; b"" at the end."""
        if self._start == self._end and not self._done:
            if self._whole:
                self._grow()
            self._start, self._end = 0, self._next_batch(memoryview(self._plain))
        if self._start == self._end and self._error is not None:
            raise again(self._error)
        return bytes(self._plain[self._start:min(self._end, self._start + PEEK_SIZE)])

    def readinto(self, b: Buffer) -> int:
        mv = memoryview(b).cast("B")
        n = 0
        while n < len(mv):
            if self._start == self._end:
                if self._done:
                    if self._error is not None and n == 0:
                        raise again(self._error)
                    break
                if self._whole:
                    self._grow()
                try:
                    if len(mv) - n >= len(self._plain):
                        # Open straight into the caller's buffer: Engine.open
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
