"""The client side of the age plugin protocol (C2SP age-plugin, v1 state machines).

A plugin is a program `age-plugin-NAME` started with `--age-plugin=recipient-v1`
or `--age-plugin=identity-v1`. Both sides speak in age stanzas over the
plugin's stdin and stdout. Phase 1 is ours: we send what the plugin needs and
`done`. Phase 2 is the plugin's: it sends a command, we answer each one, until
it sends `done`.
"""

import os
import random
import signal
import subprocess
import tempfile
from collections.abc import Iterable
from typing import IO, NamedTuple

from ..format.grammar import MAX_HEADER, MAX_STANZAS, Stanza, atoi, b64decode, read_stanza
from ..primitives import passphrase_bytes

# A plugin's stanzas carry file keys, messages and wrapped keys: nothing
# legitimate is near this, and a runaway plugin must not exhaust memory.
_MAX_LINE = 64 * 1024
_MAX_BODY = 1024 * 1024
# How long a plugin gets to exit after its stdin closes and it is sent SIGINT.
_EXIT_GRACE_SECONDS = 5


def _environment() -> dict[str, str]:
    """The plugin's environment: ours, its PATH without relative entries ("", "."). Those would find a
    program the plugin runs by name (its #!/usr/bin/env interpreter) in its working directory, the temporary
    folder every account writes; agefast finds no plugin through them either."""
    env = dict(os.environ)
    if "PATH" in env:
        env["PATH"] = os.pathsep.join(entry for entry in env["PATH"].split(os.pathsep) if os.path.isabs(entry))
    return env


class ProtocolError(Exception):
    """The plugin broke the protocol, failed to start, or reported an error."""


class Program(NamedTuple):
    """A plugin's program: the path it was found at on the PATH (its argv[0], as age gives it) and its real path,
    the file that was checked and is run (the first, looked up again, could lead elsewhere by then)."""

    found: str
    real: str


