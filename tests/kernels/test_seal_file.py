"""seal_file: whole batches of one file sealed into another by the compiled file kernel,
checked against agefast.payload.engine's cryptography path; its failures and its stop."""

import contextlib
import ctypes
import errno
import mmap
import os
import random
from collections.abc import Iterator

import pytest

from agefast.payload.engine import choose
from agefast import kernels
from agefast.kernels import _native

BATCH = kernels.FILE_BATCH * kernels.CHUNK_SIZE
SEALED_BATCH = kernels.FILE_BATCH * kernels.SEALED_CHUNK_SIZE
KEY = bytes(range(7, 39))


@pytest.fixture(autouse=True)
def cryptography_reference(engine_setting):
    engine_setting("cryptography")


def reference(plain: bytes) -> bytes:
    if not plain:
        return b""      # no batch: a job stopped before its first (the engine refuses an empty non-final batch)
    sealed = bytearray(len(plain) // kernels.CHUNK_SIZE * kernels.SEALED_CHUNK_SIZE)
    choose(None, None).seal(KEY, 0, plain, sealed, False)
    return bytes(sealed)


@contextlib.contextmanager
def opened(src_path, dst_path, write: bool = True) -> Iterator[tuple[int, int]]:
    """Descriptors of the input and of the output (created), closed on leaving."""
    src = os.open(src_path, os.O_RDONLY)
    try:
        dst = os.open(dst_path, (os.O_RDWR if write else os.O_RDONLY) | os.O_CREAT, 0o600)
        try:
            yield src, dst
        finally:
            os.close(dst)
    finally:
        os.close(src)


def files(tmp_path, data: bytes, write: bool = True):
    (tmp_path / "in").write_bytes(data)
    return opened(tmp_path / "in", tmp_path / "out", write)


# Offsets inside a page and across the file's 32 KiB write boundaries; a batch count below and above the threads.
@pytest.mark.parametrize("threads,batches,src_at,dst_at", [(1, 3, 0, 0), (2, 3, 100, 777), (2, 1, 4095, 32767),
                                                           (3, 4, 5000, 200)])
def test_batches_match_cryptography(tmp_path, threads, batches, src_at, dst_at):
    plain = random.Random(batches).randbytes(batches * BATCH + 9)
    with files(tmp_path, b"h" * src_at + plain) as (src, dst):
        kernels.seal_file(KEY, src, src_at, dst, dst_at, batches, threads).wait()
        written = os.pread(dst, batches * SEALED_BATCH + 1, dst_at)
    # every batch sealed, in place, nothing after the last one (the tail is the caller's)
    assert written == reference(plain[:batches * BATCH])
    assert os.path.getsize(tmp_path / "out") == dst_at + batches * SEALED_BATCH


def test_an_input_shorter_than_its_batches_is_an_eof_error(tmp_path):
    with files(tmp_path, bytes(2 * BATCH - 1)) as (src, dst), pytest.raises(EOFError):
        kernels.seal_file(KEY, src, 0, dst, 0, 2, 2).wait()


# A failed write: the output opened read-only, both workers failing at their
# first write (neither waits for the lock the other held); a failed read: the
# input a directory.
@pytest.mark.parametrize("failing,errno", [("write", 9), ("read", 21)])
def test_a_failed_read_or_write_is_the_oserror_of_its_errno(tmp_path, failing, errno):
    if failing == "write":
        job = files(tmp_path, bytes(3 * BATCH), write=False)
    else:
        os.mkdir(tmp_path / "dir")
        job = opened(tmp_path / "dir", tmp_path / "out")
    with job as (src, dst), pytest.raises(OSError) as failed:
        kernels.seal_file(KEY, src, 0, dst, 0, 3, 2).wait()
    assert failed.value.errno == errno     # EBADF, EISDIR


def test_a_worker_that_raised_fails_the_job(tmp_path, monkeypatch):
    # Its batches were never written: the job must not look done.
    from agefast.kernels import _native

    def no_memory(size):
        raise MemoryError

    monkeypatch.setattr(_native, "page_aligned", no_memory)
    with files(tmp_path, bytes(2 * BATCH)) as (src, dst), pytest.raises(MemoryError):
        kernels.seal_file(KEY, src, 0, dst, 0, 2, 2).wait()


def test_stop_ends_the_workers_before_it_returns(tmp_path):
    batches = 64
    with files(tmp_path, bytes(batches * BATCH)) as (src, dst):
        job = kernels.seal_file(KEY, src, 0, dst, 0, batches, 2)
        job.stop()
        size = os.fstat(dst).st_size
        # Not Thread.is_alive(): a worker that has ended its work may still be ending its thread when stop()
        # returns (under Python 3.13, a third of the time). Whatever it does then, it writes nothing more.
        for thread in job._threads:
            thread.join()
        assert os.fstat(dst).st_size == size    # nothing was written after stop() returned
        with pytest.raises(RuntimeError, match="stopped"):
            job.wait()
    assert size < batches * SEALED_BATCH


def test_stop_interrupted_by_a_signal_still_waits_for_the_workers(tmp_path, monkeypatch):
    # A KeyboardInterrupt inside Thread.join (Python 3.11) marks the thread ended though it runs on: the output
    # was cut back and closed while workers still wrote into it.
    import threading
    import time

    batches = 64
    interrupted = []

    def once(real):
        def wait(*args, **kwargs):
            if not interrupted:
                interrupted.append(True)
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        return wait
    with files(tmp_path, bytes(batches * BATCH)) as (src, dst):
        job = kernels.seal_file(KEY, src, 0, dst, 0, batches, 2)
        monkeypatch.setattr(threading.Event, "wait", once(threading.Event.wait))
        monkeypatch.setattr(threading.Thread, "join", once(threading.Thread.join))
        with pytest.raises(KeyboardInterrupt):
            job.stop()
        monkeypatch.undo()
        size = os.fstat(dst).st_size
        time.sleep(0.2)
        assert os.fstat(dst).st_size == size    # nothing written after stop() ended, interrupted or not


class StopInTheOutput:
    """A job's stop flag kept in the output file's own bytes (through a shared mapping of it): the job
    stops itself once the batch whose ciphertext lands there is written, at no moment a thread picks."""

    def __init__(self, address: int) -> None:
        self.address = address

    def set(self) -> None:
        raise AssertionError("the output stops this job, not stop()")


def test_written_counts_the_leading_batches_written_whole(tmp_path, monkeypatch):
    # Done, every batch; stopped part way, a prefix of them, each whole; a
    # failed write, none; a short input, the batches before the end.
    plain = random.Random(5).randbytes(24 * BATCH)
    with files(tmp_path, plain) as (src, dst):
        job = kernels.seal_file(KEY, src, 0, dst, 0, 6, 2)
        job.wait()
        assert job.written() == 6
        os.ftruncate(dst, 0)
        # Stopped by batch 4's ciphertext: worker 0 (batches 0, 2, 4) ends at 6;
        # worker 1 (1, 3, ...) ends wherever it was, at batch 1 at the soonest.
        # So 1 to 6 leading batches of 24 are written, every run.
        os.ftruncate(dst, 24 * SEALED_BATCH)
        at = 4 * SEALED_BATCH + 64
        assert reference(plain[:5 * BATCH])[at:at + 8] != bytes(8)
        output = mmap.mmap(dst, 24 * SEALED_BATCH)
        try:
            anchor = ctypes.c_char.from_buffer(output)
            start = ctypes.addressof(anchor)
            del anchor      # no export left, so the mapping closes
            monkeypatch.setattr(_native, "Flag", lambda: StopInTheOutput(start + at))
            job = kernels.seal_file(KEY, src, 0, dst, 0, 24, 2)
            with pytest.raises(RuntimeError, match="stopped"):
                job.wait()
            monkeypatch.undo()
            done = job.written()
        finally:
            output.close()
        assert 1 <= done <= 6
        assert os.pread(dst, done * SEALED_BATCH, 0) == reference(plain[:done * BATCH])
    with files(tmp_path, plain[:4 * BATCH], write=False) as (src, dst):
        job = kernels.seal_file(KEY, src, 0, dst, 0, 4, 2)
        with pytest.raises(kernels.WriteError):
            job.wait()
        assert job.written() == 0
    with files(tmp_path, plain[:3 * BATCH - 1]) as (src, dst):
        job = kernels.seal_file(KEY, src, 0, dst, 0, 4, 1)
        with pytest.raises(EOFError):
            job.wait()
        assert job.written() == 2


def test_validation(tmp_path):
    with pytest.raises(ValueError, match="32 bytes"):
        kernels.seal_file(KEY[:31], 0, 0, 1, 0, 1)
    with pytest.raises(TypeError, match="src_fd"):
        kernels.seal_file(KEY, 0.0, 0, 1, 0, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dst_at"):
        kernels.seal_file(KEY, 0, 0, 1, -1, 1)
    with pytest.raises(ValueError, match="threads"):
        kernels.seal_file(KEY, 0, 0, 1, 0, 1, threads=0)


def test_the_least_batch_that_ended_a_worker_is_the_jobs_ending(tmp_path, monkeypatch):
    # A batch that did not verify below one whose write failed (another worker's) had been hidden by the write's
    # error: the wrong error, and a shorter output than the verified prefix. Age, reading in order, meets the
    # lower one first.
    from agefast.kernels import _abi

    with files(tmp_path, random.Random(6).randbytes(2 * BATCH)) as (src, dst):
        job = kernels.seal_file(KEY, src, 0, dst, 0, 2, 2)
        job.wait()
    write_failed = (3, _abi.WRITE_FAILED, errno.EFBIG)
    monkeypatch.setattr(job, "_endings", lambda: [write_failed, (2, _abi.NOT_VERIFIED, 0)])
    assert job.wait() == 2
    monkeypatch.setattr(job, "_endings", lambda: [(4, _abi.NOT_VERIFIED, 0), write_failed])
    with pytest.raises(kernels.WriteError):
        job.wait()
    monkeypatch.setattr(job, "_endings", lambda: [(5, _abi.FILE_DONE, 0), (2, _abi.INPUT_ENDED, 0)])
    with pytest.raises(EOFError):
        job.wait()
