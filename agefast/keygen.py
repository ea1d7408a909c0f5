"""The agefast-keygen command: generate identities, or print their recipients.

Output matches age-keygen's, so key files move freely between the two tools:

    # created: 2006-01-02T15:04:05+07:00
    # public key: age1...
    AGE-SECRET-KEY-1...
"""

import argparse
import datetime
import os
import stat
import sys

import agefast
from agefast import pq, x25519
from agefast._terminal import is_terminal
from agefast.cli import Parser, UsageError, describe, read_key_file

USAGE = """\
agefast-keygen [-pq] [-o OUTPUT]
       agefast-keygen -y [-o OUTPUT] [INPUT]"""

EPILOG = """\
Without -y, generate a new X25519 identity (or, with -pq, a post-quantum
ML-KEM-768 + X25519 hybrid identity) and write it to OUTPUT, a new file
created with mode 0600; an existing file is never overwritten. The public key
is printed to stderr unless OUTPUT is the terminal.
With -y, read the identity file INPUT (default standard input) and print the
recipient of each identity in it."""


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="agefast-keygen", usage=USAGE, epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", metavar="OUTPUT", help="write to OUTPUT, a new file (default: standard output)")
    p.add_argument("-y", dest="convert", action="store_true", help="print the recipients of an identity file")
    p.add_argument("-pq", dest="pq", action="store_true", help="generate a post-quantum hybrid identity")
    p.add_argument("input", nargs="?", metavar="INPUT", help="with -y, the identity file (default: standard input)")
    return p


def _open_output(path):
    """Standard output, or a new file only its owner can read."""
    if path is None or path == "-":
        return os.fdopen(os.dup(sys.stdout.fileno()), "w")
    # O_EXCL: a key file is never silently replaced, as with age-keygen.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "w")


def _created_line() -> str:
    # RFC 3339 local time with its offset, "Z" for UTC like Go's time.RFC3339.
    now = datetime.datetime.now().astimezone().replace(microsecond=0).isoformat()
    return now.removesuffix("+00:00") + "Z" if now.endswith("+00:00") else now


def _generate(output, post_quantum: bool) -> None:
    identity = (pq.Identity if post_quantum else x25519.Identity).generate()
    public = str(identity.to_public())
    with _open_output(output) as out:
        if not is_terminal(out):
            print(f"Public key: {public}", file=sys.stderr)
        mode = os.fstat(out.fileno()).st_mode
        if stat.S_ISREG(mode) and mode & stat.S_IROTH:
            print("agefast-keygen: warning: writing secret key to a world-readable file", file=sys.stderr)
        out.write(f"# created: {_created_line()}\n# public key: {public}\n{identity}\n")


def _convert(path, output) -> None:
    identities = agefast.parse_identities(read_key_file(path or "-", "identity file"))
    # Everything is parsed before OUTPUT is created, so a bad INPUT leaves no file.
    with _open_output(output) as out:
        out.write("".join(f"{identity.to_public()}\n" for identity in identities))


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.input is not None and not args.convert:
            raise UsageError("INPUT is only read with -y")
        if args.convert and args.pq:
            raise UsageError("-pq can't be used with -y (the identity file says which type it is)")
        if args.convert:
            _convert(args.input, args.output)
        else:
            _generate(args.output, args.pq)
        return 0
    except (UsageError, agefast.IdentityError, OSError) as e:
        print(f"agefast-keygen: error: {describe(e)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
