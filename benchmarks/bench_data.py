"""The fsspec filesystem age:: (agefast.filesystem) in the data stack.

- http: one column of one row group of a ~128 MiB parquet file (32 row groups,
  8 columns) through age::http:// from a Range server on 127.0.0.1: the bytes
  the server sent, against the file's size, and the values against the
  plaintext's. Plain http:// with fsspec's defaults is measured for reference.
- dask: LocalCluster(n_workers=2, processes=True) reading 8 encrypted parquet
  parts through an age::file:// glob with identity_file, against the same job
  on the plaintext parts, interleaved rounds; two jobs: a sum of the numeric
  columns (I/O-bound: the worst case) and a group-by over a string column.
- random: a 1 GiB encrypted file through age::file://: random 4 KiB reads at
  uniform offsets (reads/s, bytes fetched per read from /proc/self/io rchar),
  bytes fetched against bytes read for random reads of 1 B to 16 MiB (the plot
  docs/img/data_random_reads.png), and sequential 1 MiB reads against
  agefast.decryptor on the same file, with a plain read of the ciphertext as
  the floor; and writing 1 GiB through age:: against agefast.encryptor.
- floor: one ~17 MB parquet part (a Dask part's shape) read whole through
  age::file:// (`f.read()`, and pyarrow's read_table on the open file),
  against the floor measured in the same rounds: reading the plaintext file
  plus agefast.decrypt_into of the ciphertext (held in memory) into a
  buffer. Prints age:: / (plain read + decrypt_into), the median of the
  per-round ratios and the ratio of the best runs.

    python benchmarks/bench_data.py [--part http|dask|random|floor|all] [--reps N] [--dir DIR]

Writes benchmarks/results/data-<part>.json for each part run.
"""

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pyarrow.parquet as pq

import agefast
import common
from common import GiB, MiB

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from range_server import serving  # noqa: E402  (the test suite's Range server)

CHUNK = 64 * 1024
SEALED_CHUNK = CHUNK + 16


def _identities(key: Path) -> list:
    return agefast.load_identities(key.read_bytes(), name=str(key))


def _sealed_copy(plain: Path, sealed: Path, recipient: str) -> None:
    if not sealed.exists():
        agefast.encrypt_file(str(plain), str(sealed), [agefast.x25519.Recipient.from_str(recipient)])


# http


