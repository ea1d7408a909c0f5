"""Streams of every awkward length through encryptor/decryptor, with every
awkward read and write step, and with readers and writers that do less than
they are asked to."""

import errno
import gc
import io
import itertools
import os
import random
import threading
import tracemalloc
import warnings

import pytest

import agefast
from agefast.errors import PayloadError, TruncatedError
from agefast.io.pieces import FILE_WRITE_SIZE, WRITE_SIZE
from agefast.io.writes import write_all
from agefast.payload.engine import Engine, choose
from agefast.payload.rules import CHUNK_SIZE, STREAM_BATCH, next_stream_batch, sealed_size
from agefast.payload.stream import open_batch
from streams import RecordingFile, ShortWriter, Trickle, crossing

CHUNK = 64 * 1024
BATCH = 16 * CHUNK  # the stream's internal batch: its edges matter too
LENGTHS = [0, 1, 7, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 100,
           BATCH - 1, BATCH, BATCH + 1, BATCH + CHUNK]
STEPS = [1, 7, 4096, CHUNK - 1, CHUNK, CHUNK + 1, 1 << 20]

IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()


def plaintext(n: int) -> bytes:
    return random.Random(n).randbytes(n)


def cases():
    for length in LENGTHS:
        for step in STEPS:
            # One-byte steps over a megabyte only measure Python call overhead.
            if step == 1 and length > 3 * CHUNK + 100:
                continue
            yield pytest.param(length, step, id=f"{length}-{step}")


@pytest.mark.parametrize("length,step", list(cases()))
def test_write_steps(length, step):
    data = plaintext(length)
    out = ShortWriter(step)
    with agefast.encryptor(out, [RECIPIENT]) as w:
        for i in range(0, length, step):
            assert w.write(data[i:i + step]) == len(data[i:i + step])
    assert agefast.decrypt(bytes(out.out), [IDENTITY]) == data


@pytest.mark.parametrize("length,step", list(cases()))
def test_read_steps(length, step):
    data = plaintext(length)
    ct = agefast.encrypt(data, [RECIPIENT])
    got = bytearray()
    r = agefast.decryptor(Trickle(ct, step), [IDENTITY])
    while chunk := r.read(step):
        assert len(chunk) <= step
        got += chunk
    assert got == data


@pytest.mark.parametrize("length", LENGTHS)
def test_armored_streams(length):
    data = plaintext(length)
    out = io.BytesIO()
    with agefast.encryptor(out, [RECIPIENT], armored=True) as w:
        w.write(data)
    assert out.getvalue().startswith(b"-----BEGIN AGE ENCRYPTED FILE-----\n")
    assert agefast.decryptor(Trickle(out.getvalue(), 4093), [IDENTITY]).read() == data


def test_io_functions_and_files(tmp_path):
    data = plaintext(3 * CHUNK + 100)
    (tmp_path / "plain").write_bytes(data)
    agefast.encrypt_file(str(tmp_path / "plain"), str(tmp_path / "ct"), [RECIPIENT])
    agefast.decrypt_file(str(tmp_path / "ct"), str(tmp_path / "back"), [IDENTITY])
    assert (tmp_path / "back").read_bytes() == data
    out = io.BytesIO()
    agefast.decrypt_io(io.BytesIO((tmp_path / "ct").read_bytes()), out, [IDENTITY])
    assert out.getvalue() == data
    ct = io.BytesIO()
    agefast.encrypt_io(Trickle(data, 999), ct, [RECIPIENT], armored=True)
    assert agefast.decrypt(ct.getvalue(), [IDENTITY]) == data


def test_readinto_unaligned_memoryview():
    data = plaintext(2 * CHUNK + 3)
    r = agefast.decryptor(io.BytesIO(agefast.encrypt(data, [RECIPIENT])), [IDENTITY])
    buf = bytearray(len(data) + 5)
    view = memoryview(buf)[3:]
    n = 0
    while got := r.readinto(view[n:n + 12345]):
        n += got
    assert bytes(view[:n]) == data


def test_encryptor_leaves_dst_open_unless_asked():
    out = io.BytesIO()
    with agefast.encryptor(out, [RECIPIENT]) as w:
        w.write(b"hello")
    assert not out.closed
    with agefast.encryptor(out, [RECIPIENT], close_dst=True) as w:
        w.write(b"hello")
    assert out.closed


class _Full(io.BytesIO):
    """A destination whose writes fail past its first KiB (the header's), as a full disk's."""

    def write(self, data):
        if self.tell() + len(data) > 1024:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


