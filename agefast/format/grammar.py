"""The age header grammar: version line, recipient stanzas, MAC line.

Parsing is strict: only the canonical encoding of a header is accepted, so the
bytes that were read are exactly the bytes a re-encoding would produce, and the
header MAC can be checked over the bytes as read.
"""

import binascii
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import EncryptError, HeaderError, go_quote
from .stanza import COLUMNS, STANZA_PREFIX, b64encode_bytes
# Stanza and b64encode live in stanza.py (a leaf the public types import); the
# recipients take them from here, with the parser.
from .stanza import Stanza as Stanza, b64encode as b64encode

if TYPE_CHECKING:
    from ..io.source import HeaderSource


VERSION_LINE = b"age-encryption.org/v1\n"
MAC_PREFIX = b"---"
BYTES_PER_LINE = COLUMNS // 4 * 3
# Bounds on what a header may cost to parse. A post-quantum stanza's argument
# line is ~1.5 KB; nothing legitimate comes near these.
MAX_LINE = 64 * 1024
MAX_HEADER = 16 * 1024 * 1024
# A file has a stanza for each recipient: 100,000 is a header of 0.6 MB (of
# the smallest stanzas) to 15 MB (X25519's) that parses in ~0.5 s. A header
# of 16 MiB can hold 3 million, which took ~15 s and ~800 MB to refuse.
MAX_STANZAS = 100_000
_AFTER_VERSION_LINE = MAX_HEADER - len(VERSION_LINE)
_MAC_LINE_SIZE = len(b" \n") + 43    # after "---": a space, the base64 of the 32-byte MAC, a newline

# Checks of a whole string at once: bytes.translate deleting these leaves
# nothing exactly when every byte is one of them (a loop over the bytes in
# Python cost most of the parse of a small file's header).
_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# How much whitespace may surround an armored file's PEM block, as in age 1.3:
# at most this many bytes before the BEGIN line (cmd/age looks for armor in a
# peek of 1024 bytes plus the BEGIN line), and fewer than this after the END
# line (armor.NewReader reads at most 1024 bytes past it). A reader that
# skipped any amount would read a stream of newlines to its end before failing.
MAX_WHITESPACE = 1024
# Go's bytes.TrimSpace, which age trims armor and SSH key lines with: what unicode.IsSpace calls a space
# (Python's str.strip() also takes \x1c-\x1f).
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
    "\u2028\u2029\u202f\u205f\u3000"
_ARGUMENT_LINE_BYTES = bytes(range(32, 127))   # VCHAR, of which arguments are made, and the space between them


# What each byte is worth as a base64 digit (0 for bytes outside the
# alphabet, which b64decode refuses first), and the low bits of a last digit
# that a text of each length mod 4 leaves unused: a canonical encoding has
# them zero, which is what re-encoding the result would check.
_B64_DIGIT = bytes(_B64_ALPHABET.find(bytes([b])) % 64 for b in range(256))
_UNUSED_BITS = (0, 0, 0x0F, 0x03)
_PADDING = (b"", b"", b"==", b"=")


def b64decode(text: str | bytes) -> bytes:
    """Decode canonical unpadded base64; raise ValueError otherwise."""
    raw = text.encode("ascii") if isinstance(text, str) else bytes(text)
    rest = len(raw) % 4
    if raw.translate(None, _B64_ALPHABET) or rest == 1:
        raise ValueError("not unpadded base64")
    if rest and _B64_DIGIT[raw[-1]] & _UNUSED_BITS[rest]:
        raise ValueError("non-canonical base64")
    return binascii.a2b_base64(raw + _PADDING[rest], strict_mode=True)


def atoi(text: str) -> int:
    """A number as Go's strconv.Atoi reads it (age's plugin file indexes, agefast's counts in flags): an optional
    sign, then ASCII digits, within int64 (int() also takes "٣", "1_0" and " 3"); ValueError otherwise."""
    digits = text[1:] if text.startswith(("+", "-")) else text
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError("not a number")
    value = -int(digits) if text.startswith("-") else int(digits)
    if not -1 << 63 <= value < 1 << 63:
        raise ValueError("out of range")
    return value


