"""The fsspec filesystem `age` (agefast.filesystem): random access reads,
streaming writes, failures, pickling, and pandas / pyarrow through it.

Dask on worker processes is in test_filesystem_dask.py.
"""

import contextlib
import gc
import io
import os
import pickle
import subprocess
import sys
import threading
import time

import fsspec
import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pyrage
import pytest

import agefast
from agefast import x25519
from agefast.payload.rules import CHUNK_SIZE, SEALED_CHUNK_SIZE, plaintext_size, sealed_size
from agefast.errors import HeaderError, IdentityError, NoIdentityMatchError, PayloadError
from agefast.filesystem import AgeFileSystem
from range_server import serving
from s3_server import s3_server

needs_age = pytest.mark.requires_tool("age")


class Key:
    def __init__(self, directory):
        self.identity = x25519.Identity.generate()
        self.secret = str(self.identity)
        self.recipient = str(self.identity.to_public())
        self.path = directory / "key.txt"
        self.path.write_text(f"# public key: {self.recipient}\n{self.secret}\n")


@pytest.fixture
def key(tmp_path):
    return Key(tmp_path)


def frame(rows: int = 40_000) -> pd.DataFrame:
    rng = np.random.default_rng(rows)
    return pd.DataFrame({"i": np.arange(rows), "x": rng.random(rows), "s": [f"row {k}" for k in range(rows)]})


def write_age(path, plaintext: bytes, key) -> int:
    """Write an age file with agefast's own API; return its header size (with the nonce)."""
    data = agefast.encrypt(plaintext, [key.identity.to_public()])
    path.write_bytes(data)
    return len(data) - sealed_size(len(plaintext))


def reader(key, **options) -> AgeFileSystem:
    return fsspec.filesystem("age", target_protocol="file", identity_file=str(key.path), **options)


# pandas and pyarrow


@needs_age
def test_parquet_through_age_decrypts_with_go_age_and_pyrage(tmp_path, key):
    df = frame()
    url = f"age::file://{tmp_path}/frame.parquet.age"
    df.to_parquet(url, storage_options={"age": {"recipients": [key.recipient]}})
    sealed = (tmp_path / "frame.parquet.age").read_bytes()
    by_age = subprocess.run(["age", "-d", "-i", str(key.path)], input=sealed, capture_output=True, check=True).stdout
    by_pyrage = pyrage.decrypt(sealed, [pyrage.x25519.Identity.from_str(key.secret)])
    assert by_age == by_pyrage
    pd.testing.assert_frame_equal(pd.read_parquet(io.BytesIO(by_age)), df)
    back = pd.read_parquet(url, storage_options={"age": {"identity_file": str(key.path)}})
    pd.testing.assert_frame_equal(back, df)


def test_csv_round_trip(tmp_path, key):
    df = frame(5_000)
    url = f"age::file://{tmp_path}/frame.csv.age"
    df.to_csv(url, index=False, storage_options={"age": {"recipients": key.recipient}})
    back = pd.read_csv(url, storage_options={"age": {"identities": [key.secret]}})
    pd.testing.assert_frame_equal(back, df)


def test_pyarrow_dataset_over_a_directory(tmp_path, key):
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient], identity_file=str(key.path))
    parts = [frame(3_000 + k) for k in range(3)]
    fs.makedirs(f"{tmp_path}/set")
    for k, part in enumerate(parts):
        with fs.open(f"{tmp_path}/set/part-{k}.parquet", "wb") as f:
            part.to_parquet(f)
    table = ds.dataset(f"{tmp_path}/set", format="parquet", filesystem=fs).to_table()
    got = table.to_pandas().sort_values("i", kind="stable").reset_index(drop=True)
    want = pd.concat(parts).sort_values("i", kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)


def test_one_damaged_row_group_fails_alone(tmp_path, key):
    rows = 40_000  # a float64 column of 320 kB: five chunks or more per row group
    df = pd.DataFrame({"x": np.random.default_rng(1).random(4 * rows)})
    plain = io.BytesIO()
    df.to_parquet(plain, row_group_size=rows, compression=None)
    path = tmp_path / "groups.parquet.age"
    header = write_age(path, plain.getvalue(), key)
    column = pq.ParquetFile(io.BytesIO(plain.getvalue())).metadata.row_group(2).column(0)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    middle = start + column.total_compressed_size // 2
    sealed = bytearray(path.read_bytes())
    sealed[header + middle // CHUNK_SIZE * SEALED_CHUNK_SIZE + middle % CHUNK_SIZE] ^= 1
    path.write_bytes(sealed)
    with reader(key).open(str(path)) as f:
        parquet = pq.ParquetFile(f)
        for group in range(4):
            if group == 2:
                with pytest.raises(PayloadError):
                    parquet.read_row_group(group)
            else:
                got = parquet.read_row_group(group).column("x").to_numpy()
                assert np.array_equal(got, df["x"].to_numpy()[group * rows:(group + 1) * rows])


# random access


def test_reads_anywhere_return_the_plaintext(tmp_path, key, make_plaintext):
    plaintext = make_plaintext(5 * CHUNK_SIZE + 1234)
    write_age(tmp_path / "x.age", plaintext, key)
    edges = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE, len(plaintext) - 1]
    lengths = [1, 100, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 5, len(plaintext)]
    with reader(key).open(str(tmp_path / "x.age")) as f:
        assert f.size == len(plaintext)
        for start in edges:
            for length in lengths:
                f.seek(start)
                assert f.read(length) == plaintext[start:start + length]
        f.seek(0)
        assert f.read() == plaintext


