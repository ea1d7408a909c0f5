"""Direct I/O: encrypt_file/decrypt_file with and without O_DIRECT, cold cache.

The page cache is overhead for a one-pass stream: every byte is copied into
it and evicts something else. This measures whether bypassing it pays, with
the cache dropped before every run and the output synced to disk inside the
timed region (otherwise buffered writes only measure a memcpy into the cache).
Needs root for /proc/sys/vm/drop_caches.

    python benchmarks/bench_direct.py [--size MiB] [--reps N] [--dir DIR]

Results go to benchmarks/results/direct.json.
"""

import argparse
import os
from pathlib import Path

import agefast

import common
from common import MiB


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="file size in MiB (default 1024)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/agefast-bench"))
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    size = args.size * MiB
    plain, sealed, out = args.dir / "plain", args.dir / "sealed", args.dir / "out"
    digest = common.make_file(plain, size)
    identity = agefast.x25519.Identity.generate()
    agefast.encrypt_file(plain, sealed, [identity.to_public()])
    common.warm_engine()

    def timed(fn):
        def call():
            fn()
            os.sync()
        return call

    cases = {}
    for direct in (False, True):
        mode = "direct" if direct else "buffered"
        cases[f"encrypt-{mode}"] = timed(
            lambda d=direct: agefast.encrypt_file(plain, out, [identity.to_public()], direct=d))
        cases[f"decrypt-{mode}"] = timed(lambda d=direct: agefast.decrypt_file(sealed, out, [identity], direct=d))

    def verify(name: str) -> None:
        if name.startswith("decrypt") and common.sha256_file(out) != digest:
            raise RuntimeError(f"{name} produced a wrong plaintext")
        if name.startswith("encrypt") and agefast.decrypt(out.read_bytes(), [identity]) != plain.read_bytes():
            raise RuntimeError(f"{name} produced a wrong ciphertext")

    runs = common.interleave(cases, args.reps, prepare=lambda name: drop_caches(), verify=verify)
    result = {
        "size": size,
        "filesystem": common.filesystem(args.dir),
        "cases": {name: common.summarize(case, size) for name, case in runs.items()},
        "ratios": {op: common.paired_ratio(runs[f"{op}-direct"], runs[f"{op}-buffered"])
                   for op in ("encrypt", "decrypt")},
        "runs": runs,
    }
    common.save("direct", result)
    for name, summary in result["cases"].items():
        print(f"{name:18} {summary['gb_per_s']:.2f} GB/s")
    for op, ratio in result["ratios"].items():
        print(f"{op}: direct is {ratio:.2f}x buffered")


if __name__ == "__main__":
    main()
