"""SQL and DataFrame engines on age files through the fsspec filesystem `age`:
DuckDB (register_filesystem), Polars and pyarrow's filesystem adapter."""

import io

import fsspec
import numpy as np
import pandas as pd
import pytest
from fsspec.implementations.local import LocalFileSystem

import agefast
from required import need_module
from test_filesystem import Key, frame

duckdb = need_module("duckdb")


@pytest.fixture
def key(tmp_path):
    return Key(tmp_path)


class _CountedFile(io.RawIOBase):
    """A local file read through readinto, counting the bytes it returns.
    It has no fileno, so the decryptor's reads all pass through here."""

    def __init__(self, path, counter):
        self._file = open(path, "rb", buffering=0)
        self._counter = counter

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        return self._file.seek(offset, whence)

    def tell(self):
        return self._file.tell()

    def readinto(self, b):
        n = self._file.readinto(b)
        self._counter.bytes_read += n
        return n

    def close(self):
        self._file.close()
        super().close()


class CountingFileSystem(LocalFileSystem):
    """Local files, with the bytes read from them counted."""

    def __init__(self):
        super().__init__(skip_instance_cache=True)
        self.bytes_read = 0

    def _open(self, path, mode="rb", **kwargs):
        if mode != "rb":
            return super()._open(path, mode, **kwargs)
        return _CountedFile(self._strip_protocol(path), self)


