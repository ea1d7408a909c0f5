"""The line-by-line armor codec agefast used before the block codec: the
reference that tests/test_armor.py holds agefast.format.armor to.

It parses and writes one 64-column line at a time with the exact rules, so
what it accepts, what it rejects and at which read is plainly visible.
"""

import base64
import binascii

from agefast.errors import ArmorError

BEGIN = b"-----BEGIN AGE ENCRYPTED FILE-----"
END = b"-----END AGE ENCRYPTED FILE-----"
COLUMNS = 64
BYTES_PER_LINE = COLUMNS // 4 * 3
_WHITESPACE = b" \t\n\v\f\r"
MAX_WHITESPACE = 1024


def _strip_eol(line: bytes) -> bytes:
    return line.removesuffix(b"\n").removesuffix(b"\r")


class ArmorReader:
    """Decodes armor from a Source; a reader object with `readinto`."""

    def __init__(self, source):
        self._src = source
        self._started = False
        self._done = False
        self._pending = b""
        self._error = None

    def _fail(self, message: str):
        self._error = ArmorError(f"invalid armor: {message}")
        raise self._error

    def _line(self) -> bytes:
        line = self._src.readline(COLUMNS + 3)
        if not line:
            self._fail("unexpected end of file")
        if len(line) > COLUMNS + 2 or (not line.endswith(b"\n") and _strip_eol(line) != END):
            self._fail("line too long or unterminated")
        return _strip_eol(line)

    def _start(self) -> None:
        blank = 0  # whitespace before the BEGIN line, at most MAX_WHITESPACE bytes
        while True:
            line = self._src.readline(MAX_WHITESPACE + len(BEGIN) + 2 - blank)
            if not line:
                self._fail("no BEGIN line")
            text = line.lstrip(_WHITESPACE)
            blank += len(line) - len(text)
            if blank > MAX_WHITESPACE:
                self._fail(f"more than {MAX_WHITESPACE} bytes of whitespace before the BEGIN line")
            if text:
                break
        if line not in (BEGIN + b"\n", BEGIN + b"\r\n"):     # spaces before BEGIN on its line too
            self._fail(f"bad BEGIN line {line[:len(BEGIN) + 2]!r}")
        self._started = True

    def _finish(self) -> None:
        # Only whitespace may follow the END line, less than MAX_WHITESPACE bytes.
        seen = 0
        while True:
            rest = self._src.readline(MAX_WHITESPACE - seen)
            if not rest:
                break
            if rest.strip(_WHITESPACE):
                self._fail("data after the END line")
            seen += len(rest)
            if seen == MAX_WHITESPACE:
                self._fail(f"{MAX_WHITESPACE} bytes or more of whitespace after the END line")
        self._done = True

    def _next_line(self) -> bytes:
        if not self._started:
            self._start()
        line = self._line()
        if line == END:
            self._finish()
            return b""
        if not line or len(line) > COLUMNS:
            self._fail("empty line or line longer than 64 columns")
        try:
            data = base64.b64decode(line, validate=True)
        except binascii.Error:
            self._fail("malformed base64")
        if base64.b64encode(data) != line:
            self._fail("non-canonical base64")
        if len(line) < COLUMNS or line.endswith(b"="):
            # A short (or padded) line must be the last one.
            if self._line() != END:
                self._fail("short line before the END line")
            self._finish()
        return data

    def readinto(self, b) -> int:
        if self._error is not None:
            raise self._error
        mv = memoryview(b).cast("B")
        n = 0
        while n < len(mv):
            if not self._pending:
                if self._done:
                    break
                try:
                    self._pending = self._next_line()
                except ArmorError:
                    if not n:
                        raise
                    break       # the lines before the flaw now, the error at the next read
                continue
            take = min(len(self._pending), len(mv) - n)
            mv[n:n + take] = self._pending[:take]
            self._pending = self._pending[take:]
            n += take
        return n


class ArmorWriter:
    """Encodes what is written to it as armor onto `dst`."""

    def __init__(self, dst):
        self._dst = dst
        self._buf = bytearray()
        self._dst.write(BEGIN + b"\n")

    def write(self, data) -> int:
        self._buf += data
        whole = len(self._buf) - len(self._buf) % BYTES_PER_LINE
        if whole:
            text = base64.b64encode(self._buf[:whole])
            self._dst.write(b"".join(text[i:i + COLUMNS] + b"\n" for i in range(0, len(text), COLUMNS)))
            del self._buf[:whole]
        return len(data)

    def close(self) -> None:
        tail = base64.b64encode(self._buf) + b"\n" if self._buf else b""
        self._dst.write(tail + END + b"\n")
        self._buf = bytearray()
