"""The overlapped pipeline behind encrypt_io/decrypt_io: order, errors, threads."""

import io
import random
import threading

import pytest

import agefast
from agefast.payload import file_driver, pipeline, rules
from streams import RecordingFile, Trickle, crossing, interrupt_thread_start

BATCH = rules.PIPELINE_BATCH * 64 * 1024
IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()


FIRST = rules.PIPELINE_FIRST * 64 * 1024


@pytest.mark.parametrize("size", [0, 1, FIRST - 1, FIRST, FIRST + 1, FIRST + BATCH, BATCH - 1, BATCH, BATCH + 1,
                                  3 * BATCH, 4 * BATCH + 65536 * 3 + 5])
def test_round_trip_across_batches(size):
    data = random.Random(size).randbytes(size)
    ct = io.BytesIO()
    agefast.encrypt_io(Trickle(data, 1_000_003), ct, [RECIPIENT])
    assert agefast.decrypt(ct.getvalue(), [IDENTITY]) == data
    out = io.BytesIO()
    agefast.decrypt_io(Trickle(ct.getvalue(), 999_983), out, [IDENTITY])
    assert out.getvalue() == data


class FailingWriter(io.RawIOBase):
    def __init__(self, fail_after: int):
        self.written = 0
        self._fail_after = fail_after

    def writable(self):
        return True

    def write(self, b):
        if self.written + len(b) > self._fail_after:
            raise OSError(28, "No space left on device")
        self.written += len(b)
        return len(b)


class FailingReader(Trickle):
    def __init__(self, data, fail_after):
        super().__init__(data)
        self._left = fail_after

    def readinto(self, b):
        if self._left <= 0:
            raise OSError(5, "Input/output error")
        n = super().readinto(memoryview(b)[:self._left])
        self._left -= n
        return n


def threads_settle(before: int) -> bool:
    for t in threading.enumerate():
        if t.name == "agefast-pipeline":
            t.join(timeout=5)
    return threading.active_count() <= before


def test_writer_error_stops_everything():
    before = threading.active_count()
    with pytest.raises(OSError, match="No space"):
        agefast.encrypt_io(Trickle(bytes(5 * BATCH)), FailingWriter(2 * BATCH), [RECIPIENT])
    assert threads_settle(before)


def test_reader_error_stops_everything():
    before = threading.active_count()
    with pytest.raises(OSError, match="Input/output"):
        agefast.encrypt_io(FailingReader(bytes(5 * BATCH), 2 * BATCH + 7), io.BytesIO(), [RECIPIENT])
    assert threads_settle(before)


def test_corrupt_chunk_writes_only_the_verified_prefix():
    data = random.Random(1).randbytes(2 * BATCH)
    ct = bytearray(agefast.encrypt(data, [RECIPIENT]))
    bad_chunk = rules.PIPELINE_BATCH + 3
    ct[len(ct) - len(data) - 16 * (2 * rules.PIPELINE_BATCH) + bad_chunk * 65552 + 9] ^= 1
    out = io.BytesIO()
    with pytest.raises(agefast.errors.PayloadError, match=f"chunk {bad_chunk}"):
        agefast.decrypt_io(Trickle(bytes(ct)), out, [IDENTITY])
    assert out.getvalue() == data[:bad_chunk * 65536]


class NoThreads:
    def __init__(self, *args, **kwargs):
        raise AssertionError("a thread was started")


@pytest.mark.parametrize("size", [0, 1000, FIRST - 1, FIRST])
def test_a_stream_within_the_first_batch_starts_no_thread(size, monkeypatch):
    data = random.Random(size).randbytes(size)
    ct = agefast.encrypt(data, [RECIPIENT])
    monkeypatch.setattr(pipeline.threading, "Thread", NoThreads)
    sealed, opened = io.BytesIO(), io.BytesIO()
    agefast.encrypt_io(io.BytesIO(data), sealed, [RECIPIENT])
    agefast.decrypt_io(io.BytesIO(ct), opened, [IDENTITY])
    assert agefast.decrypt(sealed.getvalue(), [IDENTITY]) == data and opened.getvalue() == data
    with pytest.raises(AssertionError, match="thread"):
        agefast.encrypt_io(io.BytesIO(bytes(FIRST + 1)), io.BytesIO(), [RECIPIENT])