@pytest.mark.parametrize("how", ["abort", "with block left by an exception", "failed write", "collected"])
def test_close_dst_closes_dst_however_the_encryptor_ends(how):
    # Only a finished encryptor closed its dst: an aborted or failed one, or one collected unclosed, left it open,
    # a descriptor lost per file (found by a probe of the API).
    out = _Full() if how == "failed write" else io.BytesIO()
    w = agefast.encryptor(out, [RECIPIENT], close_dst=True)
    if how == "abort":
        w.abort()
    elif how == "with block left by an exception":
        with pytest.raises(RuntimeError), w:
            raise RuntimeError("interrupted")
    elif how == "failed write":
        with pytest.raises(OSError):
            w.write(plaintext(40 * CHUNK))     # more than a batch: sealed and written
        with pytest.raises(agefast.EncryptError, match="was not finished"):
            w.close()
    else:
        del w
        gc.collect()
    assert out.closed


def test_close_dst_leaves_dst_open_where_the_encryptor_was_not_made():
    # The encryptor that raised was never the caller's: its dst is as it was handed over, as a decryptor's src.
    out = _Full(bytes(2048))
    out.seek(2048)      # past _Full's first KiB: the header's write fails
    with pytest.raises(OSError):
        agefast.encryptor(out, [RECIPIENT], close_dst=True)
    gc.collect()
    assert not out.closed


def test_interrupted_encryptor_output_never_decrypts():
    out = io.BytesIO()
    with pytest.raises(RuntimeError):
        with agefast.encryptor(out, [RECIPIENT]) as w:
            w.write(plaintext(CHUNK + 10))
            raise RuntimeError("interrupted")
    with pytest.raises(agefast.errors.PayloadError):
        agefast.decrypt(out.getvalue(), [IDENTITY])
    with pytest.raises(agefast.EncryptError):
        w.write(b"more")


def test_multiple_recipients_and_identities():
    others = [agefast.x25519.Identity.generate() for _ in range(3)]
    ct = agefast.encrypt(b"to many", [o.to_public() for o in others] + [RECIPIENT])
    assert agefast.decrypt(ct, [agefast.x25519.Identity.generate(), IDENTITY]) == b"to many"


@pytest.mark.parametrize("pieces", [[3 * BATCH + 5], [10, 3 * BATCH], [BATCH + 1, BATCH - 1, 2 * BATCH],
                                    [2 * BATCH], [2 * BATCH + 1]])
def test_writes_larger_than_a_batch(pieces):
    # Whole batches of a large write are sealed from the caller's buffer.
    data = plaintext(sum(pieces))
    out = io.BytesIO()
    with agefast.encryptor(out, [RECIPIENT]) as w:
        pos = 0
        for size in pieces:
            w.write(data[pos:pos + size])
            pos += size
    r = agefast.decryptor(Trickle(out.getvalue()), [IDENTITY])
    buf = bytearray(len(data) + 10)
    n = 0
    while got := r.readinto(memoryview(buf)[n:]):
        n += got
    assert buf[:n] == data


def test_a_streams_batches_grow_from_one_chunk_to_a_whole_batch():
    chunks = [1]
    while len(chunks) < 6:
        chunks.append(next_stream_batch(chunks[-1]))
    assert chunks == [1, 2, 4, 8, 16, 16] and STREAM_BATCH == 16


# Where a writer's batches of small writes grow (1, 2, 4, 8, then 16 chunks: after 1, 3, 7 and 15).
GROWTH_EDGES = [n * CHUNK + d for n in (1, 3, 7, 15, 31) for d in (-1, 0, 1)]


@pytest.mark.parametrize("step", [4096, CHUNK, 3 * CHUNK, BATCH])
@pytest.mark.parametrize("length", GROWTH_EDGES)
def test_writes_across_the_growing_batches(length, step):
    data = plaintext(length)
    out = io.BytesIO()
    with agefast.encryptor(out, [RECIPIENT]) as w:
        w.write(data[:100])     # a small write first: the batches start at one chunk
        for i in range(100, length, step):
            w.write(data[i:i + step])
    assert agefast.decrypt(out.getvalue(), [IDENTITY]) == data


def test_a_small_stream_holds_a_chunk_not_a_batch():
    # An encryptor of a small file held buffers for a whole batch (2 MiB, cleared), most of a 1 KiB file's
    # encryption to armor in memory.
    agefast.encrypt(b"first", [RECIPIENT], armored=True)     # what a first use imports, not traced
    out = io.BytesIO()
    tracemalloc.start()
    try:
        with agefast.encryptor(out, [RECIPIENT], armored=True) as w:
            w.write(plaintext(1024))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * CHUNK
    assert agefast.decrypt(out.getvalue(), [IDENTITY]) == plaintext(1024)