def test_readinto_fills_the_callers_buffer(tmp_path, key, make_plaintext):
    plaintext = make_plaintext(20 * CHUNK_SIZE + 777)
    write_age(tmp_path / "x.age", plaintext, key)
    with reader(key).open(str(tmp_path / "x.age")) as f:
        for start, length in [(0, len(plaintext)), (5, 3 * CHUNK_SIZE), (CHUNK_SIZE, 17 * CHUNK_SIZE),
                              (len(plaintext) - 100, 1000)]:
            f.seek(start)
            buf = bytearray(length)
            n = f.readinto(buf)
            assert n == min(length, len(plaintext) - start)
            assert buf[:n] == plaintext[start:start + n]
            assert f.tell() == start + n
        assert f.readinto(bytearray(10)) == 0


def test_a_closed_file_refuses_every_operation_as_io_does(tmp_path, key):
    # read and readinto raised ValueError, but seek and tell went on answering on a closed file.
    write_age(tmp_path / "x.age", b"plaintext", key)
    f = reader(key).open(str(tmp_path / "x.age"))
    f.close()
    for operation in (f.read, lambda: f.readinto(bytearray(4)), f.tell, lambda: f.seek(1), f.readline):
        with pytest.raises(ValueError, match="closed file"):
            operation()
    written = reader(key, recipients=[key.recipient]).open(str(tmp_path / "y.age"), "wb")
    written.write(b"data")
    assert written.tell() == 4
    written.close()
    for operation in (written.tell, lambda: written.write(b"more")):
        with pytest.raises(ValueError, match="closed"):
            operation()


