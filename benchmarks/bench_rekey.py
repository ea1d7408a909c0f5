"""agefast-rekey against cp of the same file: a new header, the payload copied.

Re-keys one page-cached age file (written by Go age) to a new X25519
recipient with the command, and copies the same file with `cp`, interleaved
round by round. Every output is checked outside the timing: it decrypts with
Go age and the new identity to the plaintext, and its payload (everything
after the header) is byte for byte the input's.

    python benchmarks/bench_rekey.py [--size MiB] [--reps N] [--dir DIR] [--settle S]

--settle waits before each run, as in bench_files.py. Results go to
benchmarks/results/rekey.json; "cp / agefast-rekey" is the median of the
per-round ratios of agefast-rekey's time to cp's (issue 27 asks for <= 1.5).
"""

import hashlib
import sys
import time
from pathlib import Path

import common
from common import AGE, AGEFAST, MiB

REKEY = str(Path(AGEFAST).with_name("agefast-rekey"))


def payload_digest(path) -> tuple[int, str]:
    """(header length, SHA-256 of what follows it) of a binary age file."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    end = head.index(b"\n---") + 1
    end = head.index(b"\n", end) + 1
    with open(path, "rb") as f:
        f.seek(end)
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return end, digest


def main() -> None:
    args = common.arguments(__doc__, 7, [("--size", 1024, "file size in MiB"),
                                         ("--settle", 3, "seconds to wait before each run (see bench_files.py)")])
    size = args.size * MiB
    plain, sealed, out, check = (args.dir / n for n in ("rekey-plain", "rekey-plain.age", "rekey-out", "rekey-check"))
    digest = common.make_file(plain, size)
    for folder in ("old", "new"):
        (args.dir / folder).mkdir(exist_ok=True)
    old_key, old_recipient = common.make_key(args.dir / "old")
    new_key, new_recipient = common.make_key(args.dir / "new")
    common.run([AGE, "-r", old_recipient, "-o", str(sealed), str(plain)])
    plain.unlink()
    common.warm(sealed)
    _, sealed_payload = payload_digest(sealed)
    s, o = str(sealed), str(out)
    cases = {
        "agefast-rekey": lambda: common.run([REKEY, "-i", str(old_key), "-r", new_recipient, "-o", o, s]),
        "cp": lambda: common.run(["cp", s, o]),
    }

    def prepare(tool):
        out.unlink(missing_ok=True)
        check.unlink(missing_ok=True)
        common.warm(sealed)
        time.sleep(args.settle)

    def verify(tool):
        if tool == "cp":
            if common.sha256_file(out) != common.sha256_file(sealed):
                raise SystemExit("cp: the copy differs")
            return
        if payload_digest(out)[1] != sealed_payload:
            raise SystemExit("agefast-rekey: the payload is not the input's")
        common.run([AGE, "-d", "-i", str(new_key), "-o", str(check), o])
        if common.sha256_file(check) != digest:
            raise SystemExit("agefast-rekey: the output does not decrypt to the plaintext")

    raw = common.interleave(cases, args.reps, prepare=prepare, verify=verify)
    ratio = common.paired_ratio(raw["cp"], raw["agefast-rekey"])
    result = {"dir": str(args.dir), "filesystem": common.filesystem(args.dir), "size": size,
              "settle": args.settle,
              "cases": {tool: {**common.summarize(c, size), **c} for tool, c in raw.items()},
              "ratios": {"cp / agefast-rekey": ratio}}
    print(f"agefast-rekey takes {ratio:.2f}x the time of cp", file=sys.stderr)
    for path in (sealed, out, check):
        path.unlink(missing_ok=True)
    common.save("rekey", result)


if __name__ == "__main__":
    main()