class Connection:
    """A running plugin and the stanza stream to and from it."""

    def __init__(self, program: Program, state_machine: str) -> None:
        try:
            # The working directory is an empty, neutral place: plugins must
            # not depend on it, and clients differ in what it would be. What
            # it writes to stderr is not shown, as age shows it only with
            # AGEDEBUG=plugin: a plugin talks to the user through the protocol.
            stderr = None if os.environ.get("AGEDEBUG") == "plugin" else subprocess.DEVNULL
            self._process = subprocess.Popen(
                [program.found, f"--age-plugin={state_machine}"], executable=program.real, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=stderr, cwd=tempfile.gettempdir(), env=_environment())
        except OSError as e:
            raise ProtocolError(f"couldn't start plugin: {e.strerror or e}") from None
        # Both are pipes: Popen was asked for them.
        self._stdin: IO[bytes] = self._process.stdin  # type: ignore[assignment]
        self._stdout: IO[bytes] = self._process.stdout  # type: ignore[assignment]

    def send(self, type_: str, args: Iterable[str] = (), body: bytes = b"") -> None:
        try:
            self._stdin.write(Stanza(type_, list(args), body).encode())
            self._stdin.flush()
        except OSError:
            raise ProtocolError("the plugin stopped reading its input") from None

    def send_grease(self) -> None:
        # As age does: an unknown command the plugin must ignore, so that
        # plugins keep tolerating commands added to the protocol later.
        args = [str(random.randrange(100)) for _ in range(random.randrange(3))]
        self.send(f"grease-{random.getrandbits(32):x}", args, os.urandom(random.randrange(100)))

    def _line(self) -> bytes:
        line = self._stdout.readline(_MAX_LINE + 1)
        if not line.endswith(b"\n"):
            if len(line) > _MAX_LINE:
                raise ProtocolError("the plugin sent an overlong line")
            raise ProtocolError("the plugin exited before finishing the protocol")
        return line[:-1]

    def receive(self) -> Stanza:
        def error(message: str) -> ProtocolError:
            return ProtocolError(f"the plugin sent a stanza age cannot read: {message}")

        return read_stanza(self._line(), self._line, error, max_body=_MAX_BODY)

    def close(self) -> None:
        # Closing our ends lets a plugin that is done exit by itself. One that
        # is still busy (say, waiting on hardware) is then asked to stop with
        # SIGINT, as age does, and killed if it ignores that too. Sending
        # SIGINT at once would interrupt plugins in the middle of exiting.
        for pipe in (self._stdin, self._stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self._process.wait(_EXIT_GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            self._process.send_signal(signal.SIGINT)
        try:
            self._process.wait(_EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _call(callbacks: object, method: str, *args: object) -> tuple[bool, object]:
    """(True, result) of a user callback, or (False, None) when it is missing or fails."""
    function = getattr(callbacks, method, None)
    if function is None:
        return False, None
    try:
        return True, function(*args)
    except Exception:
        # age reports a failing callback to the plugin as `fail` and lets
        # the plugin decide whether that is fatal; so do we.
        return False, None


def _answer_other(conn: Connection, s: Stanza, callbacks: object) -> None:
    """Answer a phase 2 command both state machines share: an error, a user
    interface request, or anything unknown (`unsupported`)."""
    if s.type == "error":
        conn.send("ok")
        raise ProtocolError(s.body.decode("utf-8", "replace"))
    if s.type == "msg":
        ok, _ = _call(callbacks, "display_message", s.body.decode("utf-8", "replace"))
        conn.send("ok" if ok else "fail")
    elif s.type in ("request-public", "request-secret"):
        method = "request_public_string" if s.type == "request-public" else "request_passphrase"
        _, value = _call(callbacks, method, s.body.decode("utf-8", "replace"))
        if isinstance(value, str):
            conn.send("ok", body=passphrase_bytes(value))
        else:
            conn.send("fail")
    elif s.type == "confirm":
        if len(s.args) not in (1, 2):
            raise ProtocolError("malformed confirm command: wrong number of arguments")
        options: list[str | None]
        try:
            # age hands the options' bytes on as they are (Go strings), as it does the message's
            options = [b64decode(a).decode("utf-8", "replace") for a in s.args]
            yes, no = options + [None] * (2 - len(s.args))
        except ValueError:
            raise ProtocolError("malformed confirm command: bad option encoding") from None
        _, choice = _call(callbacks, "confirm", s.body.decode("utf-8", "replace"), yes, no)
        if isinstance(choice, bool):
            conn.send("ok", ["yes" if choice else "no"])
        else:
            conn.send("fail")
    else:
        conn.send("unsupported")


def _index_zero(s: Stanza, minimum_args: int) -> None:
    # We always send exactly one file (one file key, or one header), so
    # every index the plugin sends back must be 0.
    if len(s.args) < minimum_args:
        raise ProtocolError(f"malformed {s.type} command: too few arguments")
    # age reads the index with strconv.Atoi ("00", "+0" and "-0" are 0)
    index = s.args[0]
    shown = repr(index if len(index) <= 24 else index[:12] + "..." + index[-8:])
    try:
        value = atoi(index)
    except ValueError:
        raise ProtocolError(f"malformed {s.type} command: invalid file index {shown}") from None
    if value:
        raise ProtocolError(f"malformed {s.type} command: unexpected file index {shown}")


def wrap(binary: Program, recipients: Iterable[str], identities: Iterable[str], file_key: bytes,
         callbacks: object) -> tuple[list[Stanza], frozenset[str]]:
    """Run recipient-v1: wrap `file_key` to the Bech32 `recipients` and `identities`.

    Returns the stanzas and the labels the plugin asked for.
    """
    stanzas: list[Stanza] = []
    size = 0
    labels: frozenset[str] | None = None
    with Connection(binary, "recipient-v1") as conn:
        for r in recipients:
            conn.send("add-recipient", [r])
        for i in identities:
            conn.send("add-identity", [i])
        conn.send_grease()
        conn.send("wrap-file-key", body=file_key)
        conn.send("extension-labels")
        conn.send("done")
        while (s := conn.receive()).type != "done":
            if s.type == "recipient-stanza":
                _index_zero(s, 2)
                # Counted as they come: more than a header holds had all been kept first (a GiB and more).
                size += len(s.body)
                if size > MAX_HEADER or len(stanzas) == MAX_STANZAS:
                    raise ProtocolError("the plugin's stanzas are more than a header holds")
                stanzas.append(Stanza(s.args[1], s.args[2:], s.body))
                conn.send("ok")
            elif s.type == "labels":
                if labels is not None:
                    raise ProtocolError("repeated labels command")
                labels = frozenset(s.args)
                conn.send("ok")
            else:
                _answer_other(conn, s, callbacks)
    if not stanzas:
        raise ProtocolError("the plugin returned no recipient stanzas")
    return stanzas, labels or frozenset()


def unwrap(binary: Program, identities: Iterable[str], stanzas: list[Stanza], callbacks: object) -> bytes | None:
    """Run identity-v1: offer every stanza of one header; the file key, or None."""
    file_key: bytes | None = None
    with Connection(binary, "identity-v1") as conn:
        for i in identities:
            conn.send("add-identity", [i])
        conn.send_grease()
        for s in stanzas:
            conn.send("recipient-stanza", ["0", s.type, *s.args], s.body)
        conn.send("done")
        while (s := conn.receive()).type != "done":
            if s.type == "file-key":
                _index_zero(s, 1)
                if len(s.args) != 1:
                    raise ProtocolError("malformed file-key command: too many arguments")
                if file_key is not None:
                    raise ProtocolError("the plugin sent two file keys for one file")
                file_key = s.body
                conn.send("ok")
            else:
                _answer_other(conn, s, callbacks)
    return file_key