@pytest.mark.parametrize("how", ["readinto", "read"])
def test_threads_sharing_a_file_each_read_the_next_bytes(tmp_path, key, make_plaintext, how):
    # The position had been read before the lock was taken (readinto), or outside any lock (fsspec's read):
    # eight threads read 6 MB of a 4 MiB file, the same ranges more than once.
    plaintext = make_plaintext(64 * CHUNK_SIZE)
    write_age(tmp_path / "x.age", plaintext, key)
    pieces: list[bytes] = []
    with reader(key).open(str(tmp_path / "x.age")) as f:
        def drain():
            buf = bytearray(4096)
            if how == "read":
                while piece := f.read(4096):
                    pieces.append(piece)
            while n := f.readinto(buf):
                pieces.append(bytes(buf[:n]))
        threads = [threading.Thread(target=drain) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sum(map(len, pieces)) == len(plaintext)
    assert sorted(pieces) == sorted(plaintext[i:i + 4096] for i in range(0, len(plaintext), 4096))


class _GatedPayload:
    """A decryptor whose first pread waits for a gate: a read that holds the file's lock and has released the GIL."""

    def __init__(self, payload):
        self._payload = payload
        self.waiting = threading.Event()
        self.gate = threading.Event()

    def pread(self, pos, n):
        if not self.gate.is_set():
            self.waiting.set()
            self.gate.wait(10)
        return self._payload.pread(pos, n)

    def __getattr__(self, name):
        return getattr(self._payload, name)


@pytest.mark.parametrize("how", ["readinto", "read"])
def test_a_read_takes_its_bytes_from_where_its_seek_left_the_file(tmp_path, key, make_plaintext, how):
    # DuckDB's threads share one file: each seeks, then reads, holding the GIL. The position had been read only
    # once the read had the lock, whose wait let another thread's seek in between: wrong bytes, and wrong answers.
    plaintext = make_plaintext(8 * CHUNK_SIZE)
    write_age(tmp_path / "x.age", plaintext, key)
    with reader(key).open(str(tmp_path / "x.age")) as f:
        gated = f._payload = _GatedPayload(f._payload)
        got = {}

        def seek_and_read(name, at):
            f.seek(at)
            if how == "read":
                got[name] = f.read(100)
            else:
                buf = bytearray(100)
                got[name] = bytes(buf[:f.readinto(buf)])

        slow = threading.Thread(target=seek_and_read, args=("slow", 5 * CHUNK_SIZE + 7))
        slow.start()
        assert gated.waiting.wait(10)
        waiting = threading.Thread(target=seek_and_read, args=("waiting", CHUNK_SIZE + 3))
        waiting.start()
        time.sleep(0.2)     # the second read waits for the lock
        f.seek(3 * CHUNK_SIZE)
        gated.gate.set()
        slow.join()
        waiting.join()
    assert got["slow"] == plaintext[5 * CHUNK_SIZE + 7:][:100]
    assert got["waiting"] == plaintext[CHUNK_SIZE + 3:][:100]


def test_a_threads_tell_and_readline_agree_with_where_it_sought(tmp_path, key):
    # fsspec's readline seeks back from tell(), which had been the shared position while reads started at the
    # thread's own seek: another thread's seek between made the second line come from elsewhere.
    plaintext = b"".join(b"line %05d\n" % i for i in range(2000))
    write_age(tmp_path / "x.age", plaintext, key)
    with reader(key).open(str(tmp_path / "x.age")) as f:
        sought, go, got = threading.Event(), threading.Event(), []

        def lines():
            f.seek(110)
            sought.set()
            go.wait(10)
            got.extend([f.tell(), f.readline(), f.readline(), f.tell()])
        thread = threading.Thread(target=lines)
        thread.start()
        assert sought.wait(10)
        f.seek(5500)
        go.set()
        thread.join()
        assert got == [110, b"line 00010\n", b"line 00011\n", 132]
        assert (f.tell(), f.readline()) == (5500, b"line 00500\n")


def test_a_file_handed_to_another_thread_reads_on_where_that_thread_left_it(tmp_path, key):
    # A seek kept for its own thread's next read outlived another thread's read from it: the seeking thread's
    # tell() and next read went back to where it had sought, as no Python file does.
    write_age(tmp_path / "x.age", bytes(range(100)), key)
    with reader(key).open(str(tmp_path / "x.age")) as f:
        f.seek(10)
        other = threading.Thread(target=lambda: f.read(4))
        other.start()
        other.join()
        assert (f.tell(), f.read(4)) == (14, bytes(range(14, 18)))


def test_a_damaged_chunk_fails_readinto_without_moving(tmp_path, key, make_plaintext):
    path, plaintext, header, sealed = _sealed(tmp_path, key, make_plaintext)
    sealed[header + 2 * SEALED_CHUNK_SIZE + 5] ^= 1
    path.write_bytes(sealed)
    with reader(key).open(str(path)) as f:
        f.seek(10)
        with pytest.raises(PayloadError):
            f.readinto(bytearray(4 * CHUNK_SIZE))
        assert f.tell() == 10
        buf = bytearray(CHUNK_SIZE)
        assert f.readinto(buf) == CHUNK_SIZE and buf == plaintext[10:10 + CHUNK_SIZE]


def test_a_damaged_chunk_in_a_large_read_fails_it_and_only_it(tmp_path, key, make_plaintext):
    # Large reads open up to 64 chunks per batch (rules.DIRECT_CHUNKS):
    # damage one in the middle of the second batch.
    path, plaintext, header, sealed = _sealed(tmp_path, key, make_plaintext, chunks=150)
    sealed[header + 100 * SEALED_CHUNK_SIZE + 7] ^= 1
    path.write_bytes(sealed)
    with reader(key).open(str(path)) as f:
        with pytest.raises(PayloadError):
            f.read()
        buf = bytearray(len(plaintext))
        with pytest.raises(PayloadError):
            f.readinto(buf)
        assert f.tell() == 0
        assert f.read(100 * CHUNK_SIZE) == plaintext[:100 * CHUNK_SIZE]
        f.seek(101 * CHUNK_SIZE)
        assert f.read() == plaintext[101 * CHUNK_SIZE:]


def test_a_cache_asked_for_reads_the_ciphertext_ahead(tmp_path, key, make_plaintext):
    # cache_type applies to the wrapped file, so a run of small reads costs
    # one request, and the plaintext is still read exactly, with no fsspec
    # cache copying it.
    plaintext = make_plaintext(32 * CHUNK_SIZE)
    write_age(tmp_path / "x.age", plaintext, key)
    with serving(tmp_path) as server:
        fs = fsspec.filesystem("age", target_protocol="http", identities=[key.identity])
        with fs.open(f"{server.url}/x.age", cache_type="readahead", block_size=8 * SEALED_CHUNK_SIZE) as f:
            before = server.requests
            for at in range(0, 6 * CHUNK_SIZE, CHUNK_SIZE // 2):
                f.seek(at)
                assert f.read(1000) == plaintext[at:at + 1000]
            assert server.requests - before == 1
            f.seek(0)
            assert f.read() == plaintext


def test_sizes_are_plaintext_sizes_without_identities(tmp_path, key, make_plaintext):
    sizes = {"a.age": 0, "b.age": CHUNK_SIZE, "c.age": 2 * CHUNK_SIZE + 7}
    for name, size in sizes.items():
        write_age(tmp_path / name, make_plaintext(size), key)
    fs = fsspec.filesystem("age", target_protocol="file")  # no key: sizes need none
    with pytest.raises(HeaderError, match="key.txt: not an age file"):
        fs.ls(str(tmp_path))  # every file listed must be an age file
    (tmp_path / "key.txt").unlink()
    assert {e["name"].rsplit("/", 1)[1]: e["size"] for e in fs.ls(str(tmp_path))} == sizes
    assert {name.rsplit("/", 1)[1]: info["size"] for name, info in
            fs.glob(f"{tmp_path}/*.age", detail=True).items()} == sizes
    assert fs.size(str(tmp_path / "c.age")) == sizes["c.age"]
    assert fs.find(str(tmp_path), detail=True)[str(tmp_path / "b.age")]["size"] == CHUNK_SIZE
    assert fs.exists(str(tmp_path / "a.age")) and not fs.exists(str(tmp_path / "none.age"))
    assert plaintext_size(sealed_size(3 * CHUNK_SIZE)) == 3 * CHUNK_SIZE


def test_a_file_cut_before_its_nonce_is_listed_as_it_opens(key):
    # Its size came out negative (-16), which pyarrow passed on.
    fs = fsspec.filesystem("age", target_protocol="memory", identities=[key.secret], recipients=[key.recipient])
    fs.pipe_file("/cut/whole.age", b"hello")
    sealed = fs.fs.cat_file("/cut/whole.age")
    fs.fs.pipe_file("/cut/short.age", sealed[:len(sealed) - 16 - sealed_size(5) + 3])
    for call in (fs.open, fs.info, fs.ls, fs.du):
        with pytest.raises(HeaderError, match="ends before the payload nonce"):
            call("/cut/short.age" if call is not fs.ls and call is not fs.du else "/cut")


def test_a_new_header_of_the_same_size_is_not_listed_with_the_old_size(key):
    # memory:// gives no mtime: a file rewritten for two recipients with as much less plaintext as its header grew
    # kept the first size.
    one = fsspec.filesystem("age", target_protocol="memory", identities=[key.secret], recipients=[key.recipient],
                            skip_instance_cache=True)
    two = fsspec.filesystem("age", target_protocol="memory", identities=[key.secret],
                            recipients=[key.recipient, x25519.Identity.generate().to_public()],
                            skip_instance_cache=True)
    one.pipe_file("/same/x.age", b"x" * 1000)
    assert one.info("/same/x.age")["size"] == 1000
    two.pipe_file("/same/y.age", b"x" * 1000)
    grew = two.fs.size("/same/y.age") - one.fs.size("/same/x.age")
    two.pipe_file("/same/x.age", b"y" * (1000 - grew))
    assert one.fs.size("/same/x.age") == two.fs.size("/same/y.age") - grew
    assert one.info("/same/x.age")["size"] == len(one.cat_file("/same/x.age")) == 1000 - grew


@pytest.mark.parametrize("compression", ["gzip", "xz", "infer"])
def test_open_with_compression_writes_the_file(tmp_path, key, compression):
    # fsspec's open(compression=...) hands back the compressor, whose close left the age file open: collected
    # unclosed, it was aborted, and nothing was written (or the old file stayed).
    import gzip
    import lzma

    fs = reader(key, recipients=[key.recipient])
    path = str(tmp_path / ("x.csv.xz" if compression == "xz" else "x.csv.gz"))
    decompress = lzma.decompress if compression == "xz" else gzip.decompress
    fs.pipe_file(path, b"old")
    with fs.open(path, "wb", compression=compression) as f:
        f.write(b"a,b\n1,2\n")
    assert decompress(fs.cat_file(path)) == b"a,b\n1,2\n"
    with fs.open(path, "wt", compression=compression) as f:
        f.write("text\n")
    with fs.open(path, "rt", compression=compression) as f:
        assert f.read() == "text\n"
    with pytest.raises(RuntimeError), fs.open(path, "wb", compression=compression) as f:
        f.write(b"never")
        raise RuntimeError("interrupted")
    assert decompress(fs.cat_file(path)) == b"text\n"    # the file there was
    with pytest.warns(ResourceWarning, match="unfinished"):
        f = fs.open(path, "wb", compression=compression)
        f.write(b"never closed")
        del f
        gc.collect()    # from 3.12 a GzipFile that writes is a reference cycle (its write buffer)
    assert decompress(fs.cat_file(path)) == b"text\n"


def test_http_reads_fetch_only_the_chunks_they_touch(tmp_path, key, make_plaintext):
    plaintext = make_plaintext(32 * CHUNK_SIZE + 500)
    write_age(tmp_path / "x.age", plaintext, key)
    with serving(tmp_path) as server:
        url = f"age::{server.url}/x.age"
        with fsspec.open(url, "rb", age={"identities": [key.identity]}) as f:
            opened = server.bytes_sent  # the header's first 4 KiB and the final chunk
            assert opened <= 4096 + SEALED_CHUNK_SIZE
            f.seek(10 * CHUNK_SIZE + 100)
            assert f.read(1000) == plaintext[10 * CHUNK_SIZE + 100:10 * CHUNK_SIZE + 1100]
            assert server.bytes_sent - opened == SEALED_CHUNK_SIZE
            f.seek(10 * CHUNK_SIZE + 5000)  # the same chunk again: from the chunk cache
            assert f.read(10) == plaintext[10 * CHUNK_SIZE + 5000:10 * CHUNK_SIZE + 5010]
            assert server.bytes_sent - opened == SEALED_CHUNK_SIZE
            f.seek(3 * CHUNK_SIZE)
            before = server.bytes_sent
            assert f.read(4 * CHUNK_SIZE) == plaintext[3 * CHUNK_SIZE:7 * CHUNK_SIZE]
            assert server.bytes_sent - before == 4 * SEALED_CHUNK_SIZE


# failures


def _sealed(tmp_path, key, make_plaintext, chunks=6):
    plaintext = make_plaintext(chunks * CHUNK_SIZE - 10)
    path = tmp_path / "x.age"
    header = write_age(path, plaintext, key)
    return path, plaintext, header, bytearray(path.read_bytes())


@pytest.mark.parametrize("change", ["truncated at a chunk boundary", "truncated inside a chunk", "extended"])
def test_truncated_or_extended_files_fail_at_open(tmp_path, key, make_plaintext, change):
    path, _, header, sealed = _sealed(tmp_path, key, make_plaintext)
    if change == "truncated at a chunk boundary":
        del sealed[header + 5 * SEALED_CHUNK_SIZE:]
    elif change == "truncated inside a chunk":
        del sealed[-1000:]
    else:
        sealed += bytes(SEALED_CHUNK_SIZE)
    path.write_bytes(sealed)
    with pytest.raises(PayloadError):
        reader(key).open(str(path))


def test_swapped_chunks_fail_the_reads_that_touch_them(tmp_path, key, make_plaintext):
    path, plaintext, header, sealed = _sealed(tmp_path, key, make_plaintext)
    one = slice(header + SEALED_CHUNK_SIZE, header + 2 * SEALED_CHUNK_SIZE)
    two = slice(header + 2 * SEALED_CHUNK_SIZE, header + 3 * SEALED_CHUNK_SIZE)
    sealed[one], sealed[two] = sealed[two], sealed[one]
    path.write_bytes(sealed)
    with reader(key).open(str(path)) as f:
        for start, length in [(0, 2 * CHUNK_SIZE), (CHUNK_SIZE - 10, 20), (2 * CHUNK_SIZE + 5, 10),
                              (0, 6 * CHUNK_SIZE)]:
            f.seek(start)
            with pytest.raises(PayloadError):
                f.read(length)
        # Intact chunks still read, through both the whole-chunk and the partial path.
        for start, length in [(0, CHUNK_SIZE), (10, 100), (3 * CHUNK_SIZE, 2 * CHUNK_SIZE), (4 * CHUNK_SIZE + 3, 99)]:
            f.seek(start)
            assert f.read(length) == plaintext[start:start + length]


def test_pyrage_key_objects_work(tmp_path):
    identity = pyrage.x25519.Identity.generate()
    url = f"age::file://{tmp_path}/x.age"
    with fsspec.open(url, "wb", age={"recipients": [identity.to_public()]}) as f:
        f.write(b"from pyrage keys")
    with fsspec.open(url, "rb", age={"identities": [identity]}) as f:
        assert f.read() == b"from pyrage keys"


def test_wrong_key_fails_at_open(tmp_path, key, make_plaintext):
    write_age(tmp_path / "x.age", make_plaintext(100), key)
    other = Key(tmp_path / "..")
    with pytest.raises(NoIdentityMatchError):
        fsspec.open(f"age::file://{tmp_path}/x.age", "rb", age={"identities": [other.secret]}).open()
    with pytest.raises(IdentityError):
        fsspec.open(f"age::file://{tmp_path}/x.age", "rb").open()


def test_armored_files_are_refused(tmp_path, key):
    (tmp_path / "x.age").write_bytes(agefast.encrypt(b"hello", [key.identity.to_public()], armored=True))
    fs = reader(key)
    # info() and size() too, as pandas and pyarrow call them first: they had said "not an age file".
    for call in (fs.open, fs.info, fs.size):
        with pytest.raises(ValueError, match="is armored: armored age files have no random access"):
            call(str(tmp_path / "x.age"))


# writing


@pytest.mark.parametrize("size", [0, 100, CHUNK_SIZE, 6 << 20])
def test_written_files_decrypt(tmp_path, key, make_plaintext, size):
    plaintext = make_plaintext(size)
    (tmp_path / "recipients.txt").write_text(f"# a comment\n{key.recipient}\n")
    with fsspec.open(f"age::file://{tmp_path}/x.age", "wb", age={"recipients_file": str(tmp_path / "recipients.txt")}
                     ) as f:
        for at in range(0, size, 1 << 20):
            f.write(plaintext[at:at + (1 << 20)])
    assert agefast.decrypt((tmp_path / "x.age").read_bytes(), [key.identity]) == plaintext


@pytest.mark.parametrize("opener", ["fsspec.open", "fs.open"])
@pytest.mark.parametrize("size", [100, 6 << 20])  # nothing written yet, and sealed batches written
def test_an_exception_in_the_with_block_leaves_the_file_there_was(tmp_path, key, make_plaintext, opener, size):
    out = tmp_path / "out"
    out.mkdir()
    url = f"age::file://{out}/x.age"
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient])
    open_it = {"fsspec.open": lambda: fsspec.open(url, "wb", age={"recipients": [key.recipient]}),
               "fs.open": lambda: fs.open(str(out / "x.age"), "wb")}[opener]
    for before in (None, b"the file there was"):
        if before is not None:
            write_age(out / "x.age", before, key)
        with pytest.raises(RuntimeError):
            with open_it() as f:
                f.write(make_plaintext(size))
                raise RuntimeError("interrupted")
        if before is None:
            assert not (out / "x.age").exists()
        else:
            assert agefast.decrypt((out / "x.age").read_bytes(), [key.identity]) == before
        assert sorted(os.listdir(out)) == ([] if before is None else ["x.age"])


