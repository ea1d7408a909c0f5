"""Callers on several threads at once: microseconds a call between them, against pyrage and the cryptography engine.

For every size and every case, one caller thread and then CALLERS of them
make CALLS calls in all (each caller its share), in interleaved rounds; a
round's figure is its wall time over CALLS. Cases: agefast.encrypt/decrypt
with the kernels loaded (as they are once a process has moved 32 MiB, or
after kernels.warm_up()), the same forced onto cryptography
(AGEFAST_ENGINE=cryptography, which holds the GIL in its AEAD), and pyrage.
Reported: each case's best round, and how much faster CALLERS callers get
through the calls than one.

    python benchmarks/bench_callers.py [--sizes KiB,KiB,...] [--reps N] [--callers N]
"""

import os
import sys
import threading
import time

import agefast
import pyrage

import common
from bench_sizes import Keys

CALLS = 400


def wall_per_call(fn, callers: int) -> float:
    """µs a call, CALLS calls split over `callers` threads started together."""
    share = CALLS // callers

    def work():
        for _ in range(share):
            fn()

    threads = [threading.Thread(target=work) for _ in range(callers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.perf_counter() - start) / (share * callers) * 1e6


def one_size(size: int, reps: int, callers: int, keys: Keys) -> dict:
    data = os.urandom(size)
    sealed = agefast.encrypt(data, keys.recipients)
    if pyrage.decrypt(sealed, [keys.py_identity]) != data:
        raise SystemExit(f"{common.size_name(size)}: agefast does not round-trip with pyrage")
    # (call, AGEFAST_ENGINE for the whole run of it: set around all the callers, not per call, since
    # os.environ is the process's)
    cases = {
        "encrypt": {
            "agefast": (lambda: agefast.encrypt(data, keys.recipients), None),
            "agefast-crypto": (lambda: agefast.encrypt(data, keys.recipients), "cryptography"),
            "pyrage": (lambda: pyrage.encrypt(data, [keys.py_recipient]), None),
        },
        "decrypt": {
            "agefast": (lambda: agefast.decrypt(sealed, keys.identities), None),
            "agefast-crypto": (lambda: agefast.decrypt(sealed, keys.identities), "cryptography"),
            "pyrage": (lambda: pyrage.decrypt(sealed, [keys.py_identity]), None),
        },
    }
    result: dict = {"size": size}
    for op, named in cases.items():
        rounds: dict[str, list[float]] = {f"{name} x{n}": [] for name in named for n in (1, callers)}
        for _ in range(reps):
            for name, (fn, engine) in named.items():
                for n in (1, callers):
                    rounds[f"{name} x{n}"].append(common.in_engine(engine, lambda: wall_per_call(fn, n))())
        best = {name: min(values) for name, values in rounds.items()}
        result[op] = {"us_per_call": best, "rounds": rounds}
        print(f"{common.size_name(size):>7} {op}, µs a call: " + ", ".join(f"{k} {v:.0f}" for k, v in best.items())
              + f"; {callers} callers against one: agefast {best['agefast x1'] / best[f'agefast x{callers}']:.2f}x, "
              f"pyrage {best['pyrage x1'] / best[f'pyrage x{callers}']:.2f}x", flush=True)
    return result


def main() -> None:
    args = common.arguments(__doc__, 5, options=[("--callers", 2, "caller threads")],
                            text_options=[("--sizes", "256,512", "sizes in KiB, comma-separated")])
    common.warm_engine()
    keys = Keys(args.dir)
    result = {"calls": CALLS, "callers": args.callers,
              "sizes": [one_size(int(k) * 1024, args.reps, args.callers, keys) for k in args.sizes.split(",")]}
    print(f"load average at the end: {os.getloadavg()}", file=sys.stderr)
    common.save("callers", result)


if __name__ == "__main__":
    main()
