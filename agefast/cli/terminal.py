"""Talking to the user's terminal: passphrase prompts, plugin messages, tty checks.

Passphrases are read from /dev/tty rather than stdin because stdin usually
carries the file being encrypted or decrypted. getpass is not used: when
/dev/tty cannot be opened it silently falls back to reading stdin, which
would consume the input data as the passphrase. Standard input is read
instead only where it is itself a terminal, as age does.
"""

import contextlib
import importlib.util
import os
import signal
import sys
from collections.abc import Iterator
from io import FileIO
from typing import Any


class TerminalError(Exception):
    """There is no terminal to prompt on, or reading from it failed."""


def is_terminal(stream: Any) -> bool:
    """Whether `stream` is attached to a terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        # No isatty, or a closed stream: either way, not a terminal.
        return False


def _open_tty() -> FileIO:
    """The terminal: /dev/tty, else standard input where it is one (a process with no controlling terminal, as
    under setsid), as age's term.WithTerminal takes them."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | getattr(os, "O_NOCTTY", 0))    # Windows has neither
    except OSError as e:
        # Without termios (Windows) a console as standard input cannot be switched to read a secret unseen.
        if not (is_terminal(sys.stdin) and importlib.util.find_spec("termios")):
            raise TerminalError(f"standard input is not a terminal, and /dev/tty is not available: {e.strerror}") \
                from None
        fd = os.dup(sys.stdin.fileno())
    return open(fd, "r+b", buffering=0)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Let Ctrl-C at a prompt raise KeyboardInterrupt, even if the command
    was started with SIGINT ignored (as a script's background jobs and some
    job runners start commands).

    Ignored, a Ctrl-C would only make the terminal discard the line typed so
    far, and the command would take the empty line that followed for the
    answer (which, for a new passphrase, means "autogenerate one"). Python's
    own handler is installed for as long as the prompt reads, which keeps the
    terminal as the user knows it: its line editing and its other signal keys
    (Ctrl-Z, Ctrl-\\) work as at any prompt. That is plainer than reading the
    terminal in a mode where the interrupt key arrives as a byte, which would
    take those away. A handler the program installed is left alone, and so is
    SIGINT outside the main thread, where Python can set no handler.
    """
    previous = None
    try:
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
            previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass  # not the main thread
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def read_passphrase(prompt: str) -> str:
    """Prompt on /dev/tty and read one line with echo turned off.

    The terminal is switched with TCSANOW, not TCSAFLUSH: what was typed
    ahead of the prompt (by a fast typist, or a script driving the
    terminal: expect, tmux, testscript's ttyin) is the answer, as with age.
    End of input, or a terminal that hung up, is a TerminalError and Ctrl-C
    a KeyboardInterrupt: never an empty answer.
    """
    # any bytes, as age takes them: what is not UTF-8 stands as surrogates (agefast.primitives.passphrase_bytes)
    return _prompt(prompt, "passphrase", echo=False, whole_line=True).decode("utf-8", "surrogateescape")


def read_public(prompt: str) -> str:
    """Prompt on /dev/tty and read one line, echoed as it is typed (a plugin's request-public)."""
    return _prompt(prompt, "value", echo=True, whole_line=True).decode("utf-8", "surrogateescape")


def read_character(prompt: str) -> bytes:
    """Prompt on /dev/tty and read one key press, not echoed (a plugin's confirm)."""
    return _prompt(prompt, "value", echo=False, whole_line=False)


def _prompt(prompt: str, what: str, echo: bool, whole_line: bool) -> bytes:
    """`prompt` on /dev/tty, then a line (whole_line) or one byte typed there; the prompt is erased after;
    see read_passphrase."""
    try:
        opened = _open_tty()
    except TerminalError as e:
        raise TerminalError(f"could not read {what}: {e}") from None     # as age says which read failed
    with opened as tty, _interruptible():
        import termios      # here: a system without it (Windows) has no /dev/tty either, and runs every other command

        fd = tty.fileno()
        try:
            saved = termios.tcgetattr(fd)
        except termios.error as e:
            raise TerminalError(f"could not read {what}: {e.args[-1]}") from None
        mode = list(saved)
        mode[3] = (mode[3] & ~termios.ECHO) | termios.ISIG | (termios.ECHO if echo else 0)
        if whole_line:
            mode[3] |= termios.ICANON
        else:
            mode[3] &= ~termios.ICANON
            mode[6] = list(mode[6])
            mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
        mode[0] |= termios.ICRNL
        termios.tcsetattr(fd, termios.TCSANOW, mode)
        try:
            tty.write(f"{prompt} ".encode())
            answer = _read_line(tty, what) if whole_line else tty.read(1)
            if not answer and not whole_line:
                raise TerminalError(f"could not read {what}: end of input on the terminal")
        except OSError as e:
            raise TerminalError(f"could not read {what}: {e.strerror}") from None
        finally:
            try:
                termios.tcsetattr(fd, termios.TCSANOW, saved)
                # The user's Enter was not echoed: end the prompt line, and erase
                # it (cursor up, erase line) so that prompts leave no trace.
                tty.write(b"\r\n\x1b[F\x1b[K")
            except (termios.error, OSError):
                pass  # the terminal hung up: there is nothing left to restore
    return answer


def print_to_terminal(message: str) -> None:
    """Show `message` on the terminal only (not stderr): for secrets meant for the user alone."""
    with _open_tty() as tty:
        tty.write(f"{message}\n".encode())


def read_terminal_input(stream: Any, until: bytes | None = None) -> bytes:
    """All of `stream`, a terminal: up to the end of input, or the first line holding `until`.

    One end of input (Ctrl-D at the start of a line) ends it, as it does
    for age: each read returns what was typed, and an empty read is the
    end. Stopping at `until` (an armor END line) lets a passphrase prompt
    read the rest of what is typed.
    """
    data = bytearray()
    while until is None or until not in data:
        chunk = stream.read1(65536)
        if not chunk:
            break
        data += chunk
    return bytes(data)


class PluginPrompts:
    """Plugin callbacks (pyrage's names) that talk to the user on the terminal, as age's do.

    Messages go to stderr; secrets, values and choices are asked for on
    /dev/tty. A callback that raises (no terminal) is a `fail` to the plugin.
    """

    def display_message(self, message: str) -> None:
        print(f"agefast: plugin: {message}", file=sys.stderr)

    def request_passphrase(self, description: str) -> str:
        return read_passphrase(description)

    def request_public_string(self, description: str) -> str:
        return read_public(description)

    def confirm(self, message: str, yes: str, no: str | None) -> bool:
        if not no:
            read_passphrase(f'{message} (press enter for "{yes}")')
            return True
        while True:
            choice = read_character(f'{message} (press [1] for "{yes}" or [2] for "{no}")')
            if choice in (b"1", b"2"):
                return choice == b"1"
            print(f"agefast: warning: invalid selection {choice.decode()!r}", file=sys.stderr)


def _read_line(tty: FileIO, what: str) -> bytes:
    """Read up to a newline, without it; an end of input ends the line too (`what` is read, for its error)."""
    data = bytearray()
    while True:
        byte = tty.read(1)
        if not byte:
            if not data:
                raise TerminalError(f"could not read {what}: end of input on the terminal")
            return bytes(data)
        if byte == b"\n":
            return bytes(data)
        if byte == b"\b":
            del data[-1:]
        elif byte != b"\r":
            data += byte
