"""What the first large batch costs a fresh process: the Numba engine's start.

Every agefast command that meets a batch of 1 MiB or more imports numba and
loads the compiled kernels from Numba's on-disk cache before sealing a byte.
Each run is a new interpreter that times, in order: `import agefast`, the
import of agefast.kernels (numba, numpy, llvmlite), the first 4 MiB batch
(cache load + seal), and a second 4 MiB batch (steady state); and reports its
peak RSS (VmHWM) before and after. The cache is warmed first, so no run compiles.

    python benchmarks/bench_startup.py [--reps N]
"""

import argparse
import json
import statistics
import subprocess
import sys

import common

PROBE = """
import json, os, time
def peak_kib():
    # VmHWM belongs to this program's own address space; ru_maxrss would
    # carry over the peak of the benchmark process that forked it.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
t0 = time.perf_counter()
import agefast
from agefast import chunks
t1 = time.perf_counter()
rss_before = peak_kib()
from agefast import kernels
t2 = time.perf_counter()
key, src = os.urandom(32), os.urandom(4 << 20)
dst = bytearray(chunks.sealed_size(len(src)))
kernels.seal_chunks(key, 0, src, dst, True)
t3 = time.perf_counter()
kernels.seal_chunks(key, 0, src, dst, True)
t4 = time.perf_counter()
check = bytearray(len(src))
assert chunks.open_chunks(key, 0, dst, check, True) == 64 and check == src
print(json.dumps({"import_agefast_s": t1 - t0, "import_kernels_s": t2 - t1, "first_4mib_batch_s": t3 - t2,
                  "second_4mib_batch_s": t4 - t3,
                  "rss_before_kernels_kib": rss_before,
                  "rss_after_kib": peak_kib()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7, help="fresh processes (default 7)")
    args = ap.parse_args()
    common.warm_engine()
    runs = []
    for _ in range(args.reps):
        done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                              env=common.engine_env(None))
        runs.append(json.loads(done.stdout))
    medians = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    print(json.dumps(medians, indent=1), file=sys.stderr)
    common.save("startup", {"runs": runs, "medians": medians})


if __name__ == "__main__":
    main()
