"""File to file throughput: agefast (CLI and in-process) vs Go age and pyrage.

Encrypts and decrypts one page-cached file with each tool, all cases
interleaved round by round. Every decryption reads the same ciphertext
(written by Go age), every encryption output is checked by decrypting it with
Go age, and every decryption output is compared with the plaintext.

    python benchmarks/bench_files.py [--size MiB] [--reps N] [--dir DIR] [--cases A,B,...]

agefast runs both with its default engine choice and with
AGEFAST_ENGINE=cryptography, and with --threads 2 (the multi-core engine,
which each such process loads: the load is in its time); results go to
benchmarks/results/files.json.

--cases runs only the named cases (for more rounds of the ones a figure is
about, e.g. `--cases cp,age-cli,agefast-cli,python-copy`); the result then
goes to benchmarks/results/files_cases.json.

"cp" copies the same file: the I/O floor of file to file. The "-pipe-in"
cases read the input through a pipe from `cat`, the "-pipe-out" ones write
the output through a pipe to `cat` (the same cat on both sides).

"python-copy" is the floor of any Python command: a bare interpreter
(`python -I -S`) that only copies the input file to the output, reading
1 MiB at a time and writing 32 KiB at a time (agefast's write size), no
cryptography. Go age's time over it is the largest
ratio a Python command could reach against Go age on this machine.

--baseline CHECKOUT adds "agefast-cli-baseline": the same command run with
PYTHONPATH=CHECKOUT, another checkout of agefast (an earlier commit, say), in
the same rounds; the ratio "agefast-cli / agefast-cli-baseline" is the change's
(> 1: this checkout is faster). Before the rounds the baseline's bytecode is
compiled and its kernels are loaded, or compiled into the cache, through its
own `agefast --warm-up`, so that it starts as an installed copy does: where
PYTHONDONTWRITEBYTECODE is set a checkout has no bytecode (compiling it cost
each command ~60 ms here), and a cold cache would leave its runs on
cryptography.

--settle N waits N seconds after removing the last outputs, before each run.
The VM's balloon device has free page reporting on: memory the guest frees
(here, the deleted outputs' page cache) is handed back to the host about two
seconds later, and the next program to write a file faults it in again from
the host, at several times the system time (benchmarks/HISTORY.md, "Free page reporting"). Without a
wait, a run's cost depends on what ran just before it; with --settle 3 every
run starts from the same state, the one a command meets on an idle machine.
Before each run the input is read once more, so that every run finds it in
the page cache (the VM also pages out file pages unused for about a minute).
"""

from pathlib import Path

import sys
import time

import agefast
import pyrage

import common
from common import AGE, AGEFAST, MiB