def bench_http(work: Path, key: Path, recipient: str) -> dict:
    plain = work / "wide.parquet"
    rows, groups = 1 << 21, 32
    if not plain.exists():
        values = np.random.default_rng(0).random((rows, 8))
        frame = pd.DataFrame(values, columns=[f"c{k}" for k in range(8)])
        frame.to_parquet(plain, row_group_size=rows // groups, compression=None)
    _sealed_copy(plain, work / "wide.parquet.age", recipient)
    size = (work / "wide.parquet.age").stat().st_size
    truth = pq.ParquetFile(plain)
    picks = [(0, "c0"), (13, "c5"), (31, "c7")]
    out = {"file_bytes": size, "row_groups": truth.metadata.num_row_groups,
           "columns": truth.metadata.num_columns, "reads": []}
    with serving(work) as server:
        for url, options, name in ((f"age::{server.url}/wide.parquet.age", {"age": {"identity_file": str(key)}}, "age"),
                                   (f"{server.url}/wide.parquet", {}, "plain http (fsspec defaults)")):
            for group, column in picks:
                fsspec.filesystem("http").clear_instance_cache()
                before, requests = server.bytes_sent, server.requests
                start = time.perf_counter()
                with fsspec.open(url, "rb", **options) as f:
                    got = pq.ParquetFile(f).read_row_group(group, columns=[column])
                seconds = time.perf_counter() - start
                sent = server.bytes_sent - before
                want = truth.read_row_group(group, columns=[column])
                if not got.equals(want):
                    raise RuntimeError(f"{name}: row group {group} column {column} differs from the plaintext")
                record = {"via": name, "row_group": group, "column": column, "bytes_sent": sent,
                          "requests": server.requests - requests, "fraction": sent / size, "seconds": seconds}
                out["reads"].append(record)
                print(f"http {name}: group {group} {column}: {sent} bytes sent ({100 * sent / size:.2f}%), "
                      f"{record['requests']} requests, {seconds:.3f} s", file=sys.stderr)
    return out


# dask


def _part(k: int, rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(k)
    return pd.DataFrame({
        "id": np.arange(k * rows, (k + 1) * rows, dtype=np.int64),
        "a": rng.random(rows), "b": rng.normal(size=rows), "c": rng.exponential(size=rows),
        "n": rng.integers(0, 1000, rows, dtype=np.int32),
        "key": pd.Series(rng.integers(0, 1000, rows)).map("customer-{:04d}".format),
    })


# (name, dask job, the same job in pandas): an I/O-bound scan of every numeric
# column, and a group-by over a string column.
NUMERIC = ["id", "a", "b", "c", "n"]
JOBS = [
    ("sum", lambda df: df[NUMERIC].sum(), lambda df: df[NUMERIC].sum()),
    ("groupby", lambda df: df.groupby("key").agg({"a": "mean", "n": "max"}),
     lambda df: df.groupby("key").agg({"a": "mean", "n": "max"})),
]


def _same(got: pd.DataFrame | pd.Series, want) -> bool:
    # Sums of mixed columns come out as float64, added in an order that differs by engine.
    got = got.sort_index()
    return got.index.equals(want.index) and np.allclose(got.to_numpy(dtype=float), want.to_numpy(dtype=float),
                                                        rtol=1e-12)


def bench_dask(work: Path, key: Path, recipient: str, reps: int) -> dict:
    import dask.dataframe as dd
    import distributed

    rows = 1 << 19
    plain_dir, sealed_dir = work / "parts-plain", work / "parts-age"
    plain_dir.mkdir(exist_ok=True)
    sealed_dir.mkdir(exist_ok=True)
    for k in range(8):
        plain = plain_dir / f"part-{k}.parquet"
        if not plain.exists():
            _part(k, rows).to_parquet(plain)
        _sealed_copy(plain, sealed_dir / f"part-{k}.parquet", recipient)
    frame = pd.concat(pd.read_parquet(p) for p in sorted(plain_dir.glob("*.parquet")))
    sources = {"age": lambda: dd.read_parquet(f"age::file://{sealed_dir}/*.parquet",
                                              storage_options={"age": {"identity_file": str(key)}}),
               "plain": lambda: dd.read_parquet(f"file://{plain_dir}/*.parquet")}
    wants, cases, results = {}, {}, {}
    for job, on_dask, on_pandas in JOBS:
        wants[job] = on_pandas(frame).sort_index()
        for source, read in sources.items():
            name = f"{job} {source}"
            cases[name] = lambda name=name, read=read, on_dask=on_dask: results.__setitem__(
                name, on_dask(read()).compute())

    # The workers' CPU seconds per job, read before and after it, untimed:
    # other jobs on the machine change the wall times far more than these.
    cpu_start, worker_cpu = {}, {name: [] for name in cases}

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:

        def workers_cpu() -> float:
            return sum(client.run(time.process_time).values())

        def prepare(name):
            # The scheduler releases a result after compute() returns; a job
            # whose graph is still held would be answered from memory.
            while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
                time.sleep(0.01)
            cpu_start[name] = workers_cpu()

        def verify(name):
            worker_cpu[name].append(workers_cpu() - cpu_start[name])
            if not _same(results.pop(name), wants[name.split()[0]]):
                raise RuntimeError(f"dask {name}: the result differs from pandas on the plaintext")

        for name in cases:  # workers import and warm up before timing
            prepare(name)
            cases[name]()
            verify(name)
            worker_cpu[name].clear()
        runs = common.interleave(cases, reps, prepare=prepare, verify=verify)
    out = {"parts": 8, "rows_per_part": rows, "plain_bytes": sum(p.stat().st_size for p in plain_dir.glob("*")),
           "cluster": "LocalCluster(n_workers=2, threads_per_worker=1, processes=True)", "jobs": {}}
    for job, _, _ in JOBS:
        age, plain = runs[f"{job} age"], runs[f"{job} plain"]
        out["jobs"][job] = {"age_seconds": common.median_seconds(age), "plain_seconds": common.median_seconds(plain),
                            "age_speed_vs_plain": 1 / common.paired_ratio(plain, age),
                            "age_worker_cpu_seconds": statistics.median(worker_cpu[f"{job} age"]),
                            "plain_worker_cpu_seconds": statistics.median(worker_cpu[f"{job} plain"]),
                            "plain_over_age_worker_cpu": statistics.median(
                                p / a for p, a in zip(worker_cpu[f"{job} plain"], worker_cpu[f"{job} age"])),
                            "runs": {"age": age["runs"], "plain": plain["runs"]},
                            "worker_cpu": {"age": worker_cpu[f"{job} age"], "plain": worker_cpu[f"{job} plain"]}}
    return out


# random access


def _rchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io")


def _random_reads(f, size: int, length: int, count: int, seed: int) -> tuple[float, float]:
    """Seconds and rchar bytes for `count` reads of `length` at uniform offsets."""
    rng = random.Random(seed)
    offsets = [rng.randrange(size - length + 1) for _ in range(count)]
    before, start = _rchar(), time.perf_counter()
    for offset in offsets:
        f.seek(offset)
        if len(f.read(length)) != length:
            raise RuntimeError("short read")
    return time.perf_counter() - start, _rchar() - before


def bench_random(work: Path, key: Path, recipient: str, reps: int) -> dict:
    plain, sealed = work / "random-1g.bin", work / "random-1g.age"
    if not plain.exists():
        common.make_file(plain, GiB)
    _sealed_copy(plain, sealed, recipient)
    common.warm(sealed)
    common.warm_engine()
    identities = _identities(key)
    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(key))
    out = {"file_plaintext_bytes": GiB}

    with fs.open(str(sealed)) as f, open(plain, "rb") as truth:
        for offset in random.Random(1).sample(range(GiB - 4096), 50):
            f.seek(offset)
            truth.seek(offset)
            if f.read(4096) != truth.read(4096):
                raise RuntimeError(f"age:: read at {offset} differs from the plaintext")
        seconds, fetched = _random_reads(f, GiB, 4096, 20000, 2)
        out["random_4k"] = {"reads": 20000, "reads_per_s": 20000 / seconds, "bytes_fetched_per_read": fetched / 20000}
        curve = []
        for length in [1, 16, 256, 4096, 16 << 10, 64 << 10, 256 << 10, MiB, 4 * MiB, 16 * MiB]:
            count = 400 if length <= 64 << 10 else 40
            seconds, fetched = _random_reads(f, GiB, length, count, length)
            curve.append({"bytes_read": length, "bytes_fetched_per_read": fetched / count,
                          "reads_per_s": count / seconds})
        out["random_curve"] = curve
    with open(sealed, "rb") as raw:
        d = agefast.decryptor(raw, identities)
        rng = random.Random(2)
        offsets = [rng.randrange(GiB - 4096) for _ in range(20000)]
        before, start = _rchar(), time.perf_counter()
        for offset in offsets:
            d.pread(offset, 4096)
        seconds = time.perf_counter() - start
        out["random_4k_decryptor_pread"] = {"reads_per_s": 20000 / seconds,
                                            "bytes_fetched_per_read": (_rchar() - before) / 20000}
    print(f"random 4 KiB: {out['random_4k']}, decryptor.pread {out['random_4k_decryptor_pread']}", file=sys.stderr)

    block = MiB
    buf = bytearray(block)

    def through_age():
        with fs.open(str(sealed)) as f:
            while f.read(block):
                pass

    def decryptor_readinto():
        with open(sealed, "rb") as raw:
            d = agefast.decryptor(raw, identities)
            while d.readinto(buf):
                pass

    def decryptor_read():
        with open(sealed, "rb") as raw:
            d = agefast.decryptor(raw, identities)
            while d.read(block):
                pass

    def ciphertext_read():
        with open(sealed, "rb") as raw:
            while raw.readinto(buf):
                pass

    cases = {"age:: read(1 MiB)": through_age, "decryptor.readinto(1 MiB buffer)": decryptor_readinto,
             "decryptor.read(1 MiB)": decryptor_read, "read the ciphertext (floor)": ciphertext_read}
    runs = common.interleave(cases, reps)
    out.update(_writes(work, fs, recipient, reps))
    out["sequential"] = {name: common.summarize(case, GiB) for name, case in runs.items()}
    out["sequential_age_vs_decryptor_readinto"] = 1 / common.paired_ratio(
        runs["decryptor.readinto(1 MiB buffer)"], runs["age:: read(1 MiB)"])
    out["sequential_age_vs_decryptor_read"] = 1 / common.paired_ratio(
        runs["decryptor.read(1 MiB)"], runs["age:: read(1 MiB)"])
    out["sequential_runs"] = {name: case["runs"] for name, case in runs.items()}
    return out


def bench_floor(work: Path, key: Path, recipient: str, reps: int) -> dict:
    plain, sealed = work / "part-18mb.parquet", work / "part-18mb.parquet.age"
    if not plain.exists():
        _part(0, 524288).to_parquet(plain)
    _sealed_copy(plain, sealed, recipient)
    common.warm(plain, sealed)
    common.warm_engine()
    identities = _identities(key)
    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(key))
    ciphertext = sealed.read_bytes()
    truth = plain.read_bytes()
    buf = bytearray(len(truth))
    with fs.open(str(sealed)) as f:
        if f.read() != truth:
            raise RuntimeError("age:: read differs from the plaintext")
    want = pq.read_table(plain)

    def plain_read():
        with open(plain, "rb") as f:
            f.read()

    def decrypt_into():
        agefast.decrypt_into(ciphertext, identities, buf)

    def age_read():
        with fs.open(str(sealed)) as f:
            f.read()

    def plain_table():
        pq.read_table(plain)

    def age_table():
        with fs.open(str(sealed)) as f:
            if pq.read_table(f).num_rows != want.num_rows:
                raise RuntimeError("age:: read_table lost rows")

    cases = {"plain read": plain_read, "decrypt_into": decrypt_into, "age:: read()": age_read,
             "pq.read_table plain": plain_table, "pq.read_table age::": age_table}
    runs = common.interleave(cases, reps)
    seconds = {name: [r["seconds"] for r in case["runs"]] for name, case in runs.items()}
    cpu = {name: [r["cpu_seconds"] for r in case["runs"]] for name, case in runs.items()}
    out = {"plaintext_bytes": len(truth), "ciphertext_bytes": len(ciphertext), "load_average": os.getloadavg(),
           "cases": {name: common.summarize(case, len(truth)) for name, case in runs.items()}}
    for name, plain_case in (("age:: read()", "plain read"), ("pq.read_table age::", "pq.read_table plain")):
        rounds = [a / (p + d) for a, p, d in zip(seconds[name], seconds[plain_case], seconds["decrypt_into"])]
        # CPU seconds of every thread: what the layer costs, whatever else the machine runs.
        cpu_rounds = [a / (p + d) for a, p, d in zip(cpu[name], cpu[plain_case], cpu["decrypt_into"])]
        out[f"{name} / ({plain_case} + decrypt_into)"] = {
            "median_of_rounds": statistics.median(rounds),
            "best_runs": min(seconds[name]) / (min(seconds[plain_case]) + min(seconds["decrypt_into"])),
            "cpu_median_of_rounds": statistics.median(cpu_rounds)}
    out["runs"] = {name: case["runs"] for name, case in runs.items()}
    return out