def test_a_close_while_an_exception_is_handled_or_none_names_nothing(tmp_path, key):
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient])
    out = tmp_path / "out"
    out.mkdir()
    f = fs.open(str(out / "x.age"), "wb")
    f.write(b"half of it")
    try:
        raise OSError("the source went away")
    except OSError:
        f.close()
    g = fs.open(str(out / "y.age"), "wb")
    g.write(b"unfinished")
    del g
    h = fs.open(str(out / "z.age"), "xb")
    h.write(b"given up")
    h.abort()
    assert os.listdir(out) == []


def test_a_file_written_whole_in_an_except_clause_is_named(tmp_path, key):
    # Written on a cache miss, inside the clause that handles it: close() had taken the miss for an exception
    # leaving the block, and dropped the file without a word.
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient])
    try:
        raise FileNotFoundError("the cache")
    except FileNotFoundError:
        with fsspec.open(f"age::file://{tmp_path}/cache.age", "wb", age={"recipients": [key.recipient]}) as f:
            f.write(b"recomputed")
        g = fs.open(str(tmp_path / "cache2.age"), "wb")
        g.write(b"again")
        g.close()
        with pytest.raises(RuntimeError), fs.open(str(tmp_path / "never.age"), "wb") as h:
            h.write(b"half")
            raise RuntimeError("a failure of its own")
    for name, plain in (("cache.age", b"recomputed"), ("cache2.age", b"again")):
        assert agefast.decrypt((tmp_path / name).read_bytes(), [key.identity]) == plain
    assert not (tmp_path / "never.age").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.parametrize("unnamed", [True, False], ids=["unnamed file", "named .partial"])
