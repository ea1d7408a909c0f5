"""Talking to the user's terminal: passphrase prompts, plugin messages, tty checks.

Passphrases are read from /dev/tty rather than stdin because stdin usually
carries the file being encrypted or decrypted. getpass is not used: when
/dev/tty cannot be opened it silently falls back to reading stdin, which
would consume the input data as the passphrase.
"""

import contextlib
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
    try:
        fd = os.open("/dev/tty", os.O_RDWR | getattr(os, "O_NOCTTY", 0))    # Windows has neither
    except OSError as e:
        raise TerminalError(f"standard input is not a terminal, and /dev/tty is not available: {e.strerror}") from None
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
    with _open_tty() as tty, _interruptible():
        import termios      # here: a system without it (Windows) has no /dev/tty either, and runs every other command

        fd = tty.fileno()
        try:
            saved = termios.tcgetattr(fd)
        except termios.error as e:
            raise TerminalError(f"could not read passphrase: {e.args[-1]}") from None
        quiet = list(saved)
        quiet[3] = (quiet[3] & ~termios.ECHO) | termios.ICANON | termios.ISIG
        quiet[0] |= termios.ICRNL
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        try:
            tty.write(f"{prompt} ".encode())
            line = _read_line(tty)
        except OSError as e:
            raise TerminalError(f"could not read passphrase: {e.strerror}") from None
        finally:
            try:
                termios.tcsetattr(fd, termios.TCSANOW, saved)
                # The user's Enter was not echoed: end the prompt line, and erase
                # it (cursor up, erase line) so that prompts leave no trace.
                tty.write(b"\r\n\x1b[F\x1b[K")
            except (termios.error, OSError):
                pass  # the terminal hung up: there is nothing left to restore
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        raise TerminalError("the passphrase is not valid UTF-8") from None


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
    """Plugin callbacks (pyrage's names) that talk to the user on the terminal.

    Messages go to stderr; secrets are asked for on /dev/tty. The callbacks a
    plugin may also use (confirm, request_public_string) are left out: the
    library reports a missing callback to the plugin as a refusal.
    """

    def display_message(self, message: str) -> None:
        print(f"agefast: plugin: {message}", file=sys.stderr)

    def request_passphrase(self, description: str) -> str:
        return read_passphrase(description)


def _read_line(tty: FileIO) -> bytes:
    """Read up to a newline, without it; an end of input ends the line too."""
    data = bytearray()
    while True:
        byte = tty.read(1)
        if not byte:
            if not data:
                raise TerminalError("could not read passphrase: end of input on the terminal")
            return bytes(data)
        if byte == b"\n":
            return bytes(data)
        if byte == b"\b":
            del data[-1:]
        elif byte != b"\r":
            data += byte