class NonBlocking(io.RawIOBase):
    """A non-blocking reader, like a pipe opened with O_NONBLOCK: past the
    header, every third call has nothing for now (None)."""

    def __init__(self, data: bytes, step: int):
        self._data = memoryview(data)
        self._step = step
        self._calls = 0
        self._header_left = 1024

    def readable(self):
        return True

    def readinto(self, b):
        self._calls += 1
        if self._header_left <= 0 and self._calls % 3 == 0:
            return None
        n = min(len(b), self._step, len(self._data))
        b[:n] = self._data[:n]
        self._data = self._data[n:]
        self._header_left -= n
        return n


@pytest.mark.parametrize("step", [100, 65552, 1 << 20])
def test_non_blocking_source_resumes_after_blocking_io_error(step):
    # decryptor() needs the header; after that, reads that find nothing raise
    # BlockingIOError and a retry carries on where they stopped.
    data = plaintext(2 * BATCH + 3)
    r = agefast.decryptor(NonBlocking(agefast.encrypt(data, [RECIPIENT]), step), [IDENTITY])
    got = bytearray()
    while True:
        try:
            chunk = r.read(300_000)
        except BlockingIOError:
            continue
        if not chunk:
            break
        got += chunk
    assert got == data


class DryOnce(io.RawIOBase):
    """A non-blocking reader that has nothing for now (None) once, at `dry`, until told it has more."""

    def __init__(self, data: bytes, dry: int):
        self._data = io.BytesIO(data)
        self._dry = dry
        self.ready = False

    def readable(self):
        return True

    def readinto(self, b):
        at = self._data.tell()
        if at >= self._dry and not self.ready:
            return None
        return self._data.readinto(memoryview(b)[:len(b) if self.ready else self._dry - at])


def test_a_read_of_all_that_finds_the_source_dry_returns_what_it_read():
    # read() gathered the plaintext of three batches, then dropped it with the BlockingIOError: the retry went on
    # after it and the stream ended as if whole.
    data = plaintext(3 * BATCH + 5)
    sealed = agefast.encrypt(data, [RECIPIENT])
    source = DryOnce(sealed, len(sealed) - 1000)
    reader = agefast.decryptor(source, [IDENTITY])
    got = reader.read()
    assert got == data[:len(got)] and len(got) > 2 * BATCH
    with pytest.raises(BlockingIOError):
        reader.read()   # nothing read: nothing to return
    source.ready = True
    assert got + reader.read() == data


def test_a_read_only_buffer_is_refused_before_the_source_is_read():
    # The chunks taken from a non-seekable source for it were lost: the next read failed an intact file.
    data = plaintext(CHUNK + 10)
    reader = agefast.decryptor(Trickle(agefast.encrypt(data, [RECIPIENT]), 1 << 20), [IDENTITY])
    with pytest.raises(TypeError, match="writable"):
        reader.readinto(bytes(CHUNK + 10))
    assert reader.read() == data


@pytest.mark.parametrize("source", ["seekable", "stream", "armored"])
def test_lines_are_read_a_line_a_call_through_peek(source, monkeypatch):
    # IOBase.readline read a byte a call without a peek: a MB of short lines took 2 s.
    text = b"".join(b"line %05d\n" % k for k in range(3000)) + b"no newline at the end"
    sealed = agefast.encrypt(text, [RECIPIENT], armored=source == "armored")
    make = (lambda: io.BytesIO(sealed)) if source == "seekable" else (lambda: Trickle(sealed, 1 << 20))
    reads = []
    readinto = agefast.Decryptor.readinto
    monkeypatch.setattr(agefast.Decryptor, "readinto", lambda self, b: reads.append(len(b)) or readinto(self, b))
    assert list(agefast.decryptor(make(), [IDENTITY])) == text.splitlines(keepends=True)
    assert len(reads) <= 3001 + 2
    reader = agefast.decryptor(make(), [IDENTITY])
    assert reader.peek().startswith(b"line 00000\n") and reader.read(5) == b"line "
    assert reader.peek(1).startswith(b"00000\nline") and reader.readline() == b"00000\n"
    reader.read()
    assert reader.peek() == b""


@pytest.mark.parametrize("seekable", [True, False])
def test_a_peek_at_a_damaged_chunk_fails_as_a_read_there_does(seekable):
    data = plaintext(2 * CHUNK + 10)
    sealed = bytearray(agefast.encrypt(data, [RECIPIENT]))
    sealed[len(sealed) - sealed_size(2 * CHUNK + 10) + (CHUNK + 16) + 3] ^= 1   # chunk 1
    reader = agefast.decryptor(io.BytesIO(sealed) if seekable else Trickle(bytes(sealed)), [IDENTITY])
    assert reader.read(CHUNK) == data[:CHUNK]
    with pytest.raises(PayloadError, match="chunk 1"):
        reader.peek()
    with pytest.raises(PayloadError, match="chunk 1"):
        reader.read(1)


