"""Random access through decryptor over seekable sources."""

import io
import os
import random
import threading

import pytest
from hypothesis import given, settings, strategies as st

import agefast
from agefast import errors
from streams import Trickle

CHUNK = 64 * 1024
SEALED = CHUNK + 16
IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
DATA = random.Random(7).randbytes(20 * CHUNK + 1234)  # more than one batch of 16
CT = agefast.encrypt(DATA, [RECIPIENT])
CHUNKS_START = len(CT) - (len(DATA) + 21 * 16)


def open_file(ct=CT):
    return agefast.decryptor(io.BytesIO(ct), [IDENTITY])


operations = st.lists(st.tuples(
    st.sampled_from([io.SEEK_SET, io.SEEK_CUR, io.SEEK_END]),
    st.integers(-len(DATA) - 10, len(DATA) + 10),
    st.sampled_from([0, 1, 15, 16, 17, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 17 * CHUNK])),
    max_size=12)


@settings(max_examples=60, deadline=None)
@given(operations)
def test_random_seeks_and_reads_match_the_plaintext(ops):
    r = open_file()
    pos = 0
    for whence, offset, size in ops:
        target = {io.SEEK_SET: 0, io.SEEK_CUR: pos, io.SEEK_END: len(DATA)}[whence] + offset
        if target < 0:
            with pytest.raises(ValueError):
                r.seek(offset, whence)
            continue
        pos = r.seek(offset, whence)
        assert pos == target == r.tell()
        got = r.read(size)
        assert got == DATA[pos:pos + size]
        pos += len(got)
        assert r.tell() == pos


def test_seek_end_reports_the_authenticated_length():
    r = open_file()
    assert r.seekable()
    assert r.seek(0, io.SEEK_END) == len(DATA)
    assert r.read() == b""
    r.seek(-5, io.SEEK_END)
    assert r.read() == DATA[-5:]


def test_readinto_across_batches():
    r = open_file()
    r.seek(CHUNK - 3)
    buf = bytearray(17 * CHUNK)
    assert r.readinto(buf) == len(buf)
    assert buf == DATA[CHUNK - 3:CHUNK - 3 + len(buf)]


