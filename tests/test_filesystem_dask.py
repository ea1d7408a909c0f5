"""Dask on worker processes through the fsspec filesystem `age`: the workers
get the filesystem pickled, read their own identity file, and write and read
encrypted parquet parts through an age::file:// glob."""

import numpy as np
import pandas as pd

from agefast import x25519
from required import need_module

dd = need_module("dask.dataframe")
distributed = need_module("distributed")


def test_dask_reads_and_writes_encrypted_parts_on_worker_processes(tmp_path):
    identity = x25519.Identity.generate()
    key_file = tmp_path / "key.txt"
    key_file.write_text(f"{identity}\n")
    parts = [pd.DataFrame({"part": k, "x": np.random.default_rng(k).random(2_000)}) for k in range(4)]
    want = pd.concat(parts, ignore_index=True)
    reading = {"age": {"identity_file": str(key_file)}}
    writing = {"age": {"recipients": [str(identity.to_public())]}}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        written = dd.from_pandas(want, npartitions=4)
        written.to_parquet(f"age::file://{tmp_path}/parts", storage_options=writing, write_index=False)
        got = dd.read_parquet(f"age::file://{tmp_path}/parts/*.parquet", storage_options=reading).compute()
    got = got.sort_values(["part", "x"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want.sort_values(["part", "x"]).reset_index(drop=True))
    for part in (tmp_path / "parts").glob("*.parquet"):
        assert part.read_bytes().startswith(b"age-encryption.org/v1\n")