def test_a_peek_that_finds_the_source_dry_loses_nothing():
    data = plaintext(3 * BATCH + 5)
    sealed = agefast.encrypt(data, [RECIPIENT])
    source = DryOnce(sealed, len(sealed) - 1000)
    reader = agefast.decryptor(source, [IDENTITY])
    got = bytearray()
    while True:
        try:
            peeked = reader.peek()
        except BlockingIOError:
            source.ready = True
            continue
        if not peeked:
            break
        assert reader.read(len(peeked)) == peeked
        got += peeked
    assert got == data


class LargestWrite(io.RawIOBase):
    """A writer that remembers the largest single write it was handed."""

    def __init__(self):
        self.out = bytearray()
        self.largest = 0

    def writable(self):
        return True

    def write(self, b):
        self.largest = max(self.largest, len(b))
        self.out += b
        return len(b)


def test_no_write_exceeds_write_size(tmp_path):
    # The pipeline (encrypt_io/decrypt_io) and the encryptor's large writes
    # both reach the destination in pieces of at most io.writes.WRITE_SIZE.
    data = plaintext(5 * WRITE_SIZE + 7)
    sealed = LargestWrite()
    agefast.encrypt_io(io.BytesIO(data), sealed, [RECIPIENT])
    opened = LargestWrite()
    agefast.decrypt_io(io.BytesIO(bytes(sealed.out)), opened, [IDENTITY])
    streamed = LargestWrite()
    with agefast.encryptor(streamed, [RECIPIENT]) as w:
        w.write(data)
    assert opened.out == data and agefast.decrypt(bytes(streamed.out), [IDENTITY]) == data
    assert 0 < max(sealed.largest, opened.largest, streamed.largest) <= WRITE_SIZE


