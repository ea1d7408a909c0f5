"""How the commands end: a failure told on stderr, and SIGTERM or SIGHUP unwinding to clean up.

A failure is reported as `COMMAND: error: ...`, perhaps followed by
`COMMAND: hint: ...` lines, with exit status 1, as age's commands do.
"""

import contextlib
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from agefast import errors
from agefast.cli import files
from agefast.cli.files import FileFailed
from agefast.cli.output import OutputRefused
from agefast.errors import go_quote
from agefast.format.grammar import MangledIntro
from agefast.cli.terminal import TerminalError
from agefast.io import portable


class UsageError(Exception):
    """What cannot be done as the command line asks; `hints` say what might (age's errorWithHint)."""

    def __init__(self, message: str, *hints: str) -> None:
        super().__init__(message)
        self.hints = hints


def too_many_inputs(command: str, argv: list[str], positional: list[str]) -> UsageError:
    """age's error for more than one INPUT among `positional`, with its hints where the second looks like a flag
    (flags after INPUT are not parsed, as Go's flag package stops at the first argument)."""
    quoted = " ".join(go_quote(a) for a in positional)
    if not positional[1].startswith("-"):
        return UsageError(f"too many INPUT arguments: {quoted}", "only a single input file may be specified at a time")
    hints = ["the input file must be specified after all flags"]
    # Suggest the command with INPUT moved to the end, if it needs no quoting.
    if not any(re.search(r"[^\w@%+=:,./-]", a) for a in argv):
        first = len(argv) - len(positional)
        moved = [command, *argv[:first], *argv[first + 1:], argv[first]]
        hints += ["did you mean:", "    " + " ".join(moved)]
    return UsageError(f"too many INPUT arguments: {quoted}", *hints)


# Control characters, as escapes: a message may hold what others wrote (a plugin's error), and each stays one
# line that writes nothing but text to a terminal (a plugin's "\nagefast: note: ..." or escape sequences).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7f, 0xa0)) if c != 0x09}
_CONTROLS |= {0x0a: "\\n", 0x0d: "\\r"}


def _one_line(text: str) -> str:
    return text.translate(_CONTROLS)


def print_warning(message: str) -> None:
    print(f"agefast: warning: {_one_line(message)}", file=sys.stderr)


# What to put before the library's message, most specific class first. The
# library's messages already say what failed; a prefix is added only where
# the message alone would not say which part of the file was bad.
_PREFIXES = (
    (errors.HeaderMACError, ""),
    (errors.NoIdentityMatchError, ""),
    (errors.ArmorError, ""),
    (errors.HeaderError, "invalid header: "),
    (errors.PayloadError, "invalid payload: "),
    (errors.DecryptError, "decryption failed: "),
    (errors.EncryptError, "encryption failed: "),
)


def stdout_to_null() -> None:
    """Point standard output at /dev/null once a write to it failed (its reader went away, a full disk), so that
    the interpreter's flush at exit does not fail a second time and turn the exit status into 120."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def describe(exc: Exception) -> str:
    """One line for the user about `exc`."""
    if isinstance(exc, FileFailed):
        return f"failed to {exc.action} {exc.role} {go_quote(exc.path)}: {exc.reason}"
    if isinstance(exc, OSError):
        # A path given as bytes (agefast-tree's names are) is shown as the file system decodes it, not as b'...'.
        name = os.fsdecode(exc.filename) if isinstance(exc.filename, bytes) else exc.filename
        where = f"{name}: " if name else ""
        return where + (exc.strerror or str(exc))
    if isinstance(exc, errors.HeaderError) and str(exc).startswith("failed to read header"):
        return str(exc)
    prefix = next((p for cls, p in _PREFIXES if isinstance(exc, cls)), "")
    return prefix + str(exc)


def report_failure(command: str, work: Callable[[], None]) -> int:
    """work(); 0 if it succeeds, else 1 once the failure is told on stderr as `COMMAND: error: ...`."""
    hints: tuple[str, ...] = ()
    try:
        work()
        return 0
    except (UsageError, OutputRefused) as e:
        message, hints = str(e), e.hints
    except MangledIntro:
        # age's words and hints (its decrypt's errorWithHint), for every command that reads an age file
        message, hints = "invalid header intro", ("it looks like this file was corrupted by PowerShell redirection",
                                                  "consider using -o or -a to encrypt files in PowerShell")
    except BrokenPipeError as e:
        stdout_to_null()
        message = describe(e)
    except (TerminalError, errors.AgeError, OSError, FileFailed) as e:
        message = describe(e)
    except MemoryError as e:    # scrypt's memory refused (agefast.recipients.scrypt), or any other allocation
        message = str(e) or "out of memory"
    except RuntimeError as e:
        # The one RuntimeError the environment, not a bug, raises: a thread the system refuses (the limits of
        # ulimit -u, -v or -d). Any other is a bug, and its traceback is told.
        if str(e) != "can't start new thread":
            raise
        message = "the system refused a thread (its process limits: ulimit -u, -v, -d)"
    print(f"{command}: error: {_one_line(message)}", file=sys.stderr)
    for hint in hints:
        print(f"{command}: hint: {_one_line(hint)}", file=sys.stderr)
    return 1


class _Terminated(BaseException):
    """SIGTERM or SIGHUP arrived; raised in the main thread so cleanups run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated(signum)


# Windows has no SIGHUP.
_TERMINATING = (signal.SIGTERM, signal.SIGHUP) if hasattr(signal, "SIGHUP") else (signal.SIGTERM,)


def _default_in_child() -> None:
    # A process forked while the command runs (agefast-tree's workers) dies of these signals as a process
    # does: the handler is the command's, for its own cleanup, and in a worker it printed a traceback.
    for signum in _TERMINATING:
        if signal.getsignal(signum) is _raise_terminated:
            signal.signal(signum, signal.SIG_DFL)


portable.after_fork_in_child(_default_in_child)


@contextlib.contextmanager
def _cleanup_on_termination() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into _Terminated while the command runs.

    Their default action kills the process at once, leaving a temporary
    output file behind; as an exception they unwind through the output's
    context manager, which removes it, as Ctrl-C (KeyboardInterrupt) already
    does. A signal the caller chose to ignore (nohup) stays ignored.
    """
    previous: dict[signal.Signals, Any] = {}
    for signum in _TERMINATING:
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _raise_terminated)
        except ValueError:
            break  # not the main thread: signals can't be handled here
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_cleaning_up(run: Callable[[list[str]], int], argv: list[str]) -> int:
    """run(argv), with SIGTERM and SIGHUP unwinding it so that a temporary OUTPUT is removed, and a closed
    standard input or output failing as a file that can't be read or written (files.mend_closed_streams)."""
    files.mend_closed_streams()
    try:
        with _cleanup_on_termination():
            return run(argv)
    except (_Terminated, KeyboardInterrupt) as e:
        # Cleaned up; now die of the signal, as age does, so that the caller sees what happened: a shell's
        # loop stops at Ctrl-C rather than run the next command.
        signum = e.signum if isinstance(e, _Terminated) else signal.SIGINT
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        raise SystemExit(128 + signum) from None
