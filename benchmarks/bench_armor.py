"""Armored files through the command: agefast -a against Go age -a.

Encrypts one page-cached file to armor and decrypts one armored file (written
by Go age) with both commands, interleaved round by round, with the floor in
the same run: "python-copy" (a bare interpreter copying the input to the
output in 1 MiB steps, as in bench_files.py) and `cp`. Every encryption is
checked by decrypting it with Go age, every decryption against the plaintext.

    python benchmarks/bench_armor.py [--size MiB] [--reps N] [--dir DIR] [--settle S]

agefast runs as a user would run it (default engine choice and threads);
results go to benchmarks/results/armor.json.
"""

import sys
import time

import common
from bench_files import COPY
from common import AGE, AGEFAST, MiB

RATIOS = {
    "agefast-cli / age-cli": ("agefast-cli", "age-cli"),
    "python-copy / age-cli": ("python-copy", "age-cli"),
    "cp / agefast-cli": ("cp", "agefast-cli"),
}


def main() -> None:
    args = common.arguments(__doc__, 5, [("--size", 256, "file size in MiB"),
                                         ("--settle", 0, "seconds to wait before each run (see bench_files.py)")])
    size = args.size * MiB
    plain, sealed, out, check = (args.dir / n for n in ("armor-plain", "armor-plain.asc", "armor-out", "armor-check"))
    digest = common.make_file(plain, size)
    key, recipient = common.make_key(args.dir)
    common.run([AGE, "-a", "-r", recipient, "-o", str(sealed), str(plain)])
    common.warm(plain, sealed)
    p, s, o, k = str(plain), str(sealed), str(out), str(key)
    copy = [sys.executable, "-I", "-S", "-c", COPY]
    work = {
        "encrypt": {
            "agefast-cli": lambda: common.run([AGEFAST, "-a", "-r", recipient, "-o", o, p]),
            "age-cli": lambda: common.run([AGE, "-a", "-r", recipient, "-o", o, p]),
            "python-copy": lambda: common.run(copy + [p, o]),
            "cp": lambda: common.run(["cp", p, o]),
        },
        "decrypt": {
            "agefast-cli": lambda: common.run([AGEFAST, "-d", "-i", k, "-o", o, s]),
            "age-cli": lambda: common.run([AGE, "-d", "-i", k, "-o", o, s]),
            "python-copy": lambda: common.run(copy + [s, o]),
            "cp": lambda: common.run(["cp", s, o]),
        },
    }
    copied = {"encrypt": digest, "decrypt": common.sha256_file(sealed)}

    def prepare(tool):
        out.unlink(missing_ok=True)
        check.unlink(missing_ok=True)
        time.sleep(args.settle)

    def verify(op, tool):
        if tool in ("python-copy", "cp"):
            ok = common.sha256_file(out) == copied[op]
        elif op == "encrypt":
            if not out.read_bytes().startswith(b"-----BEGIN AGE ENCRYPTED FILE-----\n"):
                raise SystemExit(f"{op} with {tool}: the output is not armored")
            common.run([AGE, "-d", "-i", k, "-o", str(check), o])
            ok = common.sha256_file(check) == digest
        else:
            ok = common.sha256_file(out) == digest
        if not ok:
            raise SystemExit(f"{op} with {tool}: wrong output")

    result = {"dir": str(args.dir), "filesystem": common.filesystem(args.dir), "size": size,
              "armored_size": sealed.stat().st_size, "settle": args.settle, "ops": {}}
    for op, cases in work.items():
        raw = common.interleave(cases, args.reps, prepare=prepare, verify=lambda t, op=op: verify(op, t))
        result["ops"][op] = {
            "cases": {tool: {**common.summarize(c, size), **c} for tool, c in raw.items()},
            "ratios": {label: common.paired_ratio(raw[a], raw[b]) for label, (a, b) in RATIOS.items()},
        }
        print(op, {label: round(r, 2) for label, r in result["ops"][op]["ratios"].items()}, file=sys.stderr)
    for path in (plain, sealed, out, check):
        path.unlink(missing_ok=True)
    common.save("armor", result)


if __name__ == "__main__":
    main()
