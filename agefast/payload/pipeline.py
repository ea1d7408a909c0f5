"""Overlapped reading, sealing (or opening) and writing of a whole payload.

Workers, one per core and at least two, threads of their own while the
calling thread waits, each take the next batch through all three steps: read
it (one reader at a time, in order), seal or open it (at once with the
others: the engine releases the GIL), write it (one writer at a time, in
order). Where a file may be used from the calling thread alone
(agefast.io.callers), that thread is the one worker. On every core a worker
is reading or writing while another seals, with no hand-off between threads
but a lock and a condition; nothing spins. Memory is one input and one output buffer per worker, whatever the
stream length.

Tried before this (benchmarks/HISTORY.md, "The file pipeline on every
core"): the calling thread reading and sealing each batch while a writer
thread wrote the last one, and reading positionally (pread/pwrite) from every
worker. The first left one core reading while the other waited; the second
measured no faster than reading in turn and only works for regular files.

Whether a batch is the last one is known from one byte more: every read asks
for a batch and one byte, and that byte, when it comes, is the first of the
next batch, carried over to the next reader. The first batch is one chunk: a
stream that ends there (a small file) is done without starting a thread or
allocating a batch.

Where the input is a file at a known offset, each batch is read to the place
in a page-aligned buffer that has the same offset within a page as the file:
the kernel's copy out of the page cache slows down two to three times when
its stores land a few bytes past its loads modulo 4 KiB (4K aliasing: 0.115
against 0.16-0.39 s per GiB here, by offset). Outputs to a file at a known
offset are placed the same way (writing 256 MiB: 0.050 s placed, 0.065 s
from a bytearray's data, which sits 16 bytes into its pages).
"""

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..io import cpus
from ..io.batch_buffers import batch_buffer
from ..io.portable import page_size
from .engine import Engine
from .rules import CHUNK_SIZE, PIPELINE_BATCH, PIPELINE_FIRST, SEALED_CHUNK_SIZE, opened_before_failure
from ..errors import EncryptError, PayloadError
from ..io.writes import write_all
from .stream import open_batch

if TYPE_CHECKING:
    import mmap

PAGE = page_size()

# fill(buffer) -> (bytes read, the error that cut the reading short or None): agefast.io.source.Source.fill
Fill = Callable[[memoryview], tuple[int, Exception | None]]
# process(counter, data, out, final) -> (bytes of `out` to write, why the payload is invalid or None)
Process = Callable[[int, memoryview, memoryview, bool], tuple[int, PayloadError | None]]


def workers_for(threads: int | None) -> int:
    """How many workers a stream runs with: one per core it may seal on, at least two."""
    return max(2, cpus.count() if threads is None else threads)


