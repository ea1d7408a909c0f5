"""The agefast-keygen command: generate identities, or print their recipients.

Output matches age-keygen's, so key files move freely between the two tools:

    # created: 2006-01-02T15:04:05+07:00
    # public key: age1...
    AGE-SECRET-KEY-1...
"""

import contextlib
import datetime
import os
import stat
import sys
from typing import TextIO, TypeGuard

import agefast
from agefast.cli import files, goflag
from agefast.recipients import pq, x25519
from agefast.cli.terminal import is_terminal
from agefast.cli.key_flags import read_key_file
from agefast.cli.outcome import UsageError, describe, run_cleaning_up
from agefast.cli.output import STDOUT_NAME

USAGE = """\
Usage:
    agefast-keygen [-pq] [-o OUTPUT]
    agefast-keygen -y [-o OUTPUT] [INPUT]

Options:
    -pq                       Generate a post-quantum hybrid ML-KEM-768 + X25519 key pair.
    -o, --output OUTPUT       Write the result to the file at path OUTPUT.
    -y                        Convert an identity file to a recipients file.

agefast-keygen generates a new native X25519 or, with the -pq flag, post-quantum
hybrid ML-KEM-768 + X25519 key pair, and outputs it to standard output or to
the OUTPUT file, a new file only its owner can read.

If an OUTPUT file is specified, the public key is printed to standard error.
If OUTPUT already exists, it is not overwritten.

In -y mode, agefast-keygen reads an identity file from INPUT or from standard
input and writes the corresponding recipient(s) to OUTPUT or to standard
output, one per line, with no comments."""


def _flags() -> goflag.FlagSet:
    f = goflag.FlagSet()
    f.bool("version", "version")
    f.bool("pq", "pq")
    f.bool("convert", "y")
    f.string("output", "o", "output")
    return f


def _a_file(path: str | None) -> TypeGuard[str]:
    """Whether OUTPUT names a file: not when it is not given, empty (age-keygen -o "" writes to standard
    output) or "-"."""
    return bool(path) and path != "-"


def _open_output(path: str | None) -> TextIO:
    """Standard output, or a new file only its owner can read."""
    if not _a_file(path):
        return os.fdopen(os.dup(sys.stdout.fileno()), "w")
    # O_EXCL: a key file is never silently replaced, as with age-keygen.
    with files.named("output file", path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "w")


def _created_line() -> str:
    # RFC 3339 local time with its offset, "Z" for UTC like Go's time.RFC3339.
    now = datetime.datetime.now().astimezone().replace(microsecond=0).isoformat()
    return now.removesuffix("+00:00") + "Z" if now.endswith("+00:00") else now


def _write(out: TextIO, output: str | None, text: str) -> None:
    """Write `text` to `out` (OUTPUT), whole. Where that fails, a file made for it is removed (a retry would
    find the name taken, by a file that holds no key), and the failure names it."""
    try:
        out.write(text)
        out.flush()
    except OSError as e:
        with contextlib.suppress(OSError):     # its flush fails again; closed now, not at the block's end
            out.close()
        if not _a_file(output):
            raise files.FileFailed("write", "output file", STDOUT_NAME, e) from None
        os.unlink(output)
        raise files.FileFailed("write", "output file", output, e) from None


def _generate(output: str | None, post_quantum: bool) -> None:
    identity = (pq.Identity if post_quantum else x25519.Identity).generate()
    public = str(identity.to_public())
    with _open_output(output) as out:
        mode = os.fstat(out.fileno()).st_mode
        if stat.S_ISREG(mode) and mode & stat.S_IROTH:
            print("agefast-keygen: warning: writing secret key to a world-readable file", file=sys.stderr)
        # A failed write tells no public key for a secret that was never kept: a script could encrypt to it.
        _write(out, output, f"# created: {_created_line()}\n# public key: {public}\n{identity}\n")
        if not is_terminal(out):
            print(f"Public key: {public}", file=sys.stderr)


def _convert(path: str | None, output: str | None) -> None:
    # Only age's own keys have a recipient to print: a plugin's identity is an unknown type, as in age-keygen
    # (its to_public() had printed a Python repr, exit 0).
    identities = agefast.parse_identities(read_key_file(path or "-", "input file"), plugins=False)
    # Everything is parsed before OUTPUT is created, so a bad INPUT leaves no file.
    with _open_output(output) as out:
        _write(out, output, "".join(f"{identity.to_public()}\n" for identity in identities))


def main(argv: list[str] | None = None) -> int:
    return run_cleaning_up(_run, sys.argv[1:] if argv is None else argv)


def _run(argv: list[str]) -> int:
    parsed, status = goflag.parse_command(_flags(), argv, USAGE)
    if parsed is None:
        return status
    values, positional = parsed
    try:
        if len(positional) > (1 if values["convert"] else 0):
            raise UsageError("too many arguments")
        if values["convert"] and values["pq"]:
            raise UsageError("-pq cannot be used with -y")
        if values["convert"]:
            _convert(positional[0] if positional else None, values["output"])
        else:
            _generate(values["output"], values["pq"])
        return 0
    except (UsageError, files.FileFailed, agefast.IdentityError, OSError) as e:
        print(f"agefast-keygen: error: {describe(e)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
