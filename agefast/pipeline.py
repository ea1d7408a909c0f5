"""Overlapped reading, sealing (or opening) and writing of a whole payload.

A reader thread fills batches from the source, the calling thread seals or
opens them (the engine releases the GIL and may use every core), and a writer
thread drains them to the destination. A fixed ring of buffers, allocated once,
circulates through blocking queues: memory is bounded whatever the stream
length, a slow destination holds everything back, and no thread ever spins.

Whether a batch is the last one is only known once the read after it comes
back empty, so the reader hands each batch on one read late.

The calling thread reads the first batch, of one chunk, itself: a stream that
ends there (a small file) is done in that thread, with no other thread
started and no ring allocated.
"""

import queue
import threading

from . import _malloc, chunks
from .chunks import CHUNK_SIZE, SEALED_CHUNK_SIZE
from .errors import PayloadError
from .stream import open_batch, write_all

BATCH_CHUNKS = 64
FIRST_CHUNKS = 1
DEPTH = 3
_STOP = None


class _Slot:
    __slots__ = ("plain", "sealed", "size", "last", "ring")

    def __init__(self, chunks: int = BATCH_CHUNKS, ring: bool = True):
        self.plain = bytearray(chunks * CHUNK_SIZE)
        self.sealed = bytearray(chunks * SEALED_CHUNK_SIZE)
        self.size = 0
        self.last = False
        self.ring = ring  # goes back to the reader once written


class _Pipeline:
    def __init__(self, read_full, dst, input_field: str, output_field: str):
        # read_full(buffer) fills the buffer unless the input ends first.
        self._read_full = read_full
        self._dst = dst
        self._input = input_field
        self._output = output_field
        self._free = queue.Queue()
        self._ready = queue.Queue()
        self._done = queue.Queue()
        self._slots = 0  # ring slots made so far, up to DEPTH
        self._errors = []
        self._cancel = threading.Event()

    def _reader(self, held: _Slot) -> None:
        """Read the batches after `held`, a full one not handed on yet."""
        try:
            while not self._cancel.is_set():
                if self._free.empty() and self._slots < DEPTH:
                    self._slots += 1
                    slot = _Slot()
                else:
                    slot = self._free.get()
                if slot is _STOP:
                    return
                buf = memoryview(getattr(slot, self._input))
                slot.size = self._read_full(buf)
                # The batch before this one was full; it was the last one
                # only if nothing followed it.
                held.last = slot.size == 0
                self._ready.put(held)
                if held.last:
                    return
                if slot.size < len(buf):
                    slot.last = True
                    self._ready.put(slot)
                    return
                held = slot
        except BaseException as e:  # reported by the calling thread
            self._errors.append(e)
        finally:
            self._ready.put(_STOP)

    def _writer(self) -> None:
        try:
            while True:
                item = self._done.get()
                if item is _STOP:
                    return
                slot, size = item
                if not self._cancel.is_set():
                    write_all(self._dst, memoryview(getattr(slot, self._output))[:size])
                if slot.ring:
                    self._free.put(slot)
        except BaseException as e:
            self._errors.append(e)
            self._cancel.set()
            self._free.put(_STOP)

    def run(self, process) -> None:
        """Call process(slot) -> (output size, go on) for each batch in order."""
        first = _Slot(FIRST_CHUNKS, ring=False)
        buf = memoryview(getattr(first, self._input))
        first.size = self._read_full(buf)
        if first.size < len(buf):
            first.last = True
            size, _ = process(first)
            write_all(self._dst, memoryview(getattr(first, self._output))[:size])
            return
        _malloc.large_job()
        reader = threading.Thread(target=self._reader, args=(first,), name="agefast-reader", daemon=True)
        writer = threading.Thread(target=self._writer, name="agefast-writer", daemon=True)
        reader.start()
        writer.start()
        try:
            more = True
            while more and not self._errors:
                slot = self._ready.get()
                if slot is _STOP:
                    break
                size, more = process(slot)
                self._done.put((slot, size))
        except BaseException:
            self._cancel.set()
            raise
        finally:
            self._done.put(_STOP)
            writer.join()
            self._cancel.set()
            # The reader may be blocked in a read of its own; it exits at its
            # next step, and is joined only when it has finished by itself.
            self._free.put(_STOP)
        if self._errors:
            raise self._errors[0]
        if not more:
            return
        reader.join()
        if self._errors:
            raise self._errors[0]


def seal_stream(read_full, dst, key: bytes, threads: int | None = None) -> None:
    """Encrypt everything `read_full` yields as the STREAM payload onto `dst`."""
    counter = 0

    def seal(slot: _Slot) -> tuple[int, bool]:
        nonlocal counter
        size = chunks.seal_chunks(key, counter, memoryview(slot.plain)[:slot.size], slot.sealed,
                                  slot.last, threads=threads)
        counter += slot.size // CHUNK_SIZE
        return size, True

    _Pipeline(read_full, dst, "plain", "sealed").run(seal)


def open_stream(read_full, dst, key: bytes, threads: int | None = None) -> None:
    """Decrypt the STREAM payload `read_full` yields onto `dst`.

    Verified plaintext is written as it is opened; a PayloadError is raised
    after the last verified chunk, so a caller writing to a file must discard
    it on error (decrypt_file and the CLI do).
    """
    counter = 0
    problem = None

    def open_(slot: _Slot) -> tuple[int, bool]:
        nonlocal counter, problem
        done, size, problem = open_batch(key, counter, memoryview(slot.sealed)[:slot.size], slot.plain,
                                         slot.last, threads)
        counter += done
        return size, problem is None

    _Pipeline(read_full, dst, "sealed", "plain").run(open_)
    if problem is not None:
        raise PayloadError(problem)