def test_pread_from_many_threads_does_not_move_the_cursor():
    r = open_file()
    r.seek(12345)
    rng = random.Random(3)
    requests = [(rng.randrange(len(DATA)), rng.randrange(3 * CHUNK)) for _ in range(64)]
    results = {}

    def work(i, offset, size):
        results[i] = r.pread(offset, size)

    threads = [threading.Thread(target=work, args=(i, o, s)) for i, (o, s) in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (offset, size) in enumerate(requests):
        assert results[i] == DATA[offset:offset + size]
    assert r.tell() == 12345


@pytest.mark.parametrize("engine", ["cryptography", "numba"])
@pytest.mark.parametrize("source", ["file", "BytesIO"])
def test_pread_within_one_chunk_on_either_engine(engine, source, engine_setting, tmp_path):
    # One chunk is opened on its own into new bytes (SeekablePayload._open_chunk).
    engine_setting(engine)
    head, cs = chunk_list(CT)
    bad = head + b"".join(cs[:2] + [cs[3], cs[2]] + cs[4:])
    path = tmp_path / "f.age"
    path.write_bytes(bad)
    src = open(path, "rb") if source == "file" else io.BytesIO(bad)
    with src:
        r = agefast.decryptor(src, [IDENTITY])
        last = len(DATA) // CHUNK * CHUNK
        for offset, size in ((0, CHUNK), (CHUNK, CHUNK), (CHUNK + 5, 100), (2 * CHUNK - 1, 1), (0, 0),
                             (last, len(DATA) - last), (last + 3, CHUNK), (len(DATA) - 1, 5), (len(DATA), 1)):
            assert r.pread(offset, size) == DATA[offset:offset + size]
        with pytest.raises(errors.PayloadError, match="chunk 2"):
            r.pread(2 * CHUNK, CHUNK)
        with pytest.raises(errors.PayloadError, match="chunk 3"):
            r.pread(3 * CHUNK + 7, 9)
        if source == "file":
            os.truncate(path, len(bad) - 5 * SEALED)
            with pytest.raises(errors.TruncatedError):
                r.pread(last - CHUNK, 10)


def chunk_list(ct):
    body = ct[CHUNKS_START:]
    return ct[:CHUNKS_START], [body[i:i + SEALED] for i in range(0, len(body), SEALED)]


def tampered():
    head, cs = chunk_list(CT)
    yield "truncated at a chunk boundary", head + b"".join(cs[:-1])
    yield "truncated inside the final chunk", CT[:-1]
    yield "extended by a byte", CT + b"\x00"
    yield "extended by a chunk", CT + cs[0]
    yield "final chunk moved", head + b"".join(cs[:3] + cs[-1:] + cs[3:-1])
    yield "final and previous swapped", head + b"".join(cs[:-2] + [cs[-1], cs[-2]])
    yield "middle chunk dropped", head + b"".join(cs[:5] + cs[6:])
    yield "middle chunk duplicated", head + b"".join(cs[:5] + cs[4:])
    whole = agefast.encrypt(DATA[:3 * CHUNK], [RECIPIENT])     # its final chunk full
    yield "a full final chunk extended by more than a tag", whole + bytes(17)
    yield "a full final chunk extended by a tag", whole + bytes(16)


@pytest.mark.parametrize("name,ct", list(tampered()), ids=[n for n, _ in tampered()])
def test_tampered_files_fail_before_any_plaintext_with_the_streams_error(name, ct):
    with pytest.raises(errors.PayloadError) as stream:
        agefast.decrypt(ct, [IDENTITY])
    with pytest.raises(type(stream.value)) as random_access:
        open_file(ct)
    # Where the end of the file is what changed, the stream's words too: bytes after a full final chunk were
    # told as a damaged or cut last chunk (found by a probe of random access). A middle chunk moved is found
    # by the stream where it lies, by random access at the end, which no longer fits.
    if "middle" not in name and "moved" not in name:
        assert str(random_access.value) == str(stream.value)


def test_reordered_middle_chunks_fail_at_the_first_bad_chunk():
    head, cs = chunk_list(CT)
    ct = head + b"".join(cs[:2] + [cs[3], cs[2]] + cs[4:])
    r = open_file(ct)
    assert r.read(2 * CHUNK) == DATA[:2 * CHUNK]
    with pytest.raises(errors.PayloadError, match="chunk 2"):
        r.read(1)
    with pytest.raises(errors.PayloadError):
        r.pread(0, 1) and r.pread(2 * CHUNK, 1)


@pytest.mark.parametrize("size", [CHUNK, 5 * CHUNK, 17 * CHUNK])
def test_whole_chunk_reads_stop_at_the_first_bad_chunk(size):
    # Reads of whole chunks open straight into the caller's buffer.
    head, cs = chunk_list(CT)
    ct = head + b"".join(cs[:2] + [cs[3], cs[2]] + cs[4:])
    r = open_file(ct)
    got = bytearray()
    with pytest.raises(errors.PayloadError, match="chunk 2"):
        while True:
            got += r.read(size)
    assert got == DATA[:2 * CHUNK]
    r.seek(0)      # the chunks before the bad one read again, and the bad one fails again
    got = bytearray()
    with pytest.raises(errors.PayloadError, match="chunk 2"):
        while True:
            got += r.read(size)
    assert got == DATA[:2 * CHUNK]


def test_unseekable_and_armored_sources_are_not_seekable():
    for r in (agefast.decryptor(Trickle(CT), [IDENTITY]),
              agefast.decryptor(io.BytesIO(agefast.encrypt(b"x", [RECIPIENT], armored=True)), [IDENTITY])):
        assert not r.seekable()
        with pytest.raises(io.UnsupportedOperation):
            r.seek(0)


def test_seekable_real_file(tmp_path):
    path = tmp_path / "f.age"
    path.write_bytes(CT)
    with open(path, "rb") as f:
        r = agefast.decryptor(f, [IDENTITY])
        assert r.pread(5 * CHUNK - 1, 10) == DATA[5 * CHUNK - 1:5 * CHUNK + 9]
        r.seek(-100, io.SEEK_END)
        assert r.read() == DATA[-100:]


def test_a_closed_source_is_not_read_through_a_number_another_file_took(tmp_path):
    # Random access reads the source's descriptor. Once the source was closed, a file opened next took its
    # number, and a read far off read that file: "failed to authenticate payload chunk", a damaged file.
    path = tmp_path / "f.age"
    path.write_bytes(CT)
    f = open(path, "rb")
    r = agefast.decryptor(f, [IDENTITY])
    f.close()
    with open(path, "rb") as taker:
        with pytest.raises(ValueError, match="closed file"):
            r.pread(10, 5 * CHUNK)
        assert taker.read(3) == CT[:3]


def test_a_compressed_file_object_reads_as_it_decompresses(tmp_path):
    # gzip and bz2 files have a fileno(), of the compressed file: reading it at their offsets failed valid files.
    import bz2
    import gzip

    identity = agefast.x25519.Identity.generate()
    plain = os.urandom(200_000)
    sealed = agefast.encrypt(plain, [identity.to_public()])
    for opener in (gzip.open, bz2.open):
        path = tmp_path / f"x.age.{opener.__module__}"
        with opener(path, "wb") as f:
            f.write(sealed)
        with opener(path, "rb") as f:
            reader = agefast.decryptor(f, [identity])
            assert reader.read() == plain
            assert reader.pread(65_000, 1_000) == plain[65_000:66_000]


def test_a_damaged_chunk_fails_only_reads_that_reach_it():
    # A small read at chunk 0 loads a window of chunks and stops at the damaged chunk 8; reads at chunk 20,
    # and at chunk 0 again, raised chunk 8's error (found by this session's third probe).
    identity = agefast.x25519.Identity.generate()
    plain = os.urandom(32 * 65536)
    sealed = bytearray(agefast.encrypt(plain, [identity.to_public()]))
    sealed[len(sealed) - 32 * 65552 + 8 * 65552 + 5] ^= 1
    reader = agefast.decryptor(io.BytesIO(bytes(sealed)), [identity])
    assert reader.read(4) == plain[:4]
    reader.seek(20 * 65536)
    assert reader.read(4) == plain[20 * 65536:20 * 65536 + 4]
    reader.seek(0)
    assert reader.read(4) == plain[:4]
    reader.seek(8 * 65536)
    with pytest.raises(errors.PayloadError, match="chunk 8"):
        reader.read(4)
    # and a read that reached it does not fail the others (every later read had raised chunk 8's error)
    reader.seek(0)
    assert reader.read(4) == plain[:4]
    reader.seek(7 * 65536)
    assert reader.read(2 * 65536) == plain[7 * 65536:8 * 65536]
    with pytest.raises(errors.PayloadError, match="chunk 8"):
        reader.read(1)
    reader.seek(9 * 65536)
    assert reader.read(3 * 65536) == plain[9 * 65536:12 * 65536]
    # read() of everything raises at once: one call never returns less than the whole plaintext without an error
    reader.seek(0)
    with pytest.raises(errors.PayloadError, match="chunk 8"):
        reader.read()


@pytest.mark.parametrize("real_file", [True, False], ids=["file", "BytesIO"])
def test_a_file_that_shrank_fails_only_reads_that_reach_what_is_gone(tmp_path, real_file):
    # A read loads up to 16 chunks from its position; where the file had shrunk meanwhile the whole load failed,
    # its error pinned to its first chunk: seek(2 chunks) and read(10) raised TruncatedError though chunk 2 was
    # there, and every later read of it did too (found by a probe of random access).
    identity = agefast.x25519.Identity.generate()
    plain = os.urandom(20 * CHUNK + 17)
    sealed = agefast.encrypt(plain, [identity.to_public()])
    header = len(sealed) - (20 * SEALED + 17 + 16)
    path = tmp_path / "shrinks.age"
    path.write_bytes(sealed)
    with open(path, "r+b") as f:
        source = f if real_file else io.BytesIO(sealed)
        reader = agefast.decryptor(source, [identity])
        f.truncate(header + 10 * SEALED + 100)
        if not real_file:
            source.truncate(header + 10 * SEALED + 100)
        reader.seek(2 * CHUNK)
        assert reader.read(10) == plain[2 * CHUNK:2 * CHUNK + 10]
        assert reader.read(CHUNK) == plain[2 * CHUNK + 10:3 * CHUNK + 10]
        reader.seek(9 * CHUNK)
        assert reader.read(2 * CHUNK) == plain[9 * CHUNK:10 * CHUNK]
        with pytest.raises(errors.TruncatedError, match="shrank"):
            reader.read(1)
        reader.seek(3 * CHUNK + 1)
        assert reader.read(CHUNK) == plain[3 * CHUNK + 1:4 * CHUNK + 1]


def test_reads_from_many_threads_take_turns():
    # Two loads at once had filled one buffer together: misplaced plaintext, or a false PayloadError that
    # then failed every read (found by a hostile probe). Each read now returns plaintext from where it began.
    reader = open_file()
    wrong, failed = [], []

    def read_at_random(seed):
        rng = random.Random(seed)
        for _ in range(60):
            try:
                got = reader.read(rng.choice([100, 5000, CHUNK + 3]))
            except errors.PayloadError as e:
                failed.append(e)
                return
            if not got:
                reader.seek(rng.randrange(len(DATA)))
            elif DATA.find(got) < 0:
                wrong.append(len(got))

    threads = [threading.Thread(target=read_at_random, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [] and failed == []


def test_a_read_of_all_is_one_turn(monkeypatch):
    # read() went through the file in steps, each its own turn: a seek from another thread between two steps
    # spliced the plaintext of two places into one result. Steps of a chunk here, to meet it in a small file,
    # and a pause before the second step, where the seek comes.
    monkeypatch.setattr(agefast.streaming, "_KNOWN_STEP", CHUNK)
    paused, go_on = threading.Event(), threading.Event()
    new_bytes = agefast.streaming.new_bytes

    def pausing_new_bytes(size, fill):
        steps = 0

        def ready(end):
            nonlocal steps
            steps += 1
            if steps == 2:
                paused.set()
                go_on.wait(2)
            return False

        return new_bytes(size, lambda view, _: fill(view, ready))

    monkeypatch.setattr(agefast.streaming, "new_bytes", pausing_new_bytes)
    reader = open_file()
    got = []
    whole = threading.Thread(target=lambda: got.append(reader.read()))
    whole.start()
    paused.wait(2)
    seek = threading.Thread(target=reader.seek, args=(len(DATA) - 10,))
    seek.start()
    seek.join(0.2)      # waits for its turn, which the read holds
    go_on.set()
    whole.join()
    seek.join()
    assert got == [DATA] and reader.read() == DATA[-10:]


def test_the_file_object_rules_of_python():
    reader = open_file()
    with pytest.raises(TypeError):
        reader.seek(1.5)
    reader.seek(len(DATA) - 10)
    assert reader.read(2 ** 62) == DATA[-10:]      # RawIOBase.read had made a buffer of 2**62 bytes first
    reader.close()
    for call in (lambda: reader.pread(0, 1), lambda: reader.seek(0), lambda: reader.tell(), lambda: reader.read(1)):
        with pytest.raises(ValueError, match="closed"):
            call()


BIG = random.Random(8).randbytes(agefast.io.buffers._RAW_MIN + 3 * CHUNK + 12345)   # read into a raw result
BIG_CT = agefast.encrypt(BIG, [RECIPIENT])


@pytest.mark.parametrize("start", [0, 1, CHUNK, 2 * CHUNK + 7, len(BIG) - 5, len(BIG)])
def test_read_of_the_rest_goes_straight_into_the_result(start):
    r = open_file(BIG_CT)
    r.seek(start)
    assert r.read() == BIG[start:]
    assert r.read() == b"" and r.tell() == len(BIG)


def test_read_of_the_rest_fails_whole_at_a_bad_chunk():
    head, cs = chunk_list(BIG_CT)
    r = open_file(head + b"".join(cs[:100] + [cs[101], cs[100]] + cs[102:]))
    with pytest.raises(errors.PayloadError, match="chunk 100"):
        r.read()
    r.seek(0)
    assert r.read(100 * CHUNK) == BIG[:100 * CHUNK]


@pytest.mark.parametrize("size", [10, agefast.io.buffers._RAW_MIN + 10])
def test_a_stream_that_ends_sooner_than_it_said_gives_what_it_gave(size):
    # read_all of a known size reads into an uninitialised result: what the stream did not give is never
    # returned, whatever the memory held.
    from agefast.streaming import read_all

    given = os.urandom(size - 7)
    source = io.BytesIO(given)
    assert read_all(source.readinto, size) == given