def cases(key: Path, recipient: str, plain: Path, sealed: Path, out: Path, baseline: str) -> dict:
    """{(op, tool): timed callable}; in-process tools get key objects parsed once.

    agefast runs with its default engine choice (the Numba kernels for
    batches of 1 MiB and more) and, as "-crypto", forced onto cryptography.
    """
    key_text = key.read_text()
    ag_ids = agefast.parse_identities(key_text)
    ag_rcp = agefast.parse_recipients(recipient)
    py_id = pyrage.x25519.Identity.from_str(next(l for l in key_text.splitlines() if l.startswith("AGE-SECRET-KEY-")))
    py_rcp = pyrage.x25519.Recipient.from_str(recipient)
    p, s, o, k = str(plain), str(sealed), str(out), str(key)
    crypto = common.engine_env("cryptography")
    default = common.engine_env(None)
    enc, dec = [AGEFAST, "-r", recipient, "-o", o, p], [AGEFAST, "-d", "-i", k, "-o", o, s]
    copy = [sys.executable, "-I", "-S", "-c", COPY]
    t2 = ["--threads", "2"]

    def pipe_in(argv):
        return lambda: common.run(["bash", "-c", 'set -o pipefail; cat "$0" | "${@}"', argv[-1], *argv[:-1]])

    def pipe_out(argv):
        return lambda: common.run(["bash", "-c", 'set -o pipefail; "${@:2}" | cat > "$1"', "-", o, *argv])

    age_enc, age_dec = [AGE, "-r", recipient], [AGE, "-d", "-i", k]
    work = {
        ("encrypt", "cp"): lambda: common.run(["cp", p, o]),
        ("encrypt", "agefast-cli-t2"): lambda: common.run(enc[:1] + t2 + enc[1:], env=default),
        ("encrypt", "agefast-cli-pipe-in"): pipe_in(enc[:3] + ["-o", o, p]),
        ("encrypt", "age-cli-pipe-in"): pipe_in(age_enc + ["-o", o, p]),
        ("encrypt", "agefast-cli-pipe-out"): pipe_out(enc[:3] + [p]),
        ("encrypt", "age-cli-pipe-out"): pipe_out(age_enc + [p]),
        ("decrypt", "cp"): lambda: common.run(["cp", s, o]),
        ("decrypt", "agefast-cli-t2"): lambda: common.run(dec[:1] + t2 + dec[1:], env=default),
        ("decrypt", "agefast-cli-pipe-in"): pipe_in(dec[:4] + ["-o", o, s]),
        ("decrypt", "age-cli-pipe-in"): pipe_in(age_dec + ["-o", o, s]),
        ("decrypt", "agefast-cli-pipe-out"): pipe_out(dec[:4] + [s]),
        ("decrypt", "age-cli-pipe-out"): pipe_out(age_dec + [s]),
        ("encrypt", "agefast-cli"): lambda: common.run(enc, env=default),
        ("encrypt", "agefast-cli-t1"): lambda: common.run(enc[:1] + ["--threads", "1"] + enc[1:], env=default),
        ("encrypt", "agefast-cli-crypto"): lambda: common.run(enc, env=crypto),
        ("encrypt", "age-cli"): lambda: common.run([AGE, "-r", recipient, "-o", o, p]),
        ("encrypt", "agefast"): common.in_engine(None, lambda: agefast.encrypt_file(p, o, ag_rcp)),
        ("encrypt", "agefast-crypto"): common.in_engine("cryptography", lambda: agefast.encrypt_file(p, o, ag_rcp)),
        ("encrypt", "pyrage"): lambda: pyrage.encrypt_file(p, o, [py_rcp]),
        ("encrypt", "python-copy"): lambda: common.run(copy + [p, o]),
        ("decrypt", "agefast-cli"): lambda: common.run(dec, env=default),
        ("decrypt", "agefast-cli-t1"): lambda: common.run(dec[:1] + ["--threads", "1"] + dec[1:], env=default),
        ("decrypt", "agefast-cli-crypto"): lambda: common.run(dec, env=crypto),
        ("decrypt", "age-cli"): lambda: common.run([AGE, "-d", "-i", k, "-o", o, s]),
        ("decrypt", "agefast"): common.in_engine(None, lambda: agefast.decrypt_file(s, o, ag_ids)),
        ("decrypt", "agefast-crypto"): common.in_engine("cryptography", lambda: agefast.decrypt_file(s, o, ag_ids)),
        ("decrypt", "pyrage"): lambda: pyrage.decrypt_file(s, o, [py_id]),
        ("decrypt", "python-copy"): lambda: common.run(copy + [s, o]),
    }
    if baseline:
        before = {**default, "PYTHONPATH": baseline}
        common.compile_bytecode(Path(baseline) / "agefast")
        common.run([AGEFAST, "--warm-up"], env=before)
        work[("encrypt", "agefast-cli-baseline")] = lambda: common.run(enc, env=before)
        work[("decrypt", "agefast-cli-baseline")] = lambda: common.run(dec, env=before)
    return work


