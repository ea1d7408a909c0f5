"""What a fresh 256 MiB result costs: the buffer agefast.encrypt/decrypt return.

Each run is a new process that copies 256 MiB of random bytes into a result
made one of four ways and times only that; the runs are interleaved round by
round, with a pause before each (--settle, default 3 s) so every run meets
memory as a one-shot job does: on this VM freed memory goes back to the host
about two seconds after it is freed (benchmarks/HISTORY.md, "Free page reporting").

- BytesIO: an io.BytesIO stretched to size (zero-filled by CPython), written
  through getbuffer() (api.py until 4925c3b);
- new_bytes: agefast.io.buffers.new_bytes, uninitialised bytes written once;
- huge pages: the same with madvise(MADV_HUGEPAGE) on its 2 MiB-aligned part
  (tried in 4925c3b and dropped);
- reused: a bytearray faulted in before the timed copy (the floor).

    python benchmarks/bench_alloc.py [--reps N] [--settle S]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

PROBE = r"""
import ctypes, io, os, sys, time
from agefast.io import buffers
SIZE = 256 << 20
src = memoryview(os.urandom(SIZE))

def fill(view):
    view[:] = src

def bytesio():
    out = io.BytesIO()
    out.seek(SIZE - 1)
    out.write(b"\0")
    with out.getbuffer() as view:
        fill(view)
    return out.getvalue()

def huge_pages():
    madvise = ctypes.CDLL(None).madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    result = buffers._ctypes()[1](None, SIZE)
    address = ctypes.cast(ctypes.c_char_p(result), ctypes.c_void_p).value
    huge = 2 << 20
    start, end = -(-address // huge) * huge, (address + SIZE) // huge * huge
    madvise(start, end - start, 14)  # MADV_HUGEPAGE
    fill(memoryview((ctypes.c_char * SIZE).from_address(address)).cast("B"))
    return result

reused = bytearray(SIZE)
reused[:] = src
case = {"BytesIO": bytesio, "new_bytes": lambda: buffers.new_bytes(SIZE, fill),
        "huge pages": huge_pages, "reused": lambda: fill(memoryview(reused)) or reused}[sys.argv[1]]
t0 = time.perf_counter()
result = case()
seconds = time.perf_counter() - t0
if result != src:
    raise SystemExit("the result differs from the source")
print(seconds)
"""

CASES = ["BytesIO", "new_bytes", "huge pages", "reused"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--settle", type=float, default=3.0)
    args = ap.parse_args()
    times = {name: [] for name in CASES}
    for rep in range(args.reps):
        for name in CASES[rep % len(CASES):] + CASES[:rep % len(CASES)]:
            time.sleep(args.settle)
            out = subprocess.run([sys.executable, "-c", PROBE, name], check=True, capture_output=True, text=True)
            times[name].append(float(out.stdout))
    print(f"load average {os.getloadavg()}, {args.reps} fresh processes per case, {args.settle} s settle")
    for name, values in times.items():
        print(f"{name:12} median {statistics.median(values) * 1e3:6.1f} ms per 256 MiB "
              f"(min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f})")


if __name__ == "__main__":
    main()
