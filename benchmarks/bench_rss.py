"""Peak resident memory of the agefast command for a 64 MiB and a 1 GiB file.

Each run is one `/usr/bin/time -v` process, whose "Maximum resident set
size" is the command's own peak. A streaming tool needs the same memory for
any file size. agefast runs with its default engine choice (the Numba
kernels for the 4 MiB batches of its pipeline) and forced onto cryptography;
Go age is measured alongside for reference. Outputs are
verified (Go age decrypts agefast's ciphertext; the decryption equals the
plaintext).

    python benchmarks/bench_rss.py [--reps N] [--dir DIR]
"""

import re
import statistics
import subprocess
import sys

import common
from common import AGE, AGEFAST, GiB, MiB

SIZES = (64 * MiB, GiB)


def peak_kib(argv: list[str], env) -> int:
    done = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, check=True, env=env)
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))


def main() -> None:
    args = common.arguments(__doc__, 3)
    key, recipient = common.make_key(args.dir)
    common.warm_engine()  # a cold Numba cache would make the first run a compile
    plain, sealed, out, check = (args.dir / n for n in ("rss", "rss.age", "rss.out", "rss.check"))
    k = str(key)
    result = {"dir": str(args.dir), "filesystem": common.filesystem(args.dir), "sizes": {}}
    for size in SIZES:
        digest = common.make_file(plain, size)
        common.run([AGE, "-r", recipient, "-o", str(sealed), str(plain)])
        p, s, o = str(plain), str(sealed), str(out)
        default, crypto = common.engine_env(None), common.engine_env("cryptography")
        commands = {
            "agefast encrypt": ([AGEFAST, "-r", recipient, "-o", o, p], default),
            "agefast decrypt": ([AGEFAST, "-d", "-i", k, "-o", o, s], default),
            "agefast encrypt, cryptography engine": ([AGEFAST, "-r", recipient, "-o", o, p], crypto),
            "agefast decrypt, cryptography engine": ([AGEFAST, "-d", "-i", k, "-o", o, s], crypto),
            "age encrypt": ([AGE, "-r", recipient, "-o", o, p], None),
            "age decrypt": ([AGE, "-d", "-i", k, "-o", o, s], None),
        }
        peaks = {}
        for name, (argv, env) in commands.items():
            runs = []
            for _ in range(args.reps):
                out.unlink(missing_ok=True)
                runs.append(peak_kib(argv, env))
                if " encrypt" in name:
                    check.unlink(missing_ok=True)
                    common.run([AGE, "-d", "-i", k, "-o", str(check), o])
                    ok = common.sha256_file(check) == digest
                else:
                    ok = common.sha256_file(out) == digest
                if not ok:
                    raise SystemExit(f"{name} of {common.size_name(size)}: the output does not round-trip")
            peaks[name] = {"median_kib": statistics.median(runs), "runs_kib": runs}
            print(common.size_name(size), name, peaks[name], file=sys.stderr)
        result["sizes"][str(size)] = peaks
    small, large = (result["sizes"][str(s)] for s in SIZES)
    result["growth_kib"] = {name: large[name]["median_kib"] - small[name]["median_kib"] for name in small}
    for path in (plain, sealed, out, check):
        path.unlink(missing_ok=True)
    common.save("rss", result)


if __name__ == "__main__":
    main()