class _Workers:
    """The shared state of the workers of one stream."""

    def __init__(self, fill: Fill, read_at: int | None, dst: Any, write_at: int | None, in_chunk: int,
                 out_chunk: int, process: Process, carry: bytes, threads: int | None) -> None:
        self._fill = fill
        self._offset = read_at     # of the next byte fill reads in its file, if known
        self._write_at = write_at  # where in its file batch 1 lands in dst, if known
        self._dst = dst
        self._in_chunk = in_chunk
        self._in_size = PIPELINE_BATCH * in_chunk
        self._out_size = PIPELINE_BATCH * out_chunk
        self._process = process
        self._carry = carry
        self._reading = threading.Lock()
        self._turn = threading.Condition()
        # threads=1 asks for one core: the workers then take turns at sealing too.
        self._sealing = threading.Lock() if threads == 1 else None
        self._next_read = 1        # batch 0 is the first chunk, done before the workers start
        self._next_write = 1
        self._ended = False        # the input ended: no more batches
        self._writing = False      # a worker is writing its batch
        self._stopped = False      # an error or an invalid batch: nothing more is read or written
        self.error: BaseException | None = None
        self.problem: PayloadError | None = None
        self.running = 0           # helper threads started and not yet ended (wait)

    def _read(self, buf: "mmap.mmap") -> tuple[int, memoryview, bool, Exception | None] | None:
        """Read the next batch (and one byte more) into `buf`; (index, the batch, final, the error that cut
        it short) or None at the end. A batch cut short holds the chunks age opens before the error."""
        if self._stopped:
            # Not waiting for the reading turn: a worker may hold it blocked on an input that has nothing for now
            # (a pipe whose writer waits), and the batch that stopped the job (a chunk that did not verify) is
            # told once the workers not blocked are done.
            return None
        with self._reading:
            if self._ended or self._stopped:
                return None
            index = self._next_read
            self._next_read += 1
            carried = len(self._carry)
            place = 0 if self._offset is None else (self._offset - carried) % PAGE
            view = memoryview(buf)[place:place + self._in_size + 1]
            view[:carried] = self._carry
            got, error = self._fill(view[carried:])
            if self._offset is not None:
                self._offset += got
            n = carried + got
            if error is not None:
                self._ended = True
                return index, view[:opened_before_failure(n, self._in_chunk)], False, error
            final = n <= self._in_size
            if final:
                self._ended = True
            else:
                self._carry = bytes(view[self._in_size:n])
                n = self._in_size
            return index, view[:n], final, None

    def _write(self, index: int, out: memoryview, size: int, problem: PayloadError | None, error: Exception | None,
               at: int | None) -> None:
        with self._turn:
            while self._next_write != index and not self._stopped:
                self._turn.wait()
            if self._stopped:
                return
            self._writing = True
        # Until _next_write moves on, this batch's turn is this thread's alone.
        written = False
        try:
            write_all(self._dst, out[:size], at)
            written = True
        finally:
            with self._turn:
                self._writing = False
                if written:
                    if problem is not None:
                        self.problem = problem
                        self._stopped = True
                    elif error is not None:     # the read that cut this batch short, after all before it
                        self.error = error
                        self._stopped = True
                    self._next_write += 1
                self._turn.notify_all()

    def stopped(self) -> bool:
        """Whether the batches stopped short (an error or an invalid batch);
        if so, wait until no worker is writing: none will write after that."""
        with self._turn:
            while self._stopped and self._writing:
                self._turn.wait()
            return self._stopped

    def _stop(self, error: BaseException) -> None:
        with self._turn:
            if self.error is None:
                self.error = error
            self._stopped = True
            self._turn.notify_all()

    def stop(self, error: BaseException) -> None:
        """Stop the workers for `error` (raised in the calling thread) and wait until none is writing."""
        self._stop(error)
        self.stopped()

    def work(self) -> None:
        try:
            # page-aligned memory for reads and writes, kept for the next job's workers once this one's are done
            with batch_buffer(self._in_size + 1 + PAGE) as data, batch_buffer(self._out_size + PAGE) as whole:
                self._batches(data, whole)
        except BaseException as e:  # raised in the calling thread
            self._stop(e)

    def help(self) -> None:
        """work(), in a helper thread, which wait() waits for."""
        try:
            self.work()
        finally:
            with self._turn:
                self.running -= 1
                self._turn.notify_all()

    def wait(self) -> None:
        """Until every helper has ended, or the batches stopped short and none is writing: a helper may then be
        blocked reading an input that has nothing for now (a pipe whose writer waits for an answer), and writes
        nothing after it."""
        with self._turn:
            while self.running and not (self._stopped and not self._writing):
                self._turn.wait()

    def _batches(self, data: "mmap.mmap", whole: "mmap.mmap") -> None:
        """Take batches through all three steps, in `data` and `whole`, until none is left or the job stopped."""
        while (batch := self._read(data)) is not None:
            index, view, final, error = batch
            counter = PIPELINE_FIRST + (index - 1) * PIPELINE_BATCH
            # Every batch before a final one is full, so where this one lands is known.
            at = None if self._write_at is None else self._write_at + (index - 1) * self._out_size
            place = 0 if at is None else at % PAGE
            out = memoryview(whole)[place:place + self._out_size]
            if error is not None and not len(view):     # cut short before a whole chunk: none to process
                size, problem = 0, None
            elif self._sealing is None:
                size, problem = self._process(counter, view, out, final)
            else:
                with self._sealing:
                    size, problem = self._process(counter, view, out, final)
            self._write(index, out, size, problem, error, at)


