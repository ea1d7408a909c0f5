"""The line-at-a-time header parser agefast used before it took the header
whole: the reference that tests/test_format.py holds
agefast.format.grammar.parse_header to.

It reads one line, parses it, then reads the next, so where it fails is
plainly where a broken header first breaks. The bounds are the grammar's
own, read when it runs, so a test can make them small; their rule is
stated as the grammar states it (no line over MAX_LINE, no header over
MAX_HEADER), where the old parser let a header end one byte past it.
"""

from agefast.errors import HeaderError
from agefast.format import grammar
from agefast.format.grammar import MAC_PREFIX, VERSION_LINE, Header, Stanza, b64decode, read_stanza


def _read_line(src, consumed: int) -> bytes:
    limit = min(grammar.MAX_LINE + 1, grammar.MAX_HEADER - consumed)
    line = src.readline(limit)
    if not line.endswith(b"\n"):
        if len(line) == limit:
            raise HeaderError("header line or header too long")
        raise HeaderError("the file is truncated: it ends inside the header")
    return line


def parse_header(src) -> Header:
    start = src.consumed
    line = src.readline(len(VERSION_LINE))
    if line != VERSION_LINE:
        raise grammar._not_version_line(line)   # the version line is read as before
    lines = [line]
    stanzas: list[Stanza] = []

    def body_line() -> bytes:
        line = _read_line(src, src.consumed - start)
        lines.append(line)
        return line[:-1]

    while True:
        line = _read_line(src, src.consumed - start)
        if line.startswith(MAC_PREFIX):
            if not stanzas:
                raise HeaderError("header has no recipient stanzas")
            if not line.startswith(b"--- "):
                raise HeaderError(f"malformed header MAC line: {line[:-1][:80]!r}")
            try:
                mac = b64decode(line[4:-1])
            except ValueError:
                raise HeaderError("malformed header MAC line: bad base64") from None
            if len(mac) != 32:
                raise HeaderError("malformed header MAC line: wrong length")
            lines.append(MAC_PREFIX)
            return Header(stanzas, mac, b"".join(lines))
        lines.append(line)
        stanzas.append(read_stanza(line[:-1], body_line, HeaderError))