@pytest.mark.parametrize("cut", [16, 65552, 65552 + 16])
def test_truncation_after_the_first_batch(cut):
    # Cut right after the first chunk (which is then not final), or inside the second.
    ct = agefast.encrypt(bytes(3 * 65536), [RECIPIENT])
    header = len(ct) - 3 * 65552
    out = io.BytesIO()
    with pytest.raises(agefast.errors.PayloadError):
        agefast.decrypt_io(io.BytesIO(ct[:header + cut]), out, [IDENTITY])
    assert out.getvalue() == bytes(len(out.getvalue())) and len(out.getvalue()) <= 65536


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_any_number_of_workers_keeps_the_order(threads):
    data = random.Random(threads).randbytes(5 * BATCH + 12345)
    ct = io.BytesIO()
    agefast.encrypt_io(Trickle(data, 777_777), ct, [RECIPIENT], threads=threads)
    assert agefast.decrypt(ct.getvalue(), [IDENTITY], threads=1) == data
    out = io.BytesIO()
    agefast.decrypt_io(io.BytesIO(ct.getvalue()), out, [IDENTITY], threads=threads)
    assert out.getvalue() == data


@pytest.mark.parametrize("prefix", [0, 1, 4095, 12345])
def test_files_read_from_an_offset(tmp_path, prefix):
    # Reads are placed by the file's offset (pipeline.PAGE); what lands must not depend on it.
    data = random.Random(prefix).randbytes(3 * BATCH + 999)
    plain = tmp_path / "plain"
    plain.write_bytes(bytes(prefix) + data)
    sealed = io.BytesIO()
    with open(plain, "rb") as src:
        src.seek(prefix)
        agefast.encrypt_io(src, sealed, [RECIPIENT])
        assert src.read(1) == b""
    bundle = tmp_path / "bundle"
    bundle.write_bytes(bytes(prefix) + sealed.getvalue())
    out = io.BytesIO()
    with open(bundle, "rb") as src:
        src.seek(prefix)
        agefast.decrypt_io(src, out, [IDENTITY])
    assert out.getvalue() == data


class WrongPosition(io.FileIO):
    def tell(self):
        return 3


def test_a_file_that_misreports_its_position_still_round_trips(tmp_path):
    data = random.Random(5).randbytes(2 * BATCH + 5)
    (tmp_path / "plain").write_bytes(data)
    sealed = io.BytesIO()
    with WrongPosition(tmp_path / "plain") as src:
        agefast.encrypt_io(src, sealed, [RECIPIENT])
    (tmp_path / "sealed").write_bytes(sealed.getvalue())
    out = io.BytesIO()
    with WrongPosition(tmp_path / "sealed") as src:
        agefast.decrypt_io(src, out, [IDENTITY])
    assert out.getvalue() == data


@pytest.mark.parametrize("prefix", [0, 100, 4096 + 17])
def test_files_written_from_an_offset(tmp_path, prefix):
    # Outputs are placed by the destination's offset too, and cut at the
    # file's FILE_WRITE_SIZE boundaries (agefast.io.pieces says why), not each
    # batch's; a file already holding data keeps it.
    from agefast.io.pieces import FILE_WRITE_SIZE

    data = random.Random(prefix).randbytes(3 * BATCH + 4321)
    (tmp_path / "plain").write_bytes(data)

    def written(source, target, fill, run):
        raw = RecordingFile(tmp_path / target, "wb")
        with open(tmp_path / source, "rb") as src, io.BufferedWriter(raw) as dst:
            dst.write(fill * prefix)
            run(src, dst)
        # What reached the file: no write crosses a boundary, and there are
        # no more writes than whole pieces, the header and two per batch.
        assert raw.writes and crossing(raw.writes, FILE_WRITE_SIZE) == []
        size = sum(n for _, n in raw.writes)
        assert len(raw.writes) <= size // FILE_WRITE_SIZE + 2 * (size // BATCH + 2)
        return (tmp_path / target).read_bytes()

    sealed = written("plain", "sealed", b"x", lambda s, d: agefast.encrypt_io(s, d, [RECIPIENT]))
    assert sealed[:prefix] == b"x" * prefix
    assert agefast.decrypt(sealed[prefix:], [IDENTITY]) == data
    (tmp_path / "age").write_bytes(sealed[prefix:])
    out = written("age", "out", b"y", lambda s, d: agefast.decrypt_io(s, d, [IDENTITY]))
    assert out == b"y" * prefix + data


def helpers_write_to(monkeypatch):
    """The pipeline's helpers read and write the test's own file objects, as they do Python's files (a file
    object of any other kind is used on the calling thread alone: agefast.io.callers)."""
    monkeypatch.setattr(file_driver, "any_thread", lambda f: True)