@pytest.mark.parametrize("mode", ["wb", "xb"])
@pytest.mark.parametrize("child", ["closes", "exits"])
def test_a_forked_child_leaves_its_parents_file_to_the_parent(tmp_path, key, mode, child, unnamed, monkeypatch):
    # A child that closed its copy (or exited with it) had removed the parent's xb file, or written its copy of
    # the buffered bytes into the parent's; where files are written under a temporary name, removed that.
    if not unnamed:
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient])
    f = fs.open(str(tmp_path / "out.age"), mode)
    f.write(b"before the fork, ")
    pid = os.fork()
    if pid == 0:
        try:
            if child == "closes":
                f.close()
            else:       # its finalizers, as at the end of a child that returns
                import gc
                del f
                gc.collect()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    f.write(b"the parent's")
    f.close()
    assert agefast.decrypt((tmp_path / "out.age").read_bytes(), [key.identity]) == b"before the fork, the parent's"


def test_a_text_file_never_closed_is_not_named(tmp_path, key):
    # The text wrapper's finaliser closes the file it wraps: that close had sealed and named what was written.
    import gc

    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient])

    def write_half(opened):
        opened.write("first half\n")

    write_half(fs.open(str(tmp_path / "fs.age"), "wt"))
    write_half(fsspec.open(f"age::file://{tmp_path}/open.age", "wt", age={"recipients": [key.recipient]}).open())
    gc.collect()
    assert os.listdir(tmp_path) == ["key.txt"]