def single_argument(stanza: Stanza, size: int, name: str) -> bytes:
    """The one base64 argument, of `size` bytes, of a stanza that wraps a file
    key in a 32-byte body (X25519, mlkem768x25519); HeaderError otherwise.

    The body length is checked before any decryption is tried, which keeps
    the stanza from serving as a partitioning oracle.
    """
    kind = f"invalid {stanza.type} stanza"
    if len(stanza.args) != 1:
        raise HeaderError(f"{kind}: wrong number of arguments")
    try:
        value = b64decode(stanza.args[0])
    except ValueError:
        raise HeaderError(f"{kind}: malformed {name}") from None
    if len(value) != size:
        raise HeaderError(f"{kind}: {name} is not {size} bytes")
    if len(stanza.body) != 32:
        raise HeaderError(f"{kind}: body is not 32 bytes")
    return value


def read_stanza(first: bytes, next_line: Callable[[], bytes], error: Callable[[str], Exception],
                max_body: int | None = None) -> Stanza:
    """A stanza from its `-> ...` line and the body lines next_line() returns,
    all without their newline; error(message) is raised where the grammar is
    broken. The header and the plugin protocol share this grammar."""
    if not first.startswith(STANZA_PREFIX):
        raise error(f"malformed stanza opening line: {first[:80]!r}")
    line = first[len(STANZA_PREFIX):]
    # Arguments are non-empty runs of VCHAR separated by single spaces.
    if line.translate(None, _ARGUMENT_LINE_BYTES):
        raise error(f"malformed stanza arguments: {first[:80]!r}")
    args = line.decode("ascii").split(" ")
    if "" in args:
        raise error(f"malformed stanza arguments: {first[:80]!r}")
    parts: list[bytes] = []     # the full lines' bytes: most bodies have none
    size = 0
    while True:
        text = next_line()
        if len(text) > COLUMNS:
            raise error("malformed stanza body: line longer than 64 columns")
        try:
            part = b64decode(text)
        except ValueError as e:
            raise error(f"malformed stanza body line: {e}") from None
        size += len(part)
        if max_body is not None and size > max_body:
            raise error("oversized stanza body")
        if len(text) < COLUMNS:
            return Stanza(args[0], args[1:], b"".join(parts) + part if parts else part)
        parts.append(part)


class Header:
    __slots__ = ("stanzas", "mac", "mac_input")

    def __init__(self, stanzas: list[Stanza], mac: bytes, mac_input: bytes):
        self.stanzas = stanzas
        self.mac = mac
        # The header bytes the MAC covers: everything up to and including "---".
        self.mac_input = mac_input


def scrypt_not_alone(stanzas: list[Stanza]) -> bool:
    """Whether a header's stanzas break the spec's rule that an scrypt stanza (a passphrase's) is a header's only
    one: checked as a header is read (agefast.recipients.scrypt.check_alone) and as one is written."""
    return len(stanzas) != 1 and any(s.type == "scrypt" for s in stanzas)


def encode_header_without_mac(stanzas: list[Stanza]) -> bytes:
    """The header's text up to its MAC; EncryptError where parse_header would refuse the header (no stanza, a
    stanza's type or argument not a run of VCHAR, a stanza's line or the header too long): agefast would write
    a file it could not read back. A recipient of the caller's own makes its stanzas."""
    if not stanzas:
        raise EncryptError("the recipients made no stanza: a header needs one")
    for s in stanzas:
        # Its type and arguments, runs of VCHAR: printable ASCII, split at the spaces between them only.
        try:
            line = " ".join([s.type, *s.args])
        except TypeError:
            line = ""
        words = line.split(" ")
        if not (line.isascii() and line.isprintable()) or len(words) != 1 + len(s.args) or "" in words:
            raise EncryptError(f"a recipient made a malformed stanza: -> {s.type!r} {s.args!r}"[:200])
    if scrypt_not_alone(stanzas):     # a recipient of the caller's, or a plugin, may make one
        raise EncryptError("an scrypt stanza must be the only one in a header")
    encoded = [s.encode() for s in stanzas]
    header = VERSION_LINE + b"".join(encoded) + MAC_PREFIX
    if len(header) + _MAC_LINE_SIZE >= MAX_HEADER or len(stanzas) > MAX_STANZAS \
            or any(s.index(b"\n") > MAX_LINE for s in encoded):
        raise EncryptError(f"the header would be too long for agefast to read back ({len(header) >> 10} KiB for "
                           f"{len(stanzas)} stanzas; at most {MAX_HEADER >> 20} MiB, {MAX_STANZAS} stanzas, "
                           f"lines of at most {MAX_LINE >> 10} KiB)")
    return header


