"""What the engine costs a fresh process: time and peak RSS until the kernels are ready.

Each run is a new interpreter that times, in order: `import agefast`,
`kernels.warm_up()` (the engine ready: load the compiled kernels from the
cache, or compile them), the first 4 MiB batch on 2 threads and a second one
(steady state); it reports its peak RSS (VmHWM) before and after warm_up and
at the end, and whether numba was imported. Cases, interleaved:

  warm    the cache holds a shared library for this machine (the usual case)
  object  the cache holds an object file (filled where no C compiler driver
          was found), loaded by llvmlite's MCJIT
  cold    an empty cache: Numba compiles (seconds; --cold-reps runs)

Children run with bytecode caching on (PYTHONPYCACHEPREFIX in a temporary
directory, filled by a first run), as an installed agefast has its .pyc
files, whatever PYTHONDONTWRITEBYTECODE says here.

    python benchmarks/bench_startup.py [--reps N] [--cold-reps N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import common

PROBE = """
import json, os, sys, time
def peak_kib():
    # VmHWM belongs to this program's own address space; ru_maxrss would
    # carry over the peak of the benchmark process that forked it.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
t0 = time.perf_counter()
import agefast
from agefast.payload import rules
t1 = time.perf_counter()
rss_before = peak_kib()
from agefast import kernels
kernels.warm_up()
t2 = time.perf_counter()
rss_ready = peak_kib()
key, src = os.urandom(32), os.urandom(4 << 20)
dst = bytearray(rules.sealed_size(len(src)))
t3 = time.perf_counter()
kernels.seal_chunks(key, 0, src, dst, True, threads=2)
t4 = time.perf_counter()
kernels.seal_chunks(key, 0, src, dst, True, threads=2)
t5 = time.perf_counter()
check = bytearray(len(src))
assert kernels.open_chunks(key, 0, dst, check, True) == 64 and check == src
print(json.dumps({"import_agefast_s": t1 - t0, "engine_ready_s": t2 - t1, "first_4mib_batch_s": t4 - t3,
                  "second_4mib_batch_s": t5 - t4, "rss_before_kib": rss_before,
                  "rss_ready_extra_kib": rss_ready - rss_before, "rss_end_kib": peak_kib(),
                  "numba_imported": "numba" in sys.modules, "isa": kernels.isa()}))
"""


def run(env) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7, help="fresh processes per warm case (default 7)")
    ap.add_argument("--cold-reps", type=int, default=1, help="fresh processes with an empty cache (default 1)")
    args = ap.parse_args()
    common.warm_engine()
    with tempfile.TemporaryDirectory() as tmp:
        base = {k: v for k, v in common.engine_env(None).items() if k != "PYTHONDONTWRITEBYTECODE"}
        base["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        run(base)       # fill the bytecode cache
        no_cc = dict(base, NUMBA_CACHE_DIR=os.path.join(tmp, "object"), CC=os.path.join(tmp, "no-such-cc"))
        run(no_cc)      # fill the object-file cache
        envs = {"warm": base, "object": no_cc}
        runs = {name: [] for name in ("warm", "object", "cold")}
        for i in range(max(args.reps, args.cold_reps)):
            for name, env in envs.items():
                if i < args.reps:
                    runs[name].append(run(env))
            if i < args.cold_reps:
                runs["cold"].append(run(dict(base, NUMBA_CACHE_DIR=os.path.join(tmp, f"cold-{i}"))))
    medians = {}
    for name, rs in runs.items():
        if rs:
            medians[name] = {key: rs[0][key] if isinstance(value, (bool, str)) else statistics.median(r[key] for r in rs)
                             for key, value in rs[0].items()}
    for name, m in medians.items():
        print(f"{name:6s}: import agefast {m['import_agefast_s'] * 1e3:6.1f} ms, engine ready "
              f"{m['engine_ready_s'] * 1e3:8.1f} ms, +{m['rss_ready_extra_kib'] / 1024:5.1f} MiB peak RSS "
              f"(from {m['rss_before_kib'] / 1024:.1f}), first / second 4 MiB batch on 2 threads "
              f"{m['first_4mib_batch_s'] * 1e3:.1f} / {m['second_4mib_batch_s'] * 1e3:.1f} ms, "
              f"numba imported: {m['numba_imported']}", file=sys.stderr)
    print(f"load average {os.getloadavg()}", file=sys.stderr)
    common.save("engine_start", {"runs": runs, "medians": medians, "load_average": os.getloadavg()})


if __name__ == "__main__":
    main()