def test_an_aborted_write_through_a_cache_leaves_the_file_there_was(tmp_path, key):
    # simplecache's temporary file uploads on close(), whatever autocommit it was given: closing it before
    # discarding it had replaced the file with the unfinished one.
    url = f"age::simplecache::file://{tmp_path}/report.age"
    options = {"age": {"recipients": [key.recipient]}, "simplecache": {"cache_storage": str(tmp_path / "cache")}}
    with fsspec.open(url, "wb", **options) as f:
        f.write(b"v1")
    with pytest.raises(RuntimeError), fsspec.open(url, "wb", **options) as f:
        f.write(b"v2, half")
        raise RuntimeError("interrupted")
    assert agefast.decrypt((tmp_path / "report.age").read_bytes(), [key.identity]) == b"v1"
    # "xb" over it: simplecache's temporary file takes no "x", and the failed write's cleanup had removed it.
    with pytest.raises(FileExistsError):
        fsspec.open(url, "xb", **options).open()
    assert agefast.decrypt((tmp_path / "report.age").read_bytes(), [key.identity]) == b"v1"


def test_xb_leaves_no_file_when_its_last_write_fails(tmp_path, key, monkeypatch):
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient])
    f = fs.open(str(tmp_path / "new.age"), "xb")
    f.write(b"x" * 100)
    monkeypatch.setattr(f._encryptor._payload, "close", lambda: (_ for _ in ()).throw(OSError(27, "File too large")))
    with pytest.raises(OSError, match="File too large"):
        f.close()
    assert os.listdir(tmp_path) == ["key.txt"]


def test_xb_on_a_local_disk_is_named_only_when_whole_and_never_over_a_file(tmp_path, key):
    # "xb" was written under its name: a kill mid-write (which no removal survives) left an unfinished file
    # there, which readers could also see being written (found by a probe of the writing side).
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient])
    path = tmp_path / "new.age"
    with fs.open(str(path), "xb") as f:
        f.write(b"x" * (3 * CHUNK_SIZE))
        assert not os.path.lexists(path)
    assert agefast.decrypt(path.read_bytes(), [key.identity]) == b"x" * (3 * CHUNK_SIZE)
    # a file made under the name meanwhile is left as it is
    raced = tmp_path / "raced.age"
    f = fs.open(str(raced), "xb")
    f.write(b"mine")
    raced.write_bytes(b"theirs")
    with pytest.raises(FileExistsError):
        f.close()
    assert raced.read_bytes() == b"theirs" and sorted(os.listdir(tmp_path)) == ["key.txt", "new.age", "raced.age"]


def test_no_file_is_copied_over_a_key_file(tmp_path, key):
    write_age(tmp_path / "x.age", b"data", key)
    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(tmp_path / "key.txt"),
                           recipients=[key.recipient])
    before = (tmp_path / "key.txt").read_bytes()
    for call in (fs.cp_file, fs.copy, fs.mv):
        with pytest.raises(PermissionError, match="a key file of this filesystem"):
            call(str(tmp_path / "x.age"), str(tmp_path / "key.txt"))
    assert (tmp_path / "key.txt").read_bytes() == before and (tmp_path / "x.age").exists()


def test_get_and_put_write_over_no_key_file_nor_the_file_they_read(tmp_path, key):
    # fsspec's get_file opened the local file first: the plaintext went over the identity file, a file decrypted
    # onto itself was left empty, and so was a local file whose replacement failed to decrypt; put encrypted a
    # file onto itself (found by a probe of the writing side).
    write_age(tmp_path / "x.age", b"data", key)
    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(tmp_path / "key.txt"),
                           recipients=[key.recipient])
    sealed, before = (tmp_path / "x.age").read_bytes(), (tmp_path / "key.txt").read_bytes()
    for call in (fs.get, fs.get_file):
        with pytest.raises(PermissionError, match="a key file of this filesystem"):
            call(str(tmp_path / "x.age"), str(tmp_path / "key.txt"))
        with pytest.raises(agefast.errors.SameFileError):
            call(str(tmp_path / "x.age"), str(tmp_path / "x.age"))
    assert (tmp_path / "key.txt").read_bytes() == before and (tmp_path / "x.age").read_bytes() == sealed
    damaged = bytearray(sealed)
    damaged[-1] ^= 1
    (tmp_path / "damaged.age").write_bytes(bytes(damaged))
    (tmp_path / "plain").write_bytes(b"what was there")
    with pytest.raises(PayloadError):
        fs.get(str(tmp_path / "damaged.age"), str(tmp_path / "plain"))
    assert (tmp_path / "plain").read_bytes() == b"what was there"
    fs.get(str(tmp_path / "x.age"), str(tmp_path / "plain"))
    assert (tmp_path / "plain").read_bytes() == b"data"
    with pytest.raises(agefast.errors.SameFileError):
        fs.put(str(tmp_path / "plain"), str(tmp_path / "plain"))
    assert (tmp_path / "plain").read_bytes() == b"data"