@pytest.mark.parametrize("at", [0, 1, 200, FILE_WRITE_SIZE - 1, FILE_WRITE_SIZE, 4 * FILE_WRITE_SIZE + 1])
def test_write_all_cuts_pieces_at_the_files_write_size_boundaries(at):
    data = plaintext(3 * WRITE_SIZE + 5)
    whole = ShortWriter(len(data))
    write_all(whole, data, at)
    first = FILE_WRITE_SIZE - at % FILE_WRITE_SIZE
    rest = len(data) - first
    tail = [rest % FILE_WRITE_SIZE] if rest % FILE_WRITE_SIZE else []
    assert whole.lengths == [first] + [FILE_WRITE_SIZE] * (rest // FILE_WRITE_SIZE) + tail
    # A writer that takes part of each piece: the rest of the piece still ends on the boundary.
    partial = ShortWriter(1000)
    write_all(partial, data, at)
    assert partial.out == data
    lengths = partial.lengths
    assert crossing(list(zip(itertools.accumulate(lengths, initial=at), lengths)), FILE_WRITE_SIZE) == []


def test_write_all_without_an_offset_writes_larger_pieces():
    # Not a file at a known offset (a pipe, the armor writer, memory): fewer, larger calls.
    data = plaintext(3 * WRITE_SIZE + 5)
    whole = ShortWriter(len(data))
    write_all(whole, data)
    assert whole.lengths == [WRITE_SIZE] * 3 + [5]


@pytest.mark.parametrize("prefix", [0, 100, 4096 + 17])
def test_an_encryptor_onto_a_file_keeps_to_write_size_boundaries(tmp_path, prefix):
    data = plaintext(40 * 65536 + 99)
    with RecordingFile(tmp_path / "sealed", "wb") as dst:
        dst.write(b"x" * prefix)
        dst.writes.clear()
        with agefast.encryptor(dst, [RECIPIENT]) as w:
            for at in range(0, len(data), 3 << 20):     # batches whole and in part
                w.write(data[at:at + (3 << 20)])
    assert dst.writes and crossing(dst.writes, FILE_WRITE_SIZE) == []
    assert agefast.decrypt((tmp_path / "sealed").read_bytes()[prefix:], [IDENTITY]) == data


class CountingEngine(Engine):
    """The cryptography engine, counting the chunks it is asked to open."""

    def __init__(self) -> None:
        super().__init__(None, 1)
        self.batches: list[int] = []    # the chunks of each call

    @property
    def opened(self) -> int:
        return sum(self.batches)

    def open(self, key, counter, src, dst, final, split=True):
        self.batches.append(-(-len(memoryview(src)) // (CHUNK + 16)))
        return super().open(key, counter, src, dst, final, split)


@pytest.mark.parametrize("chunks", [1, 2, 17])
def test_a_full_final_chunk_is_opened_once(chunks):
    # Where a batch ends the payload with a whole chunk, that chunk can only
    # be the final one: it is opened as such, not first as a middle chunk.
    key = bytes(range(32))
    data = plaintext(chunks * CHUNK)
    sealed = bytearray(chunks * (CHUNK + 16))
    Engine(None, 1).seal(key, 0, data, sealed, True)
    engine = CountingEngine()
    plain = bytearray(len(data))
    assert open_batch(engine, key, 0, sealed, plain, True) == (chunks, len(data), None)
    assert plain == data and engine.opened == chunks
    # A payload cut after a middle chunk still says so, and releases what verified.
    cut = sealed[:(chunks - 1) * (CHUNK + 16)] if chunks > 1 else None
    if cut is not None:
        done, size, problem = open_batch(CountingEngine(), key, 0, cut, plain, True)
        assert (done, size, type(problem), str(problem)) == (
            chunks - 1, (chunks - 1) * CHUNK, TruncatedError,
            f"the file is truncated: it ends after chunk {chunks - 2}, without a final chunk")


@pytest.mark.parametrize("damaged", [None, 0, 7, 15])
def test_a_payload_ending_in_a_full_chunk_is_opened_as_one_batch(damaged):
    # The engine splits a batch over threads only whole (KERNEL_SPLIT_BATCH):
    # 16 full chunks reach it in one call, the last as the final one. A damaged
    # chunk is still named, with the chunks before it released.
    key = bytes(range(32))
    data = plaintext(16 * CHUNK)
    sealed = bytearray(16 * (CHUNK + 16))
    Engine(None, 1).seal(key, 0, data, sealed, True)
    if damaged is not None:
        sealed[damaged * (CHUNK + 16) + 100] ^= 1
    engine = CountingEngine()
    plain = bytearray(len(data))
    done, size, problem = open_batch(engine, key, 0, sealed, plain, True)
    assert engine.batches[0] == 16
    if damaged is None:
        assert (done, size, problem, engine.batches) == (16, len(data), None, [16])
        assert plain == data
    else:
        assert (done, size, type(problem), str(problem)) == (
            damaged, damaged * CHUNK, PayloadError, f"failed to authenticate payload chunk {damaged}")
        assert plain[:size] == data[:size]


@pytest.mark.parametrize("length", [0, 1, 1000, CHUNK - 1, CHUNK])
def test_a_lone_chunk_is_sealed_and_opened_as_the_batch_path_does(length):
    # encrypt and decrypt take a one-chunk payload by one engine call; on
    # the job's engine (the kernels, where AGEFAST_ENGINE=numba forces them:
    # test_engine_formats) it is the batch path's chunk 0, final.
    key = bytes(range(32))
    data = plaintext(length)
    sealed = bytearray(length + 16)
    Engine(None, 1).seal(key, 0, data, sealed, True)
    engine = choose(length, None)
    assert engine.seal_lone(key, memoryview(data)) == sealed
    assert engine.open_lone(key, memoryview(bytes(sealed))) == data
    for damaged in (0, length // 2, length + 15):
        sealed[damaged] ^= 1
        assert engine.open_lone(key, memoryview(bytes(sealed))) is None
        sealed[damaged] ^= 1


def test_an_encryptor_whose_destination_failed_writes_and_seals_nothing_more():
    # Which chunks reached dst is not known after a failed write: going on would seal the next plaintext under
    # chunk numbers dst already has (the same keystream twice, found by this session's probe with a full
    # non-blocking pipe). Every later write and the close raise, and dst gets nothing more.
    identity = agefast.x25519.Identity.generate()

    class Failing:
        def __init__(self):
            self.out, self.failing = bytearray(), False

        def write(self, data):
            if self.failing:
                raise BlockingIOError(11, "would block", 0)
            self.out += data
            return len(data)

    dst = Failing()
    enc = agefast.encryptor(dst, [identity.to_public()])
    enc.write(bytes(3 << 20))
    dst.failing = True
    with pytest.raises(BlockingIOError):
        enc.write(bytes(2 << 20))
    written = len(dst.out)
    dst.failing = False
    with pytest.raises(agefast.errors.EncryptError, match="write to an encryptor that failed"):
        enc.write(bytes(1 << 20))
    with pytest.raises(agefast.errors.EncryptError, match="the file was not finished"):
        enc.close()
    assert len(dst.out) == written and enc.closed
    with pytest.raises(PayloadError):
        agefast.decrypt(bytes(dst.out), [identity])


class _Claiming:
    """A writer that keeps what it is given and reports `report(n)` bytes written."""

    def __init__(self, report):
        self.out, self.report = bytearray(), report

    def write(self, data):
        self.out += data
        return self.report(len(data))


class _OverReading(io.BytesIO):
    def readinto(self, b):
        n = super().readinto(b)
        return n + 5 if n else 0


class _OverRead(io.BytesIO):
    readinto = None

    def read(self, n=-1):
        return super().read(n + 7)


@pytest.mark.parametrize("case", ["write more", "write none", "readinto more", "readinto -1", "read more"])
def test_a_count_a_reader_or_writer_cannot_have_meant_is_an_error(case):
    # As Python's buffered I/O checks a raw stream's counts: trusted, they skipped or repeated data (a file of
    # other plaintext, a wrong output) or looped for ever (found by this session's third probe).
    identity = agefast.x25519.Identity.generate()
    plain = bytes(range(256)) * 800
    sealed = agefast.encrypt(plain, [identity.to_public()])
    runs = {
        "write more": lambda: agefast.decrypt_io(io.BytesIO(sealed), _Claiming(lambda n: n + 5), [identity]),
        "write none": lambda: agefast.encrypt_io(io.BytesIO(plain), _Claiming(lambda n: 0), [identity.to_public()]),
        "readinto more": lambda: agefast.encrypt_io(_OverReading(plain), io.BytesIO(), [identity.to_public()]),
        "readinto -1": lambda: agefast.encrypt_io(type("Negative", (io.BytesIO,), {"readinto": lambda s, b: -1})(),
                                                  io.BytesIO(), [identity.to_public()]),
        "read more": lambda: agefast.decryptor(_OverRead(sealed), [identity]).read(),
    }
    with pytest.raises(OSError, match=r"returned -?\d+ (bytes )?for"):
        runs[case]()


@pytest.mark.parametrize("ready", [120_000, 200_000, 333_333])
def test_an_armored_file_from_a_non_blocking_source_reads_whole_when_retried(ready):
    # Lines already decoded when the source ran dry were lost with the BlockingIOError, and the retry failed a
    # valid file (found by this session's third probe): they are handed out first now.
    identity = agefast.x25519.Identity.generate()
    plain = bytes(random.Random(ready).randbytes(300_000))
    armored = agefast.encrypt(plain, [identity.to_public()], armored=True)

    class NonBlocking:
        def __init__(self):
            self.pos, self.ready = 0, ready

        def readinto(self, b):
            if self.pos >= self.ready:
                return 0 if self.pos >= len(armored) else None
            n = min(len(b), self.ready - self.pos)
            b[:n] = armored[self.pos:self.pos + n]
            self.pos += n
            return n

    src = NonBlocking()
    reader = agefast.decryptor(src, [identity])
    out = bytearray()
    while True:
        try:
            piece = reader.read(65536)
        except BlockingIOError:
            src.ready = len(armored)
            continue
        if not piece:
            break
        out += piece
    assert out == plain


def test_an_encryptor_given_no_buffer_goes_on():
    identity = agefast.x25519.Identity.generate()
    out = io.BytesIO()
    enc = agefast.encryptor(out, [identity.to_public()])
    enc.write(b"before ")
    with pytest.raises(TypeError):
        enc.write("not bytes")
    enc.write(b"after")
    enc.close()
    assert agefast.decrypt(out.getvalue(), [identity]) == b"before after"


def _sealed(dst, identity):
    """Whether the age file in `dst` decrypts (it was sealed), False where it was left unfinished."""
    try:
        agefast.decrypt(dst.getvalue(), [identity])
    except PayloadError:
        return False
    return True


def test_what_a_wrapper_collected_unclosed_closes_is_not_sealed():
    # io.TextIOWrapper and io.BufferedWriter close what they wrap from their finalizers: that close had sealed
    # a file never closed as complete.
    import gc

    identity = agefast.x25519.Identity.generate()
    recipients = [identity.to_public()]
    for wrap in (io.TextIOWrapper, io.BufferedWriter, lambda e: io.TextIOWrapper(io.BufferedWriter(e))):
        dst = io.BytesIO()
        wrap(agefast.encryptor(dst, recipients)).write(b"never closed" if wrap is io.BufferedWriter else "never")
        gc.collect()
        assert not _sealed(dst, identity)
        dst = io.BytesIO()
        with wrap(agefast.encryptor(dst, recipients)) as closed:
            closed.write(b"closed" if wrap is io.BufferedWriter else "closed")
        assert _sealed(dst, identity)


def test_a_close_of_the_users_seals_wherever_it_is_called():
    # In an except clause of an exception the loop ended on (StopIteration, EOFError, a cache miss), or in a
    # generator's finally as it is closed: the user's own close, which seals.
    identity = agefast.x25519.Identity.generate()
    recipients = [identity.to_public()]
    in_except, in_generator = io.BytesIO(), io.BytesIO()
    enc = agefast.encryptor(in_except, recipients)
    pieces = iter([b"a", b"b"])
    while True:
        try:
            enc.write(next(pieces))
        except StopIteration:
            enc.close()
            break

    def sink():
        enc = agefast.encryptor(in_generator, recipients)
        try:
            while True:
                enc.write((yield))
        finally:
            enc.close()
    g = sink()
    next(g)
    g.send(b"piece")
    g.close()
    assert agefast.decrypt(in_except.getvalue(), [identity]) == b"ab"
    assert agefast.decrypt(in_generator.getvalue(), [identity]) == b"piece"


def test_writes_from_two_threads_take_turns():
    # Two writes at once had sealed two chunks under one number: the same keystream twice.
    import threading

    identity = agefast.x25519.Identity.generate()
    dst = io.BytesIO()
    enc = agefast.encryptor(dst, [identity.to_public()], threads=2)
    piece = 2 << 20

    def writer(byte):
        for _ in range(6):
            enc.write(bytes([byte]) * piece)
    threads = [threading.Thread(target=writer, args=(b,)) for b in (0x00, 0xFF)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    enc.close()
    plain = agefast.decrypt(dst.getvalue(), [identity])
    pieces = [plain[i:i + piece] for i in range(0, len(plain), piece)]
    assert len(pieces) == 12 and sorted(p[0] for p in pieces) == [0x00] * 6 + [0xFF] * 6
    assert all(p == bytes([p[0]]) * piece for p in pieces)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_child_cannot_write_or_finish_its_parents_encryptor(tmp_path):
    # Parent and child had each sealed their own plaintext under the same chunk numbers.
    identity = agefast.x25519.Identity.generate()
    dst = io.BytesIO()
    enc = agefast.encryptor(dst, [identity.to_public()])
    enc.write(b"before the fork")
    pid = os.fork()
    if pid == 0:
        said = []
        for call in (lambda: enc.write(b"the child's"), enc.finish):
            try:
                call()
                said.append("sealed")
            except agefast.EncryptError as e:
                said.append(str(e))
        (tmp_path / "child").write_text("\n".join(said))
        os._exit(0)
    os.waitpid(pid, 0)
    assert (tmp_path / "child").read_text().splitlines() == [
        "an encryptor made before this process forked is the parent's: its chunk numbers would seal two "
        "plaintexts"] * 2
    enc.write(b", and after")
    enc.close()
    assert agefast.decrypt(dst.getvalue(), [identity]) == b"before the fork, and after"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_child_forked_while_a_thread_wrote_is_refused_not_hung(tmp_path):
    # The write lock is copied into the child held by a thread the child does not have.
    import threading

    enc = agefast.encryptor(io.BytesIO(), [agefast.x25519.Identity.generate().to_public()])
    holding, release = threading.Event(), threading.Event()

    def writer():
        with enc._turn:      # as a write in progress holds it
            holding.set()
            release.wait()
    t = threading.Thread(target=writer)
    t.start()
    holding.wait()
    pid = os.fork()
    if pid == 0:
        said = []
        for call in (lambda: enc.write(b"x"), enc.finish, enc.abort):
            try:
                call()
                said.append("returned")
            except agefast.EncryptError:
                said.append("refused")
        (tmp_path / "child").write_text(" ".join(said))
        os._exit(0)
    import time

    deadline = time.monotonic() + 30
    while os.waitpid(pid, os.WNOHANG) == (0, 0):     # a child that hangs fails the test, not the run
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            break
        time.sleep(0.01)
    release.set()
    t.join()
    assert (tmp_path / "child").read_text() == "refused refused returned"


def test_closed_streams_answer_as_python_s_files_and_a_decryptor_is_not_written():
    identity = agefast.x25519.Identity.generate()
    sealed = agefast.encrypt(b"x", [identity.to_public()])
    decryptor = agefast.decryptor(io.BytesIO(sealed), [identity])
    with pytest.raises(io.UnsupportedOperation, match="a decryptor is read, not written"):
        decryptor.write(b"x")   # a bare NotImplementedError before
    reader = agefast.EncryptingReader(io.BytesIO(b"x"), [identity.to_public()])
    encryptor = agefast.encryptor(io.BytesIO(), [identity.to_public()])
    assert decryptor.read() == b"x"     # at its end
    for stream in (decryptor, reader, encryptor):
        stream.close()
        for ask in ("readable", "writable", "seekable"):
            with pytest.raises(ValueError, match="I/O operation on a closed"):
                getattr(stream, ask)()
    # Reads too, as on a closed file: a closed decryptor at its end read b"". (A write is an EncryptError, as
    # after a failure: docs/errors.md.)
    for read in (decryptor.read, decryptor.readall, reader.read, reader.readall):
        with pytest.raises(ValueError, match="closed"):
            read()


def test_a_writer_collected_unclosed_is_warned_of_as_python_s_files_are():
    # The file is left unfinished (aborted, as before), now with the ResourceWarning Python gives an unclosed file.
    recipient = agefast.x25519.Identity.generate().to_public()
    for wrap, data in ((lambda e: e, b"x"), (io.TextIOWrapper, "x")):
        with pytest.warns(ResourceWarning, match="unclosed Encryptor: its file was left unfinished"):
            stream = wrap(agefast.encryptor(io.BytesIO(), [recipient]))
            stream.write(data)
            del stream
            gc.collect()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with agefast.encryptor(io.BytesIO(), [recipient]) as closed:
            closed.write(b"x")
        with pytest.raises(TypeError):
            agefast.encryptor("not a file", [recipient])    # refused: never the caller's to close
        del closed
        gc.collect()
    assert [w for w in seen if issubclass(w.category, ResourceWarning)] == []


def test_a_read_that_fails_after_whole_chunks_releases_what_age_releases():
    # age reads each chunk and one byte more, which tells a middle chunk from the final one: a read failing
    # right after three whole chunks has let it open two. The third had been released too.
    sealed = agefast.encrypt(bytes(10 * CHUNK), [IDENTITY.to_public()])
    cut = len(sealed) - 7 * (CHUNK + 16)

    class Failing(io.RawIOBase):
        pos = 0

        def readable(self):
            return True

        def readinto(self, b):
            if self.pos >= cut:
                raise OSError(5, "the disk failed")
            n = min(len(b), cut - self.pos, 4096)
            b[:n] = sealed[self.pos:self.pos + n]
            self.pos += n
            return n

    released = bytearray()
    with pytest.raises(OSError, match="the disk failed"):
        reader = agefast.decryptor(Failing(), [IDENTITY])
        while piece := reader.read(4096):
            released += piece
    assert len(released) == 2 * CHUNK


class _CallingBack(io.RawIOBase):
    """A dst whose first write of the payload calls `back` (the encryptor's own method), as a signal handler or a
    logger that writes into the file it logs to would, on the same thread."""

    def __init__(self, back_name):
        self.out, self.back_name, self.encryptor, self.called = bytearray(), back_name, None, None

    def writable(self):
        return True

    def write(self, b):
        if self.encryptor is not None and self.called is None:
            try:
                self.called = getattr(self.encryptor, self.back_name)(*([b"x"] if self.back_name == "write" else []))
            except RuntimeError as e:
                self.called = e
        self.out += b
        return len(b)


@pytest.mark.parametrize("back", ["write", "finish", "flush", "abort"])
def test_a_call_inside_a_write_on_its_own_thread(back):
    # It had waited for itself for ever (a plain lock): abort() from a SIGTERM handler hung the process. Now a
    # write or finish inside raises RuntimeError, as io.BufferedWriter's; a flush does nothing; an abort ends
    # the stream unsealed, the write it interrupted going on.
    dst = _CallingBack(back)
    w = agefast.encryptor(dst, [RECIPIENT])
    dst.encryptor = w
    writer = threading.Thread(target=w.write, args=(plaintext(3 * CHUNK_SIZE),), daemon=True)
    writer.start()
    writer.join(60)
    assert not writer.is_alive(), "the call inside the write waits for the write"
    if back in ("write", "finish"):
        assert isinstance(dst.called, RuntimeError) and "reentrant call" in str(dst.called)
    else:
        assert dst.called is None
    if back != "abort":     # refused (or nothing to do) before anything moved: the write it was inside goes on
        w.close()
        assert agefast.decrypt(bytes(dst.out), [IDENTITY]) == plaintext(3 * CHUNK_SIZE)
        return
    with pytest.raises(agefast.EncryptError, match="aborted"):
        w.close()
    with pytest.raises(agefast.DecryptError):
        agefast.decrypt(bytes(dst.out), [IDENTITY])


@pytest.mark.parametrize("written, sent", [(3 * CHUNK_SIZE + 5, 3), (2 * CHUNK_SIZE, 1), (100, 0)])
def test_flush_writes_every_chunk_but_the_last(written, sent):
    # flush() had done nothing: a reader at the other end of a pipe waited for up to a batch (1 MiB) the writer
    # had flushed. The last chunk stays: it may be the final one, whole or not.
    class Flushed(io.BytesIO):
        flushes = 0

        def flush(self):
            self.flushes += 1

    out = Flushed()
    w = agefast.encryptor(out, [RECIPIENT])
    header = len(out.getvalue())
    w.write(plaintext(written))
    w.flush()
    assert len(out.getvalue()) - header == sent * (CHUNK_SIZE + 16)
    assert out.flushes >= 1
    w.write(b"more")
    w.close()
    assert agefast.decrypt(out.getvalue(), [IDENTITY]) == plaintext(written) + b"more"
