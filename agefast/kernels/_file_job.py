"""seal_file and open_file: whole batches of one file into another, on worker threads in compiled code."""

import errno
import os
import threading
from typing import TYPE_CHECKING, Any

from . import _abi, _loader, _native
from ._batches import key_buffer, threads_for

if TYPE_CHECKING:
    import ctypes

FILE_BATCH = _abi.FILE_BATCH     # chunks in a batch of seal_file and open_file


class FileJob:
    """Whole batches of one file being sealed or opened into another on worker threads (seal_file, open_file)."""

    def __init__(self, mode: int, key: "ctypes.Array[ctypes.c_char]", src_fd: int, src_at: int, dst_fd: int,
                 dst_at: int, batches: int, workers: int) -> None:
        self._stop = _native.Flag()
        self._lock = _native.Mutex()
        # Each worker's (result, errno), or what it raised instead: until it ends, an error.
        self._results: list[tuple[int, int] | BaseException] = [RuntimeError("a file worker did not end")] * workers
        self._threads = [threading.Thread(target=self._work, name="agefast-file-job", daemon=True,
                                          args=(i, key, mode, src_fd, src_at, dst_fd, dst_at, i, workers, batches))
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def _work(self, i: int, *args: Any) -> None:
        try:
            src, dst = _native.page_aligned(_abi.FILE_BUFFER_SIZE), _native.page_aligned(_abi.FILE_BUFFER_SIZE)
            try:
                _native.clear_errno()
                file_batches = _loader.functions().file_batches  # loaded before the threads start
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

    def wait(self) -> int | None:
        """Return once every batch is done: None, or the first batch that did not
        verify (open_file; every batch before it was opened and written).

        Raises OSError for a failed read or write, EOFError where the input
        ended before its last batch (the file shrank while it was read).
        """
        for thread in self._threads:
            thread.join()
        failed = None
        for outcome in self._results:
            if isinstance(outcome, BaseException):
                raise outcome
            result, code = outcome
            if result in (_abi.READ_FAILED, _abi.WRITE_FAILED):
                code = code or errno.EIO   # a write that moved nothing set no errno
                raise OSError(code, os.strerror(code))
            if result == _abi.INPUT_ENDED:
                raise EOFError("the input ended before its last batch")
            if result >= _abi.FAILED_AT:
                # Each worker went through its batches in order up to its
                # first failure, so every batch below the least one verified.
                batch = result - _abi.FAILED_AT
                failed = batch if failed is None else min(failed, batch)
            elif result != _abi.FILE_DONE:
                raise RuntimeError("the file kernel failed" if result < 0 else "the file batches were stopped")
        return failed


def _start(mode: int, key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
                  threads: int | None) -> FileJob:
    k = key_buffer(key)
    for name, value in (("src_fd", src_fd), ("src_at", src_at), ("dst_fd", dst_fd), ("dst_at", dst_at),
                        ("batches", batches)):
        if type(value) is not int:
            raise TypeError(f"{name} must be an int")
        if value < 0:
            raise ValueError(f"{name} must not be negative")
    workers = threads_for(threads, max(1, batches))
    _loader.warm_up()
    return FileJob(mode, k, src_fd, src_at, dst_fd, dst_at, batches, workers)


def seal_file(key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
              threads: int | None = None) -> FileJob:
    """Start sealing `batches` batches of FILE_BATCH full chunks, none final, counters from 0.

    Batch b is read from `src_fd` at src_at + b * FILE_BATCH * CHUNK_SIZE and
    written to `dst_fd` at dst_at + b * FILE_BATCH * SEALED_CHUNK_SIZE, with
    pread and pwrite from compiled code on `threads` worker threads (None:
    every CPU), none of which needs the GIL until it ends: the caller's
    thread runs on meanwhile. Returns at once; the caller must wait() or
    stop() before it closes either file.
    """
    return _start(_abi.SEAL, key, src_fd, src_at, dst_fd, dst_at, batches, threads)


def open_file(key: bytes, src_fd: int, src_at: int, dst_fd: int, dst_at: int, batches: int,
              threads: int | None = None) -> FileJob:
    """Start opening `batches` batches of FILE_BATCH sealed chunks, none final, counters from 0.

    As seal_file, the other way: batch b is read at src_at + b * FILE_BATCH *
    SEALED_CHUNK_SIZE and written at dst_at + b * FILE_BATCH * CHUNK_SIZE,
    only once every chunk of it verified. A worker ends at its first batch
    that does not verify; wait() returns the least such batch. Batches after
    it (other workers') may have been written: verified plaintext, but not to
    be released.
    """
    return _start(_abi.OPEN, key, src_fd, src_at, dst_fd, dst_at, batches, threads)
