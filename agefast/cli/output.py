"""Where the agefast command writes: OUTPUT files that no failure leaves half
written, stdout, and a terminal that must not receive binary data.
"""

import contextlib
import io
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from typing import IO, ContextManager

from ..errors import go_quote
from ..io import pipes
from .files import FileFailed
from ..io.replace import replacing
from ..io.writes import write_failed
from .._typing import Writer
from .terminal import is_terminal


class OutputRefused(Exception):
    """Writing the result there would lose data or garble a terminal."""

    def __init__(self, message: str, *hints: str) -> None:
        super().__init__(message)
        self.hints = hints


def _same_file(path: str, output: str, output_stat: os.stat_result | None) -> bool:
    if os.path.abspath(path) == os.path.abspath(output):
        return True
    # As files, regular files only: a terminal (or a socket) is often both /dev/stdin and /dev/stdout, and
    # typing the input while the output is shown is no file written over.
    if output_stat is None or not stat.S_ISREG(output_stat.st_mode):
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return os.path.samestat(st, output_stat)


def refuse_output_onto_an_input(output: str | None, inputs: Iterable[str | None]) -> None:
    """Refuse, before anything is read or written, an OUTPUT that is one of `inputs`.

    `inputs` are INPUT and the -i and -R files. Replacing one would destroy
    the data or the key needed to get it back (`-d -i key.txt -o key.txt`
    would leave only the plaintext). Paths are compared as age compares
    them, and also as files (device and inode), so a symlink or a hard link
    to an input is caught too.
    """
    if output is None or output == "-":
        return
    try:
        output_stat = os.stat(output)
    except OSError:
        output_stat = None
    for path in inputs:
        same = _same_as_stdin(output_stat) if path in (None, "-") else _same_file(path, output, output_stat)
        if same:
            raise OutputRefused(f"input and output file are the same: {go_quote(output)}")


def _same_as_stdin(output_stat: os.stat_result | None) -> bool:
    """Whether the output is the regular file standard input reads (-o /dev/stdin < key.txt, with -i -), which
    the path comparison cannot see. A terminal both types the input and may show armored output."""
    if output_stat is None or not stat.S_ISREG(output_stat.st_mode):
        return False
    try:
        st = os.fstat(0)
    except OSError:
        return False
    return os.path.samestat(st, output_stat)


def _is_printable(data: bytes) -> bool:
    # As age checks: no control characters but newlines and tabs, reading
    # the bytes as UTF-8 (an invalid sequence is not a control character).
    return not any((c < " " and c not in "\n\r\t") or "\x7f" <= c <= "\x9f"
                   for c in data.decode("utf-8", "replace"))


@contextlib.contextmanager
def _terminal(check_printable: bool) -> Iterator[IO[bytes]]:
    """A buffer shown on the terminal once the job is done.

    Buffering keeps the output from getting in the way of a passphrase
    prompt or of input still being typed, and lets decrypted binary data be
    refused before any of it reaches the terminal.
    """
    buffer = io.BytesIO()
    yield buffer
    data = buffer.getvalue()
    if check_printable and not _is_printable(data):
        raise OutputRefused("refusing to output binary to the terminal", 'force anyway with "-o -"')
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


# How a failed write to stdout names it, as Go age's "write /dev/stdout: ..." does.
STDOUT_NAME = "/dev/stdout"


@contextlib.contextmanager
def standard_output() -> Iterator[IO[bytes]]:
    """Standard output, whose failed writes name it /dev/stdout, as age's do."""
    pipes.widen(sys.stdout.fileno())
    out = sys.stdout.buffer
    try:
        yield out
        try:
            out.flush()
        except OSError as e:
            raise write_failed(out, e) from None
    except OSError as e:
        if e.filename != out.name:
            raise
        raise OSError(e.errno, e.strerror, STDOUT_NAME) from None


def check_terminal_output(output: str | None, decrypting: bool, armored: bool) -> None:
    """Refuse up front what age refuses: binary ciphertext onto a terminal."""
    if output is None and not decrypting and not armored and is_terminal(sys.stdout):
        raise OutputRefused("refusing to output binary to the terminal", "did you mean to use -a/--armor?",
                            'force anyway with "-o -"')


@contextlib.contextmanager
def _output_file(path: str, durable: bool, in_place_if_refused: bool) -> Iterator[Writer]:
    """The OUTPUT file, written whole or not at all (agefast.io.replace), or
    with `in_place_if_refused` in place where its folder takes no new file, as
    age writes it; if it can't be created or written, the failure names it as
    the output file."""
    opened = False
    try:
        with replacing(path, durable=durable, in_place_if_refused=in_place_if_refused) as dst:
            opened = True
            yield dst
    except OSError as e:
        # Once open, only a failure that names OUTPUT is about it (replacing
        # names a failed write so); the input's are the caller's to tell.
        if opened and e.filename != path:
            raise
        raise FileFailed("write" if opened else "open", "output file", path, e) from None


def open_output(output: str | None, decrypting: bool, input_is_terminal: bool, *,
                durable: bool = False, in_place_if_refused: bool = False) -> ContextManager[Writer]:
    """A context manager giving the binary stream the result is written to.

    OUTPUT "-" names stdout on purpose, which is how age lets a user force
    binary output onto a terminal. `durable`: an OUTPUT file that replaces
    one is synced first (agefast.io.replace.replacing). `in_place_if_refused`:
    an OUTPUT file whose folder takes no new file is written in place, as age
    writes it (never where OUTPUT may be the input: agefast-rekey's).
    """
    if output is not None and output != "-":
        return _output_file(output, durable, in_place_if_refused)
    if is_terminal(sys.stdout):
        check = output is None and decrypting
        if check or input_is_terminal:
            return _terminal(check)
    return standard_output()
