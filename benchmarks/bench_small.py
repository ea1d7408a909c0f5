"""Small messages in process: microseconds per call against pyrage and the primitives' floor.

For every size, interleaved round by round: agefast.encrypt/decrypt,
pyrage.encrypt/decrypt, and the primitives case of bench_sizes.py (the
header's primitives and the bare STREAM loop, nothing around them). Each case
times CALLS calls one by one and keeps their median: a call that another
process preempted (the cores here are shared) is dropped instead of being
averaged in, which bench_sizes.py's samples of many calls cannot do. Reported:
the median over rounds of each case's median, the median of the per-round
ratios pyrage/agefast, and agefast's time above the floor.

    python benchmarks/bench_small.py [--sizes KiB,KiB,...] [--reps N]
"""

import os
import statistics
import sys
import time

import agefast
import pyrage

import common
from bench_sizes import AgeFile, Keys, sealed_size, stream_open, stream_seal

CALLS = 200


def per_call_median(fn) -> float:
    times = []
    for _ in range(CALLS):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1000


def one_size(size: int, reps: int, keys: Keys) -> dict:
    data = os.urandom(size)
    age_file = AgeFile(keys, data)
    key, start, sealed = age_file.key, age_file.start, age_file.sealed
    ceiling_out = memoryview(bytearray(sealed_size(size)))
    ceiling_plain = memoryview(bytearray(size))
    if (pyrage.decrypt(agefast.encrypt(data, keys.recipients), [keys.py_identity]) != data
            or agefast.decrypt(sealed, keys.identities) != data):
        raise SystemExit(f"{common.size_name(size)}: agefast does not round-trip with pyrage")
    cases = {
        "encrypt": {
            "agefast": lambda: agefast.encrypt(data, keys.recipients),
            "pyrage": lambda: pyrage.encrypt(data, [keys.py_recipient]),
            "primitives": lambda: (age_file.encrypt_primitives(keys),
                                   stream_seal(key, memoryview(data), ceiling_out)),
        },
        "decrypt": {
            "agefast": lambda: agefast.decrypt(sealed, keys.identities),
            "pyrage": lambda: pyrage.decrypt(sealed, [keys.py_identity]),
            "primitives": lambda: (age_file.decrypt_primitives(keys),
                                   stream_open(key, memoryview(sealed)[start:], ceiling_plain)),
        },
    }
    result: dict = {"size": size}
    for op, named in cases.items():
        rounds: dict[str, list[float]] = {name: [] for name in named}
        for _ in range(reps):
            for name, fn in named.items():
                rounds[name].append(per_call_median(fn))
        ratios = [p / a for p, a in zip(rounds["pyrage"], rounds["agefast"])]
        above = [a - f for a, f in zip(rounds["agefast"], rounds["primitives"])]
        result[op] = {"us_per_call": {n: statistics.median(v) for n, v in rounds.items()}, "rounds": rounds,
                      "ratio_vs_pyrage": statistics.median(ratios), "above_floor_us": statistics.median(above)}
        us = result[op]["us_per_call"]
        print(f"{common.size_name(size):>7} {op}: agefast {us['agefast']:6.1f} us, pyrage {us['pyrage']:6.1f}, "
              f"primitives {us['primitives']:6.1f}; pyrage/agefast {result[op]['ratio_vs_pyrage']:.2f}x, "
              f"agefast above the floor {result[op]['above_floor_us']:.1f} us", flush=True)
    return result


def main() -> None:
    args = common.arguments(__doc__, 9, text_options=[("--sizes", "1,4,16,64", "sizes in KiB, comma-separated")])
    keys = Keys(args.dir)
    result = {"calls_per_case": CALLS, "sizes": [one_size(int(k) * 1024, args.reps, keys)
                                                 for k in args.sizes.split(",")]}
    print(f"load average at the end: {os.getloadavg()}", file=sys.stderr)
    common.save("small", result)


if __name__ == "__main__":
    main()