# Which pairs the targets are about: agefast's CLI against Go age's, and the
# in-process file functions against pyrage's (both run inside this process).
RATIOS = {
    "agefast-cli / age-cli": ("agefast-cli", "age-cli"),
    "agefast-cli-t1 / age-cli": ("agefast-cli-t1", "age-cli"),
    "agefast-cli-crypto / age-cli": ("agefast-cli-crypto", "age-cli"),
    "agefast / pyrage": ("agefast", "pyrage"),
    "agefast-crypto / pyrage": ("agefast-crypto", "pyrage"),
    "agefast / age-cli": ("agefast", "age-cli"),
    "python-copy / age-cli": ("python-copy", "age-cli"),
    "agefast-cli-t2 / age-cli": ("agefast-cli-t2", "age-cli"),
    "agefast-cli / agefast-cli-baseline": ("agefast-cli", "agefast-cli-baseline"),
    "pipe in: agefast-cli / age-cli": ("agefast-cli-pipe-in", "age-cli-pipe-in"),
    "pipe out: agefast-cli / age-cli": ("agefast-cli-pipe-out", "age-cli-pipe-out"),
    # How many times the time of cp each takes (>= 1).
    "agefast-cli / cp": ("cp", "agefast-cli"),
    "agefast-cli-t2 / cp": ("cp", "agefast-cli-t2"),
    "age-cli / cp": ("cp", "age-cli"),
}

# The floor: a bare interpreter copying argv[1] to argv[2], reading 1 MiB and
# writing 32 KiB at a time.
COPY = """
import sys
buf = bytearray(1 << 20)
view = memoryview(buf)
with open(sys.argv[1], "rb", buffering=0) as src, open(sys.argv[2], "wb", buffering=0) as dst:
    while n := src.readinto(buf):
        for at in range(0, n, 32 << 10):
            dst.write(view[at:min(n, at + (32 << 10))])
"""


def main() -> None:
    args = common.arguments(__doc__, 5, [("--size", 256, "file size in MiB"),
                                         ("--settle", 0, "seconds to wait before each run (see above)")],
                            [("--cases", "", "comma-separated cases to run (default: all)"),
                             ("--baseline", "", "another agefast checkout to run as agefast-cli-baseline")])
    size = args.size * MiB
    plain, sealed, out, check = (args.dir / n for n in ("plain", "plain.age", "out", "check"))
    digest = common.make_file(plain, size)
    key, recipient = common.make_key(args.dir)
    common.run([AGE, "-r", recipient, "-o", str(sealed), str(plain)])
    common.warm(plain, sealed)
    common.warm_engine()
    work = cases(key, recipient, plain, sealed, out, args.baseline)
    if args.cases:
        wanted = set(args.cases.split(","))
        known = {tool for _, tool in work}
        if wanted - known:
            raise SystemExit(f"unknown cases {sorted(wanted - known)}; the cases are {sorted(known)}")
        work = {name: fn for name, fn in work.items() if name[1] in wanted}

    def prepare(name):
        out.unlink(missing_ok=True)
        check.unlink(missing_ok=True)
        # Read the input again: the VM's DAMON thread pages out file pages
        # left alone for a minute, as the ciphertext is while encryption runs.
        common.warm(plain if name[0] == "encrypt" else sealed)
        time.sleep(args.settle)

    copied = {"encrypt": digest, "decrypt": common.sha256_file(sealed)}

    def verify(name):
        op, tool = name
        if tool in ("python-copy", "cp"):
            if common.sha256_file(out) != copied[op]:
                raise SystemExit(f"{op} with {tool}: the copy differs from its input")
            return
        if op == "encrypt":
            check.unlink(missing_ok=True)
            common.run([AGE, "-d", "-i", str(key), "-o", str(check), str(out)])
            produced = common.sha256_file(check)
        else:
            produced = common.sha256_file(out)
        if produced != digest:
            raise SystemExit(f"{op} with {tool}: the output does not round-trip to the input")

    result = {"dir": str(args.dir), "filesystem": common.filesystem(args.dir), "size": size,
              "settle": args.settle, "ops": {}}
    for op in ("encrypt", "decrypt"):
        chosen = {tool: fn for (o, tool), fn in work.items() if o == op}
        raw = common.interleave(chosen, args.reps, prepare=lambda t: prepare((op, t)),
                                verify=lambda t: verify((op, t)))
        result["ops"][op] = {
            "cases": {tool: {**common.summarize(c, size), **c} for tool, c in raw.items()},
            "ratios": {label: common.paired_ratio(raw[a], raw[b]) for label, (a, b) in RATIOS.items()
                       if a in raw and b in raw},
        }
    for path in (plain, sealed, out, check):
        path.unlink(missing_ok=True)
    common.save("files_cases" if args.cases else "files", result)


if __name__ == "__main__":
    main()
