"""Strict streaming ASCII armor: PEM with label "AGE ENCRYPTED FILE".

Armored files are malleable unless the parser is strict, so only the
canonical encoding is accepted: 64-column lines of padded base64, no headers,
no blank lines, no trailing spaces. The only leniencies are the ones age
allows: CRLF line endings, lines of whitespace before the PEM block and
whitespace after it (Unicode's, as age trims it), and a missing newline (or
a lone CR) after the END line. The whitespace is bounded as in age (MAX_WHITESPACE), so a file of
nothing but whitespace fails after reading a kilobyte of it, not at its end.

The body is decoded and encoded in blocks of many lines through pybase64's
SIMD codec. A block is decoded whole only where every line in it is a full
64-column line of unpadded base64 with its line ending in place, which the
exact per-line rules would accept as they stand; the lines around anything
else (the BEGIN line, the last lines, any flaw) go through those exact rules
one line at a time, so both paths accept the same files and fail at the same
line.
"""

import binascii
import functools
import io
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import ArmorError, again
from .._typing import Buffer
from ..io.buffers import new_bytes
from ..io.writes import write_all
from .grammar import GO_SPACE, MAX_WHITESPACE

if TYPE_CHECKING:
    from ..io.source import HeaderSource, Source

BEGIN = b"-----BEGIN AGE ENCRYPTED FILE-----"
END = b"-----END AGE ENCRYPTED FILE-----"
COLUMNS = 64
BYTES_PER_LINE = COLUMNS // 4 * 3
# The bytes a run of whitespace (GO_SPACE, in UTF-8) may start with: ASCII's, and the lead bytes of the others.
_WHITESPACE_STARTS = b" \t\n\v\f\r\xc2\xe1\xe2\xe3"
# Lines per block: 48 KiB of data, 65 KiB of text. Each pass over a block
# makes new buffers; of this size glibc takes them from its heap and uses
# them again, where blocks of 1 MiB of text were faulted in afresh time and
# again in a process that keeps glibc's defaults (decoding one such block in
# a loop: 672 page faults and 1.24 ms a block, against none and 0.27 ms a
# MiB in blocks of 1,024 lines; 2026-12-07, Zen 5). The command armors and
# dearmors 256 MiB as fast with either.
BLOCK_LINES = 1024


def starts_armored(source: "HeaderSource") -> bool:
    """Whether a Source holds armor: after at most MAX_WHITESPACE bytes of
    whitespace, a PEM dash line.

    Any leading "-----" counts, so a wrong PEM label is reported as an armor
    failure rather than as a garbled binary header. More whitespace than
    that is no armor, and the binary header parser rejects it at once.
    """
    # Most files tell by their first byte (a binary one starts "age-"),
    # without a copy of the whole span the armor may start in.
    if source.peek(1).strip(_WHITESPACE_STARTS + b"-"):
        return False
    head = source.peek(MAX_WHITESPACE + len(b"-----"))
    return head[_leading_space(head):].startswith(b"-----")


def _strip_eol(line: bytes) -> bytes:
    # As age's getLine: "\n", then "\r", each if there (an END line may end the file in "\r").
    return line.removesuffix(b"\n").removesuffix(b"\r")


def _leading_space(data: bytes) -> int:
    """How many bytes at the start of `data` are whitespace as age trims it around armor (Go's bytes.TrimSpace:
    GO_SPACE in UTF-8; a byte that is not UTF-8 is none)."""
    text = data.decode("utf-8", "surrogateescape")
    return len(data) - len(text.lstrip(GO_SPACE).encode("utf-8", "surrogateescape"))


def _leading(data: bytes, chars: bytes) -> int:
    """How many bytes at the start of `data` are among `chars`."""
    return len(data) - len(data.lstrip(chars))