@pytest.mark.parametrize("store", ["file", "s3"])
def test_a_transaction_names_its_files_when_it_completes_and_none_when_it_fails(tmp_path, key, store):
    # fsspec's transactions had been ignored: each file was named at its close, and stayed where the
    # transaction failed (found by a probe of the writing side).
    with contextlib.ExitStack() as stack:
        if store == "file":
            fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient], skip_instance_cache=True)
            root = str(tmp_path)
        else:
            s3 = stack.enter_context(s3_server()).options
            fs = fsspec.filesystem("age", target_protocol="s3", target_options=s3, recipients=[key.recipient],
                                   skip_instance_cache=True)
            root = "bucket"
        _write_in_transactions(fs, root, key)


def _write_in_transactions(fs, root, key):
    with fs.transaction:
        with fs.open(f"{root}/done.age", "wb") as f:
            f.write(b"done")
        assert not fs.fs.exists(f"{root}/done.age")
    assert agefast.decrypt(fs.fs.cat_file(f"{root}/done.age"), [key.identity]) == b"done"
    with pytest.raises(RuntimeError), fs.transaction:
        with fs.open(f"{root}/failed.age", "wb") as f:
            f.write(b"failed")
        raise RuntimeError("the transaction fails")
    assert not fs.fs.exists(f"{root}/failed.age")


@pytest.mark.parametrize("wrapper", ["dir", "simplecache"])
def test_the_rules_of_this_disk_hold_through_dir_and_the_caches(tmp_path, key, wrapper):
    # They held only where the filesystem was file:// itself: through dir:: or simplecache:: over this disk a
    # key file was written over, and get or put wrote onto the file it read (found by a review).
    write_age(tmp_path / "x.age", b"data", key)
    (tmp_path / "plain").write_bytes(b"my only copy")
    options = ({"path": str(tmp_path), "target_protocol": "file"} if wrapper == "dir" else
               {"target_protocol": "file", "cache_storage": str(tmp_path / "cache")})
    fs = fsspec.filesystem("age", target_protocol=wrapper, target_options=options,
                           identity_file=str(key.path), recipients=[key.recipient])
    base = "" if wrapper == "dir" else f"{tmp_path}/"
    sealed, before = (tmp_path / "x.age").read_bytes(), key.path.read_bytes()
    with pytest.raises(agefast.errors.SameFileError):
        fs.get_file(f"{base}x.age", str(tmp_path / "x.age"))
    with pytest.raises(agefast.errors.SameFileError):
        fs.put_file(str(tmp_path / "plain"), f"{base}plain")
    with pytest.raises(PermissionError, match="a key file of this filesystem"):
        fs.open(f"{base}key.txt", "wb")
    assert (tmp_path / "x.age").read_bytes() == sealed and (tmp_path / "plain").read_bytes() == b"my only copy"
    assert key.path.read_bytes() == before


def test_a_transaction_left_in_a_forked_child_names_nothing(tmp_path, key):
    # commit() and discard() did not ask which process they ran in: a child forked in the transaction, leaving
    # it, named the parent's file (found by a review).
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient], skip_instance_cache=True)
    with fs.transaction:
        with fs.open(str(tmp_path / "sealed.age"), "wb") as f:
            f.write(b"the parent's")
        pid = os.fork()
        if pid == 0:
            try:
                fs.transaction.complete(commit=True)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert "sealed.age" not in os.listdir(tmp_path)     # (a temporary name, where files have none without)
    assert agefast.decrypt((tmp_path / "sealed.age").read_bytes(), [key.identity]) == b"the parent's"


def test_a_failure_before_the_first_write_leaves_the_file_there_was(tmp_path, key, monkeypatch):
    from agefast import _filesystem_files

    write_age(tmp_path / "x.age", b"the file there was", key)

    def failing(*args, **kwargs):
        raise agefast.errors.EncryptError("a plugin failed")

    monkeypatch.setattr(_filesystem_files.streaming, "encryptor", failing)
    fs = fsspec.filesystem("age", target_protocol="file", recipients=[key.recipient])
    with pytest.raises(agefast.errors.EncryptError):
        fs.open(str(tmp_path / "x.age"), "wb")
    assert agefast.decrypt((tmp_path / "x.age").read_bytes(), [key.identity]) == b"the file there was"


def test_no_file_is_written_over_a_key_file(tmp_path, key):
    recipients = tmp_path / "recipients.txt"
    recipients.write_text(str(key.recipient) + "\n")
    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(tmp_path / "key.txt"),
                           recipients_file=str(recipients))
    for path in (tmp_path / "key.txt", recipients):
        before = path.read_bytes()
        with pytest.raises(PermissionError, match="a key file of this filesystem"):
            fs.open(str(path), "wb")
        assert path.read_bytes() == before


def test_a_store_that_commits_nothing_shows_an_unfinished_file_that_fails(key):
    # memory:// names a file when it is opened: what an interrupted write leaves there must not decrypt.
    fs = fsspec.filesystem("age", target_protocol="memory", recipients=[key.recipient])
    with pytest.raises(RuntimeError):
        with fs.open("/unfinished.age", "wb") as f:
            f.write(b"x" * 100)
            raise RuntimeError("interrupted")
    with pytest.raises(PayloadError):
        agefast.decrypt(fs.fs.cat_file("/unfinished.age"), [key.identity])
    fs.fs.rm("/unfinished.age")


# pickling and discovery