def write_parts(tmp_path, key, parts):
    """The parts as plaintext parquet in plain/ and through age:: in sealed/."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "sealed").mkdir()
    for k, part in enumerate(parts):
        part.to_parquet(tmp_path / "plain" / f"part-{k}.parquet")
        part.to_parquet(f"age::file://{tmp_path}/sealed/part-{k}.parquet.age",
                        storage_options={"age": {"recipients": [key.recipient]}})
        part.to_csv(f"age::file://{tmp_path}/sealed/part-{k}.csv.age", index=False,
                    storage_options={"age": {"recipients": [key.recipient]}})


def parts_of(count: int) -> list[pd.DataFrame]:
    return [frame(2_000 + 100 * k).assign(part=k) for k in range(count)]


# DuckDB


def duck(key):
    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(key.path), recipients=[key.recipient])
    con = duckdb.connect()
    con.register_filesystem(fs)
    return con


def test_duckdb_sql_over_a_glob_matches_the_plaintext(tmp_path, key):
    write_parts(tmp_path, key, parts_of(3))
    con = duck(key)
    query = "select part, count(*), sum(i), min(s), avg(x) from {} where i % 3 = 1 group by part order by part"
    want = duckdb.sql(query.format(f"read_parquet('{tmp_path}/plain/*.parquet')")).fetchall()
    assert len(want) == 3
    assert con.sql(query.format(f"read_parquet('age://{tmp_path}/sealed/*.parquet.age')")).fetchall() == want
    assert con.sql(query.format(f"read_csv('age://{tmp_path}/sealed/*.csv.age')")).fetchall() == want
    one = "select count(*), sum(x) from {}"
    assert (con.sql(one.format(f"read_parquet('age://{tmp_path}/sealed/part-1.parquet.age')")).fetchall()
            == duckdb.sql(one.format(f"read_parquet('{tmp_path}/plain/part-1.parquet')")).fetchall())
    # The names DuckDB lists come back to the same filesystem and open.
    names = con.sql(f"select distinct filename from read_parquet('age://{tmp_path}/sealed/*.parquet.age', "
                    "filename=true) order by filename").fetchall()
    assert names == [(f"age://{tmp_path}/sealed/part-{k}.parquet.age",) for k in range(3)]


def test_duckdb_where_reads_only_the_row_groups_it_needs(tmp_path, key):
    rows = 200_000
    df = pd.DataFrame({"i": np.arange(rows), "x": np.random.default_rng(7).random(rows)})
    plain = io.BytesIO()
    df.to_parquet(plain, row_group_size=rows // 10, compression=None)
    (tmp_path / "x.parquet.age").write_bytes(agefast.encrypt(plain.getvalue(), [key.identity.to_public()]))
    counting = CountingFileSystem()
    fs = fsspec.filesystem("age", fs=counting, identity_file=str(key.path))
    con = duckdb.connect()
    con.register_filesystem(fs)
    got = con.sql(f"select count(*), sum(x) from read_parquet('age://{tmp_path}/x.parquet.age') "
                  "where i between 123000 and 123999").fetchall()
    assert got == [(1000, pytest.approx(df.x[123000:124000].sum()))]
    # One row group of the ten, its two columns, plus the footer and opening.
    assert 0 < counting.bytes_read < len(plain.getvalue()) // 4


def test_duckdb_threads_reading_one_file_get_the_right_answer(tmp_path, key):
    # DuckDB's threads read the row groups of one file through one Python file, each seeking then reading; the
    # reads had taken their bytes from another thread's seek: wrong sums, or an error, in most queries.
    rows = 160_000
    table = pd.DataFrame({"n": np.arange(rows), "y": np.arange(rows)})
    plain = io.BytesIO()
    table.to_parquet(plain, row_group_size=rows // 8, compression=None)
    (tmp_path / "x.parquet.age").write_bytes(agefast.encrypt(plain.getvalue(), [key.identity.to_public()]))
    query = f"select count(*), sum(n) from read_parquet('age://{tmp_path}/x.parquet.age')"
    for _ in range(8):
        assert duck(key).sql(query).fetchall() == [(rows, rows * (rows - 1) // 2)]


def test_duckdb_copy_to_writes_an_age_file(tmp_path, key):
    write_parts(tmp_path, key, parts_of(2))
    con = duck(key)
    source = f"read_parquet('age://{tmp_path}/sealed/*.parquet.age')"
    con.sql(f"copy (select * from {source} where part = 1) to 'age://{tmp_path}/copy.parquet.age' (format parquet)")
    plaintext = agefast.decrypt((tmp_path / "copy.parquet.age").read_bytes(), [key.identity])
    got = pd.read_parquet(io.BytesIO(plaintext)).sort_values("i").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, parts_of(2)[1], check_dtype=False)
    assert con.sql(f"select count(*) from read_parquet('age://{tmp_path}/copy.parquet.age')").fetchall() == [
        (len(parts_of(2)[1]),)]


# Polars: its own readers and writers take URLs to its object store, which
# has no age; a file opened through the age:: URL, or pyarrow under it, works.


def test_polars_reads_scans_and_writes_through_the_age_url(tmp_path, key):
    pl = need_module("polars")
    df = pl.from_pandas(frame(3_000))
    url = f"age::file://{tmp_path}/frame.parquet.age"
    with fsspec.open(url, "wb", age={"recipients": [key.recipient]}) as f:
        df.write_parquet(f)
    plaintext = agefast.decrypt((tmp_path / "frame.parquet.age").read_bytes(), [key.identity])
    assert pl.read_parquet(io.BytesIO(plaintext)).equals(df)
    reading = {"age": {"identity_file": str(key.path)}}
    with fsspec.open(url, "rb", **reading) as f:
        assert pl.read_parquet(f).equals(df)
    with fsspec.open(url, "rb", **reading) as f:
        got = pl.scan_parquet(f).filter(pl.col("i") >= 2_990).select("s").collect()
    assert got["s"].to_list() == [f"row {k}" for k in range(2_990, 3_000)]
    # read_parquet's pyarrow route hands the URL to fsspec.open with flat
    # options: the URL names the age filesystem, the options its target.
    back = pl.read_parquet(f"age://{tmp_path}/frame.parquet.age", use_pyarrow=True,
                           storage_options={"target_protocol": "file", "identity_file": str(key.path)})
    assert back.equals(df)


def test_polars_scans_a_glob_lazily_through_a_pyarrow_dataset(tmp_path, key):
    pl = need_module("polars")
    import pyarrow.dataset as ds

    parts = parts_of(3)
    write_parts(tmp_path, key, parts)
    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(key.path))
    lazy = pl.scan_pyarrow_dataset(ds.dataset(fs.glob(f"{tmp_path}/sealed/*.parquet.age"), format="parquet",
                                              filesystem=fs))
    got = lazy.filter(pl.col("i") % 7 == 3).group_by("part").agg(pl.col("x").sum()).sort("part").collect()
    want = pl.from_pandas(pd.concat(parts)).filter(pl.col("i") % 7 == 3).group_by("part").agg(
        pl.col("x").sum()).sort("part")
    assert got["part"].to_list() == [0, 1, 2]
    assert np.allclose(got["x"].to_numpy(), want["x"].to_numpy(), rtol=1e-12)


# pyarrow's filesystem adapter


def test_pyarrow_filesystem_adapter_writes_and_reads_tables_and_datasets(tmp_path, key):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(key.path), recipients=[key.recipient])
    arrow = PyFileSystem(FSSpecHandler(fs))
    table = pa.Table.from_pandas(frame(3_000).assign(part=lambda d: d.i % 3), preserve_index=False)
    pq.write_table(table, f"{tmp_path}/one.parquet", filesystem=arrow)
    assert (tmp_path / "one.parquet").read_bytes().startswith(b"age-encryption.org/v1\n")
    assert pq.read_table(f"{tmp_path}/one.parquet", filesystem=arrow).equals(table)
    tail = pq.read_table(f"{tmp_path}/one.parquet", filesystem=arrow, filters=[("i", ">=", 2_990)])
    assert tail["i"].to_pylist() == list(range(2_990, 3_000))
    ds.write_dataset(table, f"{tmp_path}/set", format="parquet", partitioning=["part"], filesystem=arrow)
    for part in (tmp_path / "set").rglob("*.parquet"):
        assert part.read_bytes().startswith(b"age-encryption.org/v1\n")
    dataset = ds.dataset(f"{tmp_path}/set", format="parquet", partitioning=["part"], filesystem=arrow)
    one = dataset.to_table(filter=pc.field("part") == 1).sort_by("i")
    assert one["i"].to_pylist() == list(range(1, 3_000, 3))