def _run(fill: Fill, read_at: int | None, dst: Any, write_at: int | None, in_chunk: int, out_chunk: int,
         process: Process, threads: int | None, anywhere: bool) -> PayloadError | None:
    """Feed the input batch by batch to `process`, which fills `out`, and
    write each output in order; returns the first problem `process` reported
    (after writing the output of its batch, and nothing after it).

    fill(buffer) fills the buffer unless the input ends or fails first, from
    `read_at` in its file where that is known (else None); a failure is
    raised after the output of the chunks before it (those age opens before
    it reports one: agefast.payload.rules.opened_before_failure), unless a
    problem came first. `dst` is written from `write_at` in its file where
    known. Inputs come in chunks of `in_chunk` bytes, outputs in chunks of
    `out_chunk`. Unless `anywhere` (fill and dst may be used from any thread:
    agefast.io.callers), the calling thread is the only worker.
    """
    first = bytearray(PIPELINE_FIRST * in_chunk + 1)
    n, error = fill(memoryview(first))
    final = n < len(first) and error is None
    out = bytearray(PIPELINE_FIRST * out_chunk)
    take = opened_before_failure(n, in_chunk) if error is not None else min(n, len(first) - 1)
    size, problem = process(0, memoryview(first)[:take], memoryview(out), final) if take or final else (0, None)
    write_all(dst, memoryview(out)[:size], write_at)
    if final or problem is not None:
        return problem
    if error is not None:
        raise error
    batches = _Workers(fill, None if read_at is None else read_at + n, dst,
                       None if write_at is None else write_at + size, in_chunk, out_chunk, process,
                       bytes(first[-1:]), threads)
    # Where the files may be used from any thread, every worker is a helper and this thread waits for them: a
    # worker of its own, blocked reading a pipe whose writer waits, had kept a chunk that did not verify from
    # being told until the writer went on (3 s, or never).
    helpers = [threading.Thread(target=batches.help, name="agefast-pipeline", daemon=True)
               for _ in range(workers_for(threads) if anywhere else 0)]
    batches.running = len(helpers)
    try:
        for helper in helpers:
            helper.start()
        if helpers:
            batches.wait()
        else:
            batches.work()
        # Stopped short (an error, a signal's exception in this thread, an invalid
        # batch), a worker may be blocked reading an input that never ends, so only
        # a write under way is waited for; the workers write nothing after it.
        if not batches.stopped():
            for helper in helpers:
                helper.join()
    except BaseException as e:
        # A signal's exception while a helper starts (Thread.start waits for it) or while they finish their
        # last batches: they are stopped, as above, before the caller closes dst, which they would otherwise
        # write on into (or into a file given its descriptor meanwhile).
        batches.stop(e)
        raise
    if batches.error is not None:
        raise batches.error
    return batches.problem


def seal_stream(fill: Fill, dst: Any, key: bytes, engine: Engine, *, read_at: int | None = None,
                write_at: int | None = None, counter: int = 0, anywhere: bool = True) -> None:
    """Encrypt everything `fill` reads as the STREAM payload onto `dst`,
    its first chunk with the nonce counter `counter` (the rest of a payload
    whose first chunks were sealed elsewhere: agefast.payload.file_driver).

    `read_at` and `write_at` are the file offsets the input is read from and
    the output written to, where known: hints for placing buffers. Unless
    `anywhere`, the input and `dst` are read and written on this thread
    alone, and each batch sealed on every core the engine has (split)."""

    def seal(index: int, plain: memoryview, sealed: memoryview, final: bool) -> tuple[int, PayloadError | None]:
        if counter and not index and not plain:
            # The rest of a payload whose first chunks were sealed as not final: it holds the final chunk, and
            # an empty one there is no age file. The input was cut back to where those chunks ended meanwhile.
            raise EncryptError("the input file shrank while it was encrypted")
        return engine.seal(key, counter + index, plain, sealed, final, split=not anywhere), None

    _run(fill, read_at, dst, write_at, CHUNK_SIZE, SEALED_CHUNK_SIZE, seal, engine.threads, anywhere)


def open_stream(fill: Fill, dst: Any, key: bytes, engine: Engine, *, read_at: int | None = None,
                write_at: int | None = None, counter: int = 0, anywhere: bool = True) -> None:
    """Decrypt the STREAM payload `fill` reads onto `dst` (`read_at`,
    `write_at`, `counter` and `anywhere` as for seal_stream).

    Verified plaintext is written as it is opened; a PayloadError is raised
    after the last verified chunk, so a caller writing to a file must discard
    it on error (decrypt_file and the CLI do).
    """

    def open_(index: int, sealed: memoryview, plain: memoryview, final: bool) -> tuple[int, PayloadError | None]:
        _, size, problem = open_batch(engine, key, counter + index, sealed, plain, final, split=not anywhere)
        return size, problem

    problem = _run(fill, read_at, dst, write_at, SEALED_CHUNK_SIZE, CHUNK_SIZE, open_, engine.threads, anywhere)
    if problem is not None:
        try:
            raise problem
        finally:
            del problem     # as in steps.open_in_steps: no cycle that keeps the caller's buffer exported