def test_filesystems_and_open_files_pickle(tmp_path, key, make_plaintext):
    plaintext = make_plaintext(3 * CHUNK_SIZE)
    write_age(tmp_path / "x.age", plaintext, key)
    with_keys = fsspec.filesystem("age", target_protocol="file", identities=[key.identity])
    with_file = reader(key)
    assert key.secret.encode() in pickle.dumps(with_keys)  # what the docs warn of
    assert key.secret.encode() not in pickle.dumps(with_file)
    for fs in (with_keys, with_file):
        assert pickle.loads(pickle.dumps(fs)).cat_file(str(tmp_path / "x.age")) == plaintext
        with fs.open(str(tmp_path / "x.age")) as f:
            f.seek(CHUNK_SIZE + 3)
            copy = pickle.loads(pickle.dumps(f))
            assert copy.tell() == CHUNK_SIZE + 3
            assert copy.read(CHUNK_SIZE) == plaintext[CHUNK_SIZE + 3:2 * CHUNK_SIZE + 3]
            copy.close()


def test_the_names_it_gives_open_on_the_same_filesystem(tmp_path, key, make_plaintext):
    # What an engine holding the instance (DuckDB) does with a listed name.
    plaintext = make_plaintext(CHUNK_SIZE + 5)
    write_age(tmp_path / "x.age", plaintext, key)
    local = reader(key)
    [found] = local.glob(f"{tmp_path}/*.age")
    assert local.unstrip_protocol(found) == f"age://{tmp_path}/x.age"
    assert local.cat_file(local.unstrip_protocol(found)) == plaintext
    with serving(tmp_path) as server:
        remote = fsspec.filesystem("age", target_protocol="http", identities=[key.identity])
        name = remote.unstrip_protocol(remote.info(f"{server.url}/x.age")["name"])
        assert name == f"age://{server.url}/x.age"
        assert remote.size(name) == len(plaintext)
        with remote.open(name) as f:
            assert f.read() == plaintext


def test_the_entry_point_is_found_without_importing_agefast(tmp_path, key, make_plaintext):
    plaintext = make_plaintext(CHUNK_SIZE + 1)
    write_age(tmp_path / "x.age", plaintext, key)
    code = (
        "import sys, fsspec\n"
        "before = 'agefast' in sys.modules\n"
        f"with fsspec.open('age::file://{tmp_path}/x.age', 'rb', age={{'identity_file': {str(key.path)!r}}}) as f:\n"
        "    sys.stdout.buffer.write(f.read())\n"
        "sys.stderr.write(f'imported before: {before}')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, cwd=tmp_path)
    assert done.stdout == plaintext
    assert done.stderr.decode().endswith("imported before: False")


def test_s3_through_a_local_moto_server(key):
    with s3_server() as server:
        s3 = server.options
        df = frame(20_000)
        url = "age::s3://bucket/frame.parquet.age"
        df.to_parquet(url, row_group_size=5_000, storage_options={"age": {"recipients": [key.recipient]}, "s3": s3})
        fs = fsspec.filesystem("age", target_protocol="s3", target_options=s3, identity_file=str(key.path))
        with fs.open("bucket/frame.parquet.age") as f:
            assert fs.size("bucket/frame.parquet.age") == f.size
            group = pq.ParquetFile(f).read_row_group(2).to_pandas()
        pd.testing.assert_frame_equal(group, df.iloc[10_000:15_000].reset_index(drop=True))
        pd.testing.assert_frame_equal(pd.read_parquet(url, storage_options={
            "age": {"identity_file": str(key.path)}, "s3": s3}), df)


@pytest.mark.parametrize("size", [100, 6 << 20])     # one PUT; a multipart upload
def test_xb_on_s3_leaves_nothing_where_deletes_are_refused(key, size, monkeypatch):
    # "xb" was committed on close and removed after a failure: where the store refuses deletes (a write-only
    # backup policy), an unfinished file stayed under the name. s3fs's commit refuses a file made meanwhile.
    import s3fs

    async def refused(*args, **kwargs):
        raise PermissionError("Access Denied")
    for method in ("_rm", "_rm_file"):      # before the filesystem is made: it binds them then
        monkeypatch.setattr(s3fs.S3FileSystem, method, refused)
    with s3_server() as server:
        fs = fsspec.filesystem("age", target_protocol="s3", target_options=server.options,
                               recipients=[key.recipient], identity_file=str(key.path), skip_instance_cache=True)
        name = f"bucket/xb-{size}.age"     # moto's buckets outlive its servers, within a process
        with pytest.raises((RuntimeError, PermissionError)), fs.open(name, "xb") as f:
            f.write(os.urandom(size))
            raise RuntimeError("the caller's code failed")
        fs.invalidate_cache()
        assert not fs.exists(name)
        with fs.open(name, "xb") as f:
            f.write(b"whole")
        assert fs.cat_file(name) == b"whole"


def test_a_key_file_that_never_ends_is_refused_at_once(tmp_path, key):
    fs = fsspec.filesystem("age", target_protocol="file", identity_file="/dev/zero", recipients_file="/dev/zero")
    with pytest.raises(IdentityError, match="larger than 16 MiB"):
        fs.identities()
    with pytest.raises(agefast.errors.RecipientError, match="larger than 16 MiB"):
        fs.recipients()


def test_a_target_that_makes_folders_still_makes_them(tmp_path, key):
    target = fsspec.filesystem("file", auto_mkdir=True)
    fs = fsspec.filesystem("age", fs=target, recipients=[key.recipient])
    with fs.open(str(tmp_path / "a" / "b" / "x.age"), "wb") as f:
        f.write(b"made its folders")
    assert agefast.decrypt((tmp_path / "a" / "b" / "x.age").read_bytes(), [key.identity]) == b"made its folders"