def _writes(work: Path, fs, recipient: str, reps: int) -> dict:
    """Writing 1 GiB in 1 MiB writes: through age::file:// against agefast.encryptor
    onto a file, and a plain write of as many bytes (the floor)."""
    piece = os.urandom(MiB)
    target = work / "written.age"
    recipients = [agefast.x25519.Recipient.from_str(recipient)]
    writer = fsspec.filesystem("age", target_protocol="file", recipients=[recipient])

    def through_age():
        with writer.open(str(target), "wb") as f:
            for _ in range(GiB // MiB):
                f.write(piece)

    def encryptor():
        with open(target, "wb") as raw, agefast.encryptor(raw, recipients) as f:
            for _ in range(GiB // MiB):
                f.write(piece)

    def plain_write():
        with open(target, "wb") as raw:
            for _ in range(GiB // MiB):
                raw.write(piece)

    def verify(name):
        if name != "write the bytes (floor)":
            size = fs.size(str(target))
            if size != GiB or fs.cat_file(str(target), start=size - MiB) != piece:
                raise RuntimeError(f"{name}: the file written does not decrypt to what was written")

    cases = {"age:: write(1 MiB)": through_age, "encryptor.write(1 MiB)": encryptor,
             "write the bytes (floor)": plain_write}
    runs = common.interleave(cases, reps, prepare=lambda name: target.unlink(missing_ok=True), verify=verify)
    return {"writes": {name: common.summarize(case, GiB) for name, case in runs.items()},
            "writes_age_vs_encryptor": 1 / common.paired_ratio(runs["encryptor.write(1 MiB)"],
                                                               runs["age:: write(1 MiB)"]),
            "writes_runs": {name: case["runs"] for name, case in runs.items()}}


def plot(curve: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    read = np.array([p["bytes_read"] for p in curve], dtype=float)
    fetched = np.array([p["bytes_fetched_per_read"] for p in curve])
    # A read of L bytes at a uniform offset touches 1 + (L - 1) / 64 KiB chunks on average.
    model = (1 + (read - 1) / CHUNK) * SEALED_CHUNK
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    ax.loglog(read, fetched, "o-", label="age::file:// (measured, rchar)")
    ax.loglog(read, model, "--", color="gray", label="chunks touched x 65,552 B")
    ax.loglog(read, read, ":", color="black", label="bytes read")
    ax.set_xlabel("bytes read per random read")
    ax.set_ylabel("bytes fetched from the wrapped file per read")
    ax.set_title("Random reads of a 1 GiB age file")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    print(f"wrote {path}", file=sys.stderr)


def _key(work: Path) -> tuple[Path, str]:
    """The working directory's key, made once: the sealed files made with it are kept."""
    key = work / "key.txt"
    if not key.exists():
        return common.make_key(work)
    return key, str(_identities(key)[0].to_public())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["http", "dask", "random", "floor", "all"], default="all")
    ap.add_argument("--reps", type=int, default=5, help="rounds of the interleaved cases (default 5)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/agefast-bench/data"), help="working directory")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    key, recipient = _key(args.dir)
    if args.part in ("http", "all"):
        common.save("data-http", bench_http(args.dir, key, recipient))
    if args.part in ("dask", "all"):
        result = bench_dask(args.dir, key, recipient, args.reps)
        for job, numbers in result["jobs"].items():
            print(f"dask {job}: age {numbers['age_speed_vs_plain']:.2f}x the speed of plain, worker CPU "
                  f"{numbers['plain_over_age_worker_cpu']:.2f}x", file=sys.stderr)
        common.save("data-dask", result)
    if args.part in ("random", "all"):
        result = bench_random(args.dir, key, recipient, args.reps)
        plot(result["random_curve"], Path(__file__).resolve().parent.parent / "docs/img/data_random_reads.png")
        print(f"sequential: age:: {result['sequential_age_vs_decryptor_readinto']:.2f}x decryptor.readinto, "
              f"writes {result['writes_age_vs_encryptor']:.2f}x encryptor", file=sys.stderr)
        common.save("data-random", result)
    if args.part in ("floor", "all"):
        result = bench_floor(args.dir, key, recipient, args.reps)
        for name, ratio in result.items():
            if " / (" in name:
                print(f"{name}: {ratio['median_of_rounds']:.3f} (median of rounds), "
                      f"{ratio['best_runs']:.3f} (best runs), CPU {ratio['cpu_median_of_rounds']:.3f} "
                      "(median of rounds)", file=sys.stderr)
        print(f"load average {result['load_average']}", file=sys.stderr)
        common.save("data-floor", result)


if __name__ == "__main__":  # distributed.LocalCluster spawns its workers
    main()