def encode_mac_line(mac: bytes) -> bytes:
    return b" " + b64encode_bytes(mac) + b"\n"


def parse_header(src: "HeaderSource", require_stanzas: bool = True) -> Header:
    """Read a header from a Source or MemorySource, leaving it positioned at the payload; one without stanzas is
    a HeaderError unless not `require_stanzas` (age-inspect describes it: Go's parser reads on to the MAC line)."""
    # No longer than the version line: anything else is not an age file, and
    # a first line of a gigabyte of spaces need not be read to say so.
    line = src.readline(len(VERSION_LINE))
    if line != VERSION_LINE:
        raise _not_version_line(line)
    # The rest is taken whole, through the first line that starts "---": the
    # MAC line, or in a broken header the line a stanza trips on (no body
    # line starts with "-"). Its lines are then read in order, as a reader of
    # one line at a time would (tests/header_naive.py), and fail where it
    # would: at the first broken line, else where the header was cut short.
    # Read line by line, a 1 KiB file's header took 6.8 us, now 5.7
    # (2026-12-04, Zen 4, medians of 11 rounds).
    text = src.read_lines_through(MAC_PREFIX, _AFTER_VERSION_LINE, MAX_LINE)
    # Counted before the split: every stanza, and nothing else, starts a line with "-> ".
    if text.count(b"\n" + STANZA_PREFIX) + text.startswith(STANZA_PREFIX) > MAX_STANZAS:
        raise HeaderError(f"more than {MAX_STANZAS} stanzas in the header")
    lines = text.split(b"\n")
    rest = lines.pop()  # after the last newline: nothing, or a line cut short
    # Cut short at the end of the file, or at a line or a header too long.
    too_long = len(text) == _AFTER_VERSION_LINE or len(rest) > MAX_LINE
    stanzas: list[Stanza] = []
    it = iter(lines)
    for line in it:
        if line.startswith(MAC_PREFIX):
            if not stanzas and require_stanzas:
                # The spec's grammar is "v1-line 1*stanza end"; Go age reads on and finds no identity matched.
                raise HeaderError("header has no recipient stanzas")
            if not line.startswith(b"--- "):
                raise HeaderError(f"malformed header MAC line: {line[:80]!r}")
            try:
                mac = b64decode(line[4:])
            except ValueError:
                raise HeaderError("malformed header MAC line: bad base64") from None
            if len(mac) != 32:
                raise HeaderError("malformed header MAC line: wrong length")
            # The MAC covers the header up to and including its "---".
            return Header(stanzas, mac, VERSION_LINE + text[:len(text) - len(line) + 2])
        try:
            stanzas.append(read_stanza(line, it.__next__, HeaderError))
        except StopIteration:   # its body ran past the last whole line
            raise _cut_short(too_long) from None
    raise _cut_short(too_long)


def _cut_short(too_long: bool) -> HeaderError:
    if too_long:
        return HeaderError("header line or header too long")
    # The version line was whole, so this is an age file cut short.
    return HeaderError("the file is truncated: it ends inside the header")


class MangledIntro(HeaderError):
    """The version line as PowerShell's redirection leaves an age file, with CRLF line ends or in UTF-16
    (age's crlfMangledIntro and utf16MangledIntro, which its command tells with hints)."""


_MANGLED_INTROS = (VERSION_LINE[:-1] + b"\r", b"\xff\xfe" + "age-encryp".encode("utf-16-le"))


def _not_version_line(line: bytes) -> HeaderError:
    if line.startswith(_MANGLED_INTROS):
        return MangledIntro("invalid header intro: it looks like this file was corrupted by PowerShell redirection")
    if len(line) < len(VERSION_LINE) and not line.endswith(b"\n"):
        return HeaderError("header ends early: unexpected end of file")
    if line.startswith(b"age-encryption.org/"):
        return HeaderError(f"unsupported age format version: {go_quote(line)}")
    if line.isspace():
        return HeaderError("not an age file: it starts with whitespace, which only an armored file may, "
                           f"and at most {MAX_WHITESPACE} bytes of it")
    return HeaderError("not an age file: bad version line")