@pytest.mark.parametrize("batches", [6, 7])     # the last batch is the helper's in one of the two
def test_a_signal_while_the_helpers_finish_stops_them_before_the_caller_closes_dst(monkeypatch, batches):
    # A KeyboardInterrupt in the join of the helper threads had left them writing their last batches after the
    # caller went on, into a file it had closed (or another given its descriptor).
    import time

    helpers_write_to(monkeypatch)

    class Slow:
        closed = False

        def __init__(self):
            self.late = []

        def write(self, data):
            if threading.current_thread().name == "agefast-pipeline":
                time.sleep(0.05)
            if self.closed:
                self.late.append(len(data))
            return len(data)

    real = threading.Thread.join
    joins = []

    def interrupted_join(thread, *args, **kwargs):
        if thread.name == "agefast-pipeline" and not joins:
            joins.append(thread)
            raise KeyboardInterrupt
        return real(thread, *args, **kwargs)
    monkeypatch.setattr(threading.Thread, "join", interrupted_join)
    dst = Slow()
    data = bytes(batches * BATCH + FIRST)
    with pytest.raises(KeyboardInterrupt):
        agefast.encrypt_io(io.BytesIO(data), dst, [RECIPIENT], threads=2)
    dst.closed = True
    time.sleep(0.5)
    assert joins and dst.late == []


def test_a_signal_while_a_helper_starts_stops_the_helpers_already_running(monkeypatch):
    # Thread.start waits for the thread: a KeyboardInterrupt there left the helpers started before it writing
    # on after seal_stream had raised (64 MiB after 64 KiB, in a review).
    import time

    helpers_write_to(monkeypatch)

    class Recording:
        def __init__(self):
            self.written = 0

        def write(self, data):
            self.written += len(data)
            return len(data)
    started = interrupt_thread_start(monkeypatch, "agefast-pipeline", 2)
    dst = Recording()
    with pytest.raises(KeyboardInterrupt):
        agefast.encrypt_io(io.BytesIO(bytes(40 * BATCH)), dst, [RECIPIENT], threads=4)
    written = dst.written
    for thread in started:
        thread.join(timeout=5)
    time.sleep(0.1)
    assert dst.written == written


def test_a_chunk_that_fails_is_told_while_a_pipe_s_writer_waits():
    # A pipe whose writer has sent enough to reach a damaged chunk and then waits (for an answer, say): a worker
    # blocked reading the next batch held the reading turn, and the worker that found the damage, the calling
    # thread, waited for it, so the PayloadError came only once the writer went on (or never). The writer here
    # pauses inside the damaged batch, so that the next batch's reader is waiting when the damage is found.
    sealed = bytearray(agefast.encrypt(random.Random(5).randbytes(3 * BATCH), [RECIPIENT]))
    header = len(sealed) - rules.sealed_size(3 * BATCH)
    chunks = BATCH // 65536
    sealed[header + (chunks + 5) * (65536 + 16)] ^= 1   # in the second batch (the first chunk is a batch of its own)
    pause = header + (chunks + 10) * (65536 + 16)        # inside the second batch
    sent = header + (2 * chunks + 5) * (65536 + 16)      # the second batch whole, not the third
    for _ in range(6):     # which worker blocks where varies from run to run
        _one_pipe([bytes(sealed[:pause]), bytes(sealed[pause:sent])], chunk=chunks + 5)


def _one_pipe(parts: list[bytes], chunk: int) -> None:
    """decrypt_io from a pipe that is sent `parts` with a pause between them and then left open; it must raise
    the PayloadError of chunk `chunk`."""
    import os
    import select
    import time

    before = set(threading.enumerate())
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)   # the sender never blocks: it stops when told, whatever is unread
    stop = threading.Event()

    def send():
        for i, part in enumerate(parts):
            if i:
                time.sleep(0.5)
            view = memoryview(part)
            while view and not stop.is_set():
                if select.select([], [write_end], [], 0.05)[1]:
                    try:
                        view = view[os.write(write_end, view):]
                    except BlockingIOError:
                        pass

    sending = threading.Thread(target=send, daemon=True)
    raised = []

    def decrypt():
        try:
            agefast.decrypt_io(open(read_end, "rb", closefd=False), io.BytesIO(), [IDENTITY])
        except agefast.errors.PayloadError as e:
            raised.append(e)
    worker = threading.Thread(target=decrypt, daemon=True)
    try:
        sending.start()
        worker.start()
        worker.join(20)
        assert not worker.is_alive(), "decrypt_io waited for the pipe's writer"
        assert len(raised) == 1 and f"chunk {chunk}" in str(raised[0])
    finally:
        stop.set()
        sending.join()
        os.close(write_end)     # a worker still reading meets the end of the pipe
        worker.join()
        # A worker reading at the end must be gone before the descriptor's number can be another pipe's.
        for thread in set(threading.enumerate()) - before:
            if thread.name == "agefast-pipeline":
                thread.join()
        os.close(read_end)
