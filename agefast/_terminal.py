"""Talking to the user's terminal: passphrase prompts, plugin messages, tty checks.

Passphrases are read from /dev/tty rather than stdin because stdin usually
carries the file being encrypted or decrypted. getpass is not used: when
/dev/tty cannot be opened it silently falls back to reading stdin, which
would consume the input data as the passphrase.
"""

import os
import sys
import termios


class TerminalError(Exception):
    """There is no terminal to prompt on, or reading from it failed."""


def is_terminal(stream) -> bool:
    """Whether `stream` is attached to a terminal."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        # No isatty, or a closed stream: either way, not a terminal.
        return False


def read_passphrase(prompt: str) -> str:
    """Prompt on /dev/tty and read one line with echo turned off."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError as e:
        raise TerminalError(f"cannot prompt for a passphrase: /dev/tty is not available ({e.strerror})") from None
    with open(fd, "r+b", buffering=0) as tty:
        saved = termios.tcgetattr(fd)
        quiet = termios.tcgetattr(fd)
        quiet[3] &= ~termios.ECHO
        # TCSAFLUSH drops anything typed before the prompt was shown, so a
        # stray keystroke cannot become the start of the passphrase.
        termios.tcsetattr(fd, termios.TCSAFLUSH, quiet)
        try:
            tty.write(prompt.encode())
            line = _read_line(tty)
        finally:
            termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
            # The user's Enter was not echoed; end the prompt line ourselves.
            tty.write(b"\n")
    try:
        return line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise TerminalError("the passphrase is not valid UTF-8") from None


class PluginPrompts:
    """Plugin callbacks (pyrage's names) that talk to the user on the terminal.

    Messages go to stderr; secrets are asked for on /dev/tty. The callbacks a
    plugin may also use (confirm, request_public_string) are left out: the
    library reports a missing callback to the plugin as a refusal.
    """

    def display_message(self, message: str) -> None:
        print(f"agefast: plugin: {message}", file=sys.stderr)

    def request_passphrase(self, description: str) -> str:
        return read_passphrase(f"{description} ")


def _read_line(tty) -> bytes:
    """Read up to and including a newline; an end of file ends the line too."""
    data = bytearray()
    while not data.endswith(b"\n"):
        byte = tty.read(1)
        if not byte:
            if not data:
                raise TerminalError("no passphrase was entered (end of input on the terminal)")
            break
        data += byte
    return bytes(data)
