"""seal_file and open_file: whole batches of one file into another, on worker threads in compiled code."""

import errno
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _abi, _loader, _native
from ._batches import key_buffer, threads_for
from ._pool import through_signals

if TYPE_CHECKING:
    import ctypes

FILE_BATCH = _abi.FILE_BATCH     # chunks in a batch of seal_file and open_file


class WriteError(OSError):
    """A write of the output file failed (FileJob.wait): its errno says why."""


class FileJob:
    """Whole batches of one file being sealed or opened into another on worker threads (seal_file, open_file)."""

    def __init__(self, mode: int, key: "ctypes.Array[ctypes.c_char]", src_fd: int, src_at: int, dst_fd: int,
                 dst_at: int, batches: int, workers: int) -> None:
        self._batches = batches
        self._stop = _native.Flag()
        self._lock = _native.Mutex()
        # Each worker's (result, errno), or what it raised instead: until it ends, an error.
        self._results: list[tuple[int, int] | BaseException] = [RuntimeError("a file worker did not end")] * workers
        # Set by each worker as it ends. Not Thread.join: a join that a signal's exception interrupts marks the
        # thread ended while it still runs (Python 3.11's bpo-45274 handling), and the next join returns at once:
        # the output was cut back, then closed, while workers still wrote into it.
        self._ended = [threading.Event() for _ in range(workers)]
        self._began = [threading.Event() for _ in range(workers)]
        self._threads = [threading.Thread(target=self._work, name="agefast-file-job", daemon=True,
                                          args=(i, key, mode, src_fd, src_at, dst_fd, dst_at, i, workers, batches))
                         for i in range(workers)]

    def start(self) -> None:
        """Start the workers. A signal's exception while one starts (Thread.start waits for it) stops those that
        began; stop() is still the caller's to call, which waits for them."""
        try:
            for thread in self._threads:
                thread.start()
        except BaseException:
            self._stop.set()    # a worker that has not begun yet finds it set and ends before its first batch
            raise

    def _work(self, i: int, *args: Any) -> None:
        self._began[i].set()
        try:
            with _native.page_aligned(_abi.FILE_BUFFER_SIZE) as src_at, \
                    _native.page_aligned(_abi.FILE_BUFFER_SIZE) as dst_at:
                _native.clear_errno()
                file_batches = _loader.functions().file_batches  # loaded before the threads start
                result = file_batches(*args, src_at, dst_at, _native.scratch(), self._stop.address,
                                      self._lock.address)
                self._results[i] = (result, _native.last_errno())
        except BaseException as e:     # raised by wait(), in the caller's thread
            self._results[i] = e
        finally:
            self._ended[i].set()

    def stop(self) -> None:
        """End the work after the batches under way; returns once no worker reads or writes, whatever
        interrupts the wait (a signal's exception is raised again once they are done)."""
        self._stop.set()
        _wait_for(lambda: [ended for ended, began in zip(self._ended, self._began) if began.is_set()])

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
        for ended in self._ended:
            ended.wait()
        endings = self._endings()
        for ending in endings:
            if isinstance(ending, BaseException):
                raise ending
        # Each worker went through its batches in order up to the first it could not do, so every batch below
        # the least of those was done: that one's ending is the job's (a batch that did not verify below one
        # whose read or write failed is what age, reading in order, would have met first).
        stops = sorted(e for e in endings if not isinstance(e, BaseException) and e[1] != _abi.FILE_DONE)
        if not stops:
            return None
        batch, why, code = stops[0]
        if why in (_abi.READ_FAILED, _abi.WRITE_FAILED):
            code = code or errno.EIO   # a write that moved nothing set no errno
            raise (WriteError if why == _abi.WRITE_FAILED else OSError)(code, os.strerror(code))
        if why == _abi.INPUT_ENDED:
            raise EOFError("the input ended before its last batch")
        if why == _abi.STOPPED:
            raise RuntimeError("the file batches were stopped")
        return batch

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


def _wait_for(events: Callable[[], list[threading.Event]]) -> None:
    """Return once every one of events() is set, whatever interrupts the wait (the list made or any wait): a
    signal's exception is raised again after."""
    def wait() -> None:
        for event in events():
            event.wait()
    interrupted = through_signals(wait)
    if interrupted is not None:
        raise interrupted


def _start(mode: int, key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
                  threads: int | None, start: bool) -> FileJob:
    k = key_buffer(key)
    for name, value in (("src_fd", src_fd), ("src_at", src_at), ("dst_fd", dst_fd), ("dst_at", dst_at),
                        ("batches", batches)):
        if type(value) is not int:
            raise TypeError(f"{name} must be an int")
        if value < 0:
            raise ValueError(f"{name} must not be negative")
    workers = threads_for(threads, max(1, batches))
    _loader.warm_up()
    job = FileJob(mode, k, src_fd, src_at, dst_fd, dst_at, batches, workers)
    if start:
        job.start()
    return job


def seal_file(key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
              threads: int | None = None, *, start: bool = True) -> FileJob:
    """Start sealing `batches` batches of FILE_BATCH full chunks, none final, counters from 0.

    Batch b is read from `src_fd` at src_at + b * FILE_BATCH * CHUNK_SIZE and
    written to `dst_fd` at dst_at + b * FILE_BATCH * SEALED_CHUNK_SIZE, with
    pread and pwrite from compiled code on `threads` worker threads (None:
    every CPU), none of which needs the GIL until it ends: the caller's
    thread runs on meanwhile. Returns at once; the caller must wait() or
    stop() before it closes either file. start=False returns the job with its
    workers not started (FileJob.start), for a caller that must own it first.
    """
    return _start(_abi.SEAL, key, src_fd, src_at, dst_fd, dst_at, batches, threads, start)


def open_file(key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
              threads: int | None = None, *, start: bool = True) -> FileJob:
    """Start opening `batches` batches of FILE_BATCH sealed chunks, none final, counters from 0.

    As seal_file, the other way: batch b is read at src_at + b * FILE_BATCH *
    SEALED_CHUNK_SIZE and written at dst_at + b * FILE_BATCH * CHUNK_SIZE,
    only once every chunk of it verified. A worker ends at its first batch
    that does not verify; wait() returns the least such batch. Batches after
    it (other workers') may have been written: verified plaintext, but not to
    be released (agefast.payload.file_driver cuts the output back to written()).
    """
    return _start(_abi.OPEN, key, src_fd, src_at, dst_fd, dst_at, batches, threads, start)
