"""Overlapped reading, sealing (or opening) and writing of a whole payload.

The calling thread reads each batch and seals or opens it (the engine
releases the GIL and may use every core) while a writer thread drains the
results to the destination. Output buffers, allocated once, circulate through
two blocking queues: memory is bounded whatever the stream length, a slow
destination holds everything back, and no thread ever spins.

Reading stays in the calling thread: from the page cache it is a copy, a
fraction of what sealing and writing cost, and a reader thread of its own
(tried: a third thread and a third queue) cost more CPU in hand-offs and
GIL round trips than its overlap won on two cores.

Whether a batch is the last one is only known once the read after it comes
back empty, so each batch is sealed one read late. The first batch is one
chunk: a stream that ends there (a small file) is done without starting a
thread or allocating the ring.
"""

import queue
import threading
from collections.abc import Callable
from typing import Any

from . import _malloc, chunks
from .chunks import CHUNK_SIZE, SEALED_CHUNK_SIZE
from .errors import PayloadError
from .stream import open_batch, write_all

BATCH_CHUNKS = 64
FIRST_CHUNKS = 1
DEPTH = 3  # output buffers: one being written while the next ones are filled
_STOP = None


class _Writer:
    """Writes filled buffers to `dst` from a thread of its own and hands them back."""

    def __init__(self, dst: Any, size: int) -> None:
        self._dst = dst
        self._size = size
        self._made = 0
        self._free: queue.Queue[bytearray | None] = queue.Queue()
        self._full: queue.Queue[tuple[bytearray, int] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._cancelled = False
        self._thread = threading.Thread(target=self._run, name="agefast-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while (item := self._full.get()) is not _STOP:
                buf, size = item
                if not self._cancelled:
                    write_all(self._dst, memoryview(buf)[:size])
                self._free.put(buf)
        except BaseException as e:  # raised in the calling thread
            self._error = e
            self._free.put(_STOP)

    def buffer(self) -> bytearray:
        """An output buffer to fill: a new one while fewer than DEPTH exist,
        else the next one written; raises what the writer failed with."""
        if self._error is not None:
            raise self._error
        if self._free.empty() and self._made < DEPTH:
            self._made += 1
            return bytearray(self._size)
        buf = self._free.get()
        if buf is None:  # _STOP: _run put it there after setting _error
            raise self._error  # type: ignore[misc]
        return buf

    def write(self, buf: bytearray, size: int) -> None:
        self._full.put((buf, size))

    def close(self, cancel: bool = False) -> None:
        """Wait until all handed over is written, or dropped if `cancel`;
        unless cancelled, raise what the writer failed with."""
        self._cancelled = cancel
        self._full.put(_STOP)
        self._thread.join()
        if self._error is not None and not cancel:
            raise self._error


# Fills a buffer unless the input ends first; returns the count.
ReadFull = Callable[[memoryview], int]


def _run(read_full: ReadFull, dst: Any, in_chunk: int, out_chunk: int,
         process: Callable[[memoryview, bytearray, bool], tuple[int, bool]]) -> None:
    """Feed the input batch by batch to process(data, out, last) -> (output
    size, go on), which fills `out`, and write each output in order.

    read_full(buffer) fills the buffer unless the input ends first; inputs
    come in chunks of `in_chunk` bytes, outputs in chunks of `out_chunk`.
    """
    first = bytearray(FIRST_CHUNKS * in_chunk)
    n = read_full(memoryview(first))
    if n < len(first):
        out = bytearray(FIRST_CHUNKS * out_chunk)
        size, _ = process(memoryview(first)[:n], out, True)
        write_all(dst, memoryview(out)[:size])
        return
    _malloc.large_job()
    writer = _Writer(dst, BATCH_CHUNKS * out_chunk)
    try:
        ahead = [bytearray(BATCH_CHUNKS * in_chunk), bytearray(BATCH_CHUNKS * in_chunk)]
        batch, turn = first, 0
        while True:
            # `batch` is full: it is the last one only if nothing follows.
            following = ahead[turn]
            turn ^= 1
            m = read_full(memoryview(following)) if n == len(batch) else 0
            last = m == 0
            out = writer.buffer()
            size, more = process(memoryview(batch)[:n], out, last)
            writer.write(out, size)
            if last or not more:
                break
            batch, n = following, m
    except BaseException:
        writer.close(cancel=True)
        raise
    writer.close()


def seal_stream(read_full: ReadFull, dst: Any, key: bytes, threads: int | None = None) -> None:
    """Encrypt everything `read_full` yields as the STREAM payload onto `dst`."""
    counter = 0

    def seal(plain: memoryview, sealed: bytearray, last: bool) -> tuple[int, bool]:
        nonlocal counter
        size = chunks.seal_chunks(key, counter, plain, sealed, last, threads=threads)
        counter += len(plain) // CHUNK_SIZE
        return size, True

    _run(read_full, dst, CHUNK_SIZE, SEALED_CHUNK_SIZE, seal)


def open_stream(read_full: ReadFull, dst: Any, key: bytes, threads: int | None = None) -> None:
    """Decrypt the STREAM payload `read_full` yields onto `dst`.

    Verified plaintext is written as it is opened; a PayloadError is raised
    after the last verified chunk, so a caller writing to a file must discard
    it on error (decrypt_file and the CLI do).
    """
    counter = 0
    problem: str | None = None

    def open_(sealed: memoryview, plain: bytearray, last: bool) -> tuple[int, bool]:
        nonlocal counter, problem
        done, size, problem = open_batch(key, counter, sealed, plain, last, threads)
        counter += done
        return size, problem is None

    _run(read_full, dst, SEALED_CHUNK_SIZE, CHUNK_SIZE, open_)
    if problem is not None:
        raise PayloadError(problem)