class ArmorReader:
    """Decodes armor from a Source; a reader object with `readinto`."""

    def __init__(self, source: "Source") -> None:
        self._src = source
        self._started = False
        self._done = False
        self._pending = b""
        self._error: ArmorError | None = None
        # Lines to take one at a time, after a block that failed the fast
        # check: one of them is bad, and the exact rules say which.
        self._exact_lines = 0

    def _fail(self, message: str) -> NoReturn:
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
        head = self._src.peek(MAX_WHITESPACE + 1)
        blank = _leading_space(head)
        if blank > MAX_WHITESPACE:
            self._fail(f"more than {MAX_WHITESPACE} bytes of whitespace before the BEGIN line")
        # Whole lines of whitespace, as age skips them: spaces before BEGIN on its line are a bad BEGIN line
        # (whitespace to the end of the input is no BEGIN line).
        self._src.skip(blank if blank == len(head) else head.rfind(b"\n", 0, blank) + 1)
        line = self._src.readline(len(BEGIN) + 2)
        if not line:
            self._fail("no BEGIN line")
        if _strip_eol(line) != BEGIN or not line.endswith(b"\n"):
            self._fail(f"bad BEGIN line {line[:40]!r}")
        self._started = True

    def _finish(self) -> None:
        # Only whitespace may follow the END line.
        rest = self._src.peek(MAX_WHITESPACE)
        if _leading_space(rest) != len(rest):
            self._fail("data after the END line")
        if len(rest) == MAX_WHITESPACE:
            self._fail(f"{MAX_WHITESPACE} bytes or more of whitespace after the END line")
        self._src.skip(len(rest))
        self._done = True

    def _next_line(self) -> bytes:
        """The data of the next line, by the exact rules."""
        line = self._line()
        if line == END:
            self._finish()
            return b""
        if not line or len(line) > COLUMNS:
            self._fail("empty line or line longer than 64 columns")
        try:
            data = binascii.a2b_base64(line, strict_mode=True)
        except binascii.Error:
            self._fail("malformed base64")
        if binascii.b2a_base64(data, newline=False) != line:
            self._fail("non-canonical base64")
        if len(line) < COLUMNS or line.endswith(b"="):
            # A short (or padded) line must be the last one.
            if self._line() != END:
                self._fail("short line before the END line")
            self._finish()
        return data

    def _decode_block(self, out: memoryview) -> int:
        """Decode whole full lines into `out` (at most as many as it holds),
        if the lines ahead pass the fast check; return the bytes written."""
        lines = min(len(out) // BYTES_PER_LINE, BLOCK_LINES)
        if lines == 0:
            self._exact_lines = 1
            return 0
        # Lines end as the next one does; a line that does not breaks the run.
        eol = self._src.peek(COLUMNS + 2)[COLUMNS:]
        eol = b"\n" if eol.startswith(b"\n") else eol
        if eol not in (b"\n", b"\r\n"):
            self._exact_lines = 1
            return 0
        width = COLUMNS + len(eol)
        text = self._src.peek(lines * width)
        end = len(text) - len(text) % width
        good = _leading(text[COLUMNS:end:width], eol[:1])
        if len(eol) == 2:
            good = min(good, _leading(text[COLUMNS + 1:end:width], b"\n"))
        if good and b"=" in text[good * width - len(eol) - 2:good * width - len(eol)]:
            good -= 1  # a padded line is the last one: the exact rules check what follows
        if good == 0:
            self._exact_lines = 1
            return 0
        body = text[:good * width]
        body = body.replace(b"\n", b"") if width == COLUMNS + 1 else body.translate(None, b"\r\n")
        import pybase64     # here: a command with no armor saves importing it (~0.7 ms)

        try:
            data = pybase64.b64decode(body, validate=True)
        except binascii.Error:
            data = b""
        # Only lines of 64 base64 columns without padding make 48 bytes each
        # (and encode them canonically): a CR, LF or "=" inside a line leaves
        # fewer, and then the exact rules find the line at fault.
        if len(data) != good * BYTES_PER_LINE:
            self._exact_lines = good
            return 0
        out[:len(data)] = data
        self._src.skip(good * width)
        return len(data)

    def readinto(self, b: Buffer) -> int:
        if self._error is not None:
            raise again(self._error)
        mv = memoryview(b).cast("B")
        n = 0
        try:
            while n < len(mv):
                if self._pending:
                    take = min(len(self._pending), len(mv) - n)
                    mv[n:n + take] = self._pending[:take]
                    self._pending = self._pending[take:]
                    n += take
                    continue
                if self._done:
                    break
                if not self._started:
                    self._start()
                if not self._exact_lines:
                    got = self._decode_block(mv[n:])
                    if got:
                        n += got
                        continue
                self._exact_lines -= 1
                self._pending = self._next_line()
        except (BlockingIOError, ArmorError):
            # What was decoded into b is handed out now, or it would be lost with the error (the source has
            # moved past it). A non-blocking source with nothing more ready is asked again at the next call;
            # a flaw is raised then (self._error), as age's armor reader hands out every line before one.
            if not n:
                raise
        return n


# Armor is made whole in memory (agefast.encrypt), a block of lines at a
# time, up to this much text: that holds the binary file beside its armor,
# where a stream through ArmorWriter holds a batch. Made whole, 1 KiB took
# 61 us against 79 through the stream, 1 MiB 0.68 ms against 0.76-2.3; 16
# MiB as long either way, 64 MiB 92 ms against 88 (2026-12-07, Zen 5).
WHOLE_MAX = 64 << 20


def encoded_size(size: int) -> int:
    """The length of the armor ArmorWriter makes of `size` bytes."""
    text = -(-size // 3) * 4
    return len(BEGIN) + 1 + text + -(-text // COLUMNS) + len(END) + 1


def encode_whole(data: Buffer) -> bytes:
    """`data`, held in memory, as armor: what ArmorWriter makes of it."""
    mv = memoryview(data).cast("B")
    if len(mv) <= BLOCK_LINES * BYTES_PER_LINE:
        return b"%s\n%s%s\n" % (BEGIN, _encode_lines(mv), END)    # one block, without a writer's steps
    out = io.BytesIO()
    writer = ArmorWriter(out)
    writer.write(mv)
    writer.close()
    return out.getvalue()


# Armor held whole in memory is decoded in one pass, a block of lines at a
# time, where it is exactly what an armor writer (agefast's, age's) makes of
# its bytes: decoded, made again and compared, which no flaw survives.
# Anything else (CRLF, whitespace around it, a flaw) is read by ArmorReader,
# which says what is wrong.


class _NotAsWritten(Exception):
    """Armor held whole is not as a writer makes it (decode_whole's fill)."""


def decode_whole(data: Buffer) -> bytes | None:
    """The bytes armored as `data`, held in memory, where it is armor as a
    writer makes it; None otherwise (read it with ArmorReader). Decoded
    straight into the result, of the size such armor holds (new_bytes): a
    1 KiB file's armor took 35 us through ArmorReader (2026-12-06, Zen 2);
    decrypting a 1 MiB file, its armor took 2.9 ms through ArmorReader and
    0.4 so, 256 MiB 380 ms all told against 205 (2026-12-07, Zen 5)."""
    mv = memoryview(data).cast("B")
    head, tail = BEGIN + b"\n", END + b"\n"
    if len(mv) <= len(head) + len(tail) or mv[:len(head)] != head or mv[-len(tail):] != tail:
        return None
    body = mv[len(head):len(mv) - len(tail)]
    step = BLOCK_LINES * (COLUMNS + 1)
    if len(body) <= step:
        return _decode_lines(bytes(body))      # the one block's bytes are the result
    text = len(body) - -(-len(body) // (COLUMNS + 1))     # the base64, if every line ends in a newline
    if text % 4:
        return None

    def fill(view: memoryview, ready: Callable[[int], bool]) -> None:
        at = 0
        for start in range(0, len(body), step):
            block = _decode_lines(bytes(body[start:start + step]))
            # Every block but the last is whole lines of 48 bytes.
            if block is None or at + len(block) > len(view) or (
                    start + step < len(body) and len(block) != BLOCK_LINES * BYTES_PER_LINE):
                raise _NotAsWritten
            ready(at + len(block))
            view[at:at + len(block)] = block
            at += len(block)
        if at != len(view):
            raise _NotAsWritten

    try:
        return new_bytes(text // 4 * 3 - bytes(body[-3:-1]).count(b"="), fill)
    except _NotAsWritten:
        return None


def _decode_lines(lines: bytes) -> bytes | None:
    """The bytes of `lines` where they are laid out as a writer lays them
    out: the canonical encoding, in lines of 64 columns but the last, each
    ending in a newline (every 65th byte one, and no other but the last
    line's); else None. Checked in C: laying it out again in Python took a
    64 KiB file 50 us."""
    import pybase64     # here: a command with no armor saves importing it (~0.7 ms)

    text = lines.replace(b"\n", b"")
    try:
        decoded = pybase64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    # As many newlines as lines (those replace() took out; count() would take a 1 MiB block 0.26 ms), one
    # at the end and every 65th byte one.
    if (pybase64.b64encode(decoded) != text or not lines.endswith(b"\n")
            or len(lines) - len(text) != -(-len(text) // COLUMNS) or lines[COLUMNS::COLUMNS + 1].strip(b"\n")):
        return None
    return decoded


@functools.lru_cache(maxsize=4)     # a writer's blocks are nearly all BLOCK_LINES lines
def _lines_of(lines: int) -> struct.Struct:
    # One field per line, and an empty one after the last: joined with "\n",
    # the fields end every line, the last one too.
    return struct.Struct(f"{COLUMNS}s" * lines + "0s")


def _encode_lines(data: Buffer) -> bytes:
    """`data` in lines of base64 as a writer lays them out: 64 columns but
    the last, each ending in a newline.

    One struct call cuts the whole lines out in C and one join lays them out:
    3x as fast as joining slices cut in Python (a block of 16384 lines, Zen 4).
    """
    import pybase64

    text = pybase64.b64encode(data)
    whole = len(text) - len(text) % COLUMNS
    lines = b"\n".join(_lines_of(whole // COLUMNS).unpack_from(text))
    return lines + text[whole:] + b"\n" if whole < len(text) else lines


class ArmorWriter:
    """Encodes what is written to it as armor onto `dst`."""

    KEEPS_NOTHING = True    # what it is given is encoded before write returns (agefast.io.callers)

    def __init__(self, dst: Any) -> None:
        self._dst = dst
        self._buf = bytearray()  # less than a line, waiting for the rest
        write_all(self._dst, BEGIN + b"\n")

    @property
    def wrapped(self) -> Any:
        """The file it writes to (agefast.io.callers)."""
        return self._dst

    def _write_lines(self, data: bytearray | memoryview) -> None:
        """Write whole lines of data (a multiple of 48 bytes)."""
        write_all(self._dst, _encode_lines(data))

    def write(self, data: Buffer) -> int:
        mv = memoryview(data).cast("B")
        size = len(mv)
        if self._buf:
            take = min(len(mv), BYTES_PER_LINE - len(self._buf))
            self._buf += mv[:take]
            mv = mv[take:]
            if len(self._buf) < BYTES_PER_LINE:
                return size
            self._write_lines(self._buf)
            self._buf.clear()
        whole = len(mv) - len(mv) % BYTES_PER_LINE
        block = BLOCK_LINES * BYTES_PER_LINE
        for start in range(0, whole, block):
            self._write_lines(mv[start:min(start + block, whole)])
        self._buf += mv[whole:]
        return size

    def close(self) -> None:
        write_all(self._dst, _encode_lines(self._buf) + END + b"\n")
        self._buf.clear()
