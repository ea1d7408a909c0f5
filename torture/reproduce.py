"""python -m torture.reproduce [--target T | --expect-sha256 HEX] FILE.age (IDENTITY_FILE | --passphrase-file FILE)

Decrypts one file with the reference and, given --target, with that target,
and prints each outcome and the SHA-256 of the plaintext each released.
--expect-sha256 instead checks that the reference decrypts the file (one an
encrypting target wrote) to plaintext of that hash. Exit status: 0 when they
agree, 1 when they disagree, 2 on usage errors. Every reproducer's
command.sh runs this.
"""

import argparse
import sys

from . import bech32, keys, reference, runner, targets


def load_identities(path: str) -> list:
    specs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("AGE-SECRET-KEY-1"):
                specs.append(keys.KeySpec("x25519", bech32.decode(line)[1]))
    if not specs:
        raise ValueError(f"{path}: no AGE-SECRET-KEY-1 line")
    return specs


def _describe(name: str, kind: str, detail: str, plaintext: bytes, verb: str) -> str:
    return f"{name}: {kind}{f' ({detail})' if detail else ''}; {len(plaintext)} bytes {verb}, " \
           f"sha256 {runner.sha256(plaintext)}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torture.reproduce", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", help="agefast, pyrage, module:NAME or 'cmd:PROGRAM ARGS… {identity}'")
    p.add_argument("file")
    p.add_argument("identity", nargs="?")
    p.add_argument("--passphrase-file")
    p.add_argument("--expect-sha256", help="the plaintext's SHA-256, for a file an encrypting target wrote")
    args = p.parse_args(argv)
    if (args.identity is None) == (args.passphrase_file is None):
        p.error("give an identity file or --passphrase-file, not both")
    target = None
    try:
        with open(args.file, "rb") as f:
            data = f.read()
        if args.passphrase_file:
            with open(args.passphrase_file, encoding="utf-8", newline="") as f:
                identities = [keys.KeySpec("passphrase", f.read())]
        else:
            identities = load_identities(args.identity)
        if args.target:
            target = targets.parse("module:agefast" if args.target == "agefast" else args.target)
            # As the run: a target that cannot decrypt a plain file (not found where it was, its module not
            # importable) would "agree" with every failure of the reference.
            target.probe()
    except (OSError, ValueError, targets.UsageError) as e:
        if target is not None:
            target.close()
        p.error(str(e))
    expected = reference.open_file(data, identities)
    print(_describe("reference", expected.kind, expected.detail, expected.plaintext, "verified"))
    if target is None:
        if args.expect_sha256 is None:
            return 0
        agree = expected.kind == reference.OK and runner.sha256(expected.plaintext) == args.expect_sha256
        print("agreement" if agree else f"disagreement: the plaintext's sha256 is {args.expect_sha256}")
        return 0 if agree else 1
    try:
        got = target.decrypt_many([(data, identities)])[0]
    finally:
        target.close()
    print(_describe(f"target {args.target}", got.kind, got.message[:300], got.plaintext, "released"))
    problem = targets.disagreement(expected, got)
    print(f"disagreement: {problem}" if problem else "agreement")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
