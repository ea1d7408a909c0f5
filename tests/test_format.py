"""Units of the format: bech32, canonical base64, header round trips."""

import base64
import binascii
import io
from unittest import mock

import pytest
from hypothesis import given, strategies as st

import header_naive
from agefast.format import bech32, grammar
from agefast.io.source import MemorySource, Source
from agefast.errors import HeaderError
from agefast.format.grammar import (VERSION_LINE, Stanza, b64decode, b64encode, encode_header_without_mac,
                                    encode_mac_line, parse_header)

from streams import Trickle
from test_vectors import FILES, load


def test_bech32_round_trip_without_length_limit():
    data = bytes(range(256)) * 8
    s = bech32.encode("age1pq", data)
    assert len(s) > 90 and bech32.decode(s) == ("age1pq", data)
    upper = bech32.encode("AGE-SECRET-KEY-", b"\x01" * 32)
    assert upper.isupper() and bech32.decode(upper) == ("AGE-SECRET-KEY-", b"\x01" * 32)


@pytest.mark.parametrize("bad", [
    "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwJ",  # mixed case
    "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwk",  # checksum
    "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujbj",  # bad character
    "1qqqqqq",
])
def test_bech32_rejects(bad):
    with pytest.raises(bech32.Bech32Error):
        bech32.decode(bad)


def _with_checksum(hrp: str, values: list[int]) -> str:
    check = bech32._polymod(bech32._hrp_expand(hrp) + values + [0] * 6) ^ 1
    return hrp + "1" + "".join(bech32._CHARSET[v] for v in values + [(check >> 5 * (5 - i)) & 31 for i in range(6)])


def test_bech32_refuses_padding_bits_that_are_not_zero():
    # 32 bytes are 52 characters of 5 bits and 4 bits of padding: set, the string is another spelling of the key.
    good = bech32.encode("age", bytes(range(32)))
    values = [bech32._VALUES[c] for c in good[4:-6]]
    assert _with_checksum("age", values) == good
    values[-1] |= 0b1111
    with pytest.raises(bech32.Bech32Error, match="invalid padding"):
        bech32.decode(_with_checksum("age", values))


def test_bech32_known_age_recipient():
    hrp, data = bech32.decode("age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj")
    assert hrp == "age" and len(data) == 32


@pytest.mark.parametrize("text", ["AAA=", "AB", "AAB", "A", "AA\n", "AA A"])
def test_base64_rejects_non_canonical(text):
    with pytest.raises(ValueError):
        b64decode(text)


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n -_", max_size=12))
def test_base64_accepts_exactly_the_canonical_unpadded_encodings(text):
    # The definition, by the standard library: what decodes once padded and
    # encodes back to the very same text, unpadded.
    try:
        expected = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error:
        expected = None
    if expected is not None and base64.b64encode(expected).decode().rstrip("=") == text:
        assert b64decode(text) == expected
    else:
        with pytest.raises(ValueError):
            b64decode(text)


def test_base64_round_trip():
    for n in range(70):
        data = bytes(range(n))
        assert b64decode(b64encode(data)) == data


NON_HEADER_FAILURES = [p for p in FILES if load(p)[0]["expect"] not in ("header failure", "armor failure")
                       and load(p)[0].get("armored") != "yes"]


@pytest.mark.parametrize("path", NON_HEADER_FAILURES, ids=[p.name for p in NON_HEADER_FAILURES])
def test_header_reencodes_to_the_same_bytes(path):
    _, _, body = load(path)
    header = parse_header(Source(io.BytesIO(body)))
    assert encode_header_without_mac(header.stanzas) == header.mac_input


def test_header_needs_a_stanza():
    with pytest.raises(HeaderError, match="header has no recipient stanzas"):
        parse_header(Source(io.BytesIO(b"age-encryption.org/v1\n--- " + b"A" * 43 + b"\n")))


MAC_LINE = b"--- " + b"A" * 43 + b"\n"


def _parse(stanzas: bytes):
    return parse_header(Source(io.BytesIO(VERSION_LINE + stanzas + MAC_LINE)))


@pytest.mark.parametrize("size", [0, 1, 47, 48, 49, 96, 100])
def test_stanza_body_lines_end_with_a_short_one(size):
    body = bytes(range(size))
    encoded = Stanza("t", ["a", "b"], body).encode()
    lines = encoded.split(b"\n")
    assert lines[0] == b"-> t a b" and lines[-1] == b""
    assert all(len(line) == 64 for line in lines[1:-2]) and len(lines[-2]) < 64
    assert _parse(encoded).stanzas == [Stanza("t", ["a", "b"], body)]


@pytest.mark.parametrize("arguments", [b"", b"a  b", b"a ", b" a", b"a\x7fb", b"a\x1fb", b"a\tb", "\u00e9".encode()])
def test_stanza_arguments_are_vchar_runs_split_by_single_spaces(arguments):
    with pytest.raises(HeaderError, match="malformed stanza arguments"):
        _parse(b"-> " + arguments + b"\n\n")


@pytest.mark.parametrize("source", [MemorySource, lambda data: Source(io.BytesIO(data))], ids=["memory", "stream"])
def test_a_body_line_past_64_columns_and_a_mac_line_without_its_space_are_refused(source):
    long_line = b"-> a\n" + b64encode(bytes(60)).encode() + b"\n\n"     # 80 columns
    with pytest.raises(HeaderError, match="line longer than 64 columns"):
        parse_header(source(VERSION_LINE + long_line + MAC_LINE))
    with pytest.raises(HeaderError, match="malformed header MAC line"):
        parse_header(source(VERSION_LINE + b"-> a\n\n" + b"---X" + MAC_LINE[4:]))


@pytest.mark.parametrize("mangle", [lambda d: d.replace(b"\n", b"\r\n"),
                                    lambda d: b"\xff\xfe" + d.decode("latin-1").encode("utf-16-le")],
                         ids=["crlf", "utf-16"])
def test_an_intro_powershell_mangled_is_told_whatever_the_reads(mangle):
    # The command had told it only where its first read held the intro's 22 bytes.
    data = mangle(VERSION_LINE + b"-> a\n\n" + MAC_LINE)
    for source in (MemorySource(data), Source(Trickle(data, 1)), Source(io.BytesIO(data))):
        with pytest.raises(grammar.MangledIntro, match="corrupted by PowerShell redirection"):
            parse_header(source)


def test_stanza_arguments_take_every_vchar():
    every = bytes(range(33, 127))
    assert _parse(b"-> " + every + b" x\n\n").stanzas == [Stanza(every.decode(), ["x"], b"")]


# Headers to break: one X25519 stanza, and stanzas of bodies 0, 47, 48
# (a full line and an empty one) and 100 bytes, with a payload behind each.
_MAC = encode_mac_line(bytes(range(32)))
_HEADERS = [
    encode_header_without_mac([Stanza("X25519", [b64encode(bytes(32))], bytes(range(32)))]) + _MAC,
    encode_header_without_mac([Stanza("a", ["b", "c"], bytes(range(n))) for n in (0, 47, 48, 100)]) + _MAC,
]
_EDITS = st.lists(st.tuples(st.floats(0, 1), st.sampled_from(
    [b"", b"\n", b"-", b"---", b"--- ", b" ", b"A", b"=", b"\x00", b"\xff", b"-> x\n", b"A" * 64 + b"\n"]),
    st.booleans()), max_size=4)


def _edit(data: bytes, edits) -> bytes:
    """`data` with each of `edits` made after its version line."""
    for where, text, replace in edits:
        at = len(VERSION_LINE) + int(where * (len(data) - len(VERSION_LINE)))
        data = data[:at] + text + data[at + replace:]
    return data


def _outcome(parse, src):
    try:
        header = parse(src)
    except HeaderError as e:
        return str(e)
    return header.stanzas, header.mac, header.mac_input, src.consumed


@given(st.sampled_from(_HEADERS), _EDITS, st.integers(0, 120), st.integers(40, 300), st.integers(150, 1000),
       st.integers(1, 7))
def test_header_fails_where_a_line_at_a_time_parser_would(header, edits, cut, max_line, max_header, step):
    """The header is taken whole, through its "---" line, then parsed: it must
    accept what a parser of one line at a time accepts, leave the source at
    the same place, and fail with its error (the first broken line's, else
    the cut's), here with bounds small enough to be met."""
    data = _edit(header + b"\x01" * 20, edits)
    data = data[:len(data) - cut] if cut < len(data) else data
    small = {"MAX_LINE": max_line, "MAX_HEADER": max_header,
             "_AFTER_VERSION_LINE": max_header - len(VERSION_LINE)}
    with mock.patch.multiple(grammar, **small):
        reference = _outcome(header_naive.parse_header, Source(io.BytesIO(data)))
        assert _outcome(parse_header, MemorySource(data)) == reference
        assert _outcome(parse_header, Source(Trickle(data, step))) == reference


def test_a_header_past_the_limit_is_too_long_at_any_size():
    header = _HEADERS[1]
    for limit in range(len(VERSION_LINE), len(header) + 2):
        small = {"MAX_HEADER": limit, "_AFTER_VERSION_LINE": limit - len(VERSION_LINE)}
        with mock.patch.multiple(grammar, **small):
            for src in (MemorySource(header), Source(io.BytesIO(header))):
                outcome = _outcome(parse_header, src)
                if limit >= len(header):
                    assert outcome[3] == len(header)
                else:
                    assert outcome == "header line or header too long"


def test_no_header_is_written_that_the_parser_refuses():
    # agefast had written a header of 10,700 post-quantum recipients (17 MB) that it could not read back.
    from agefast.errors import EncryptError
    from agefast.io.source import MemorySource

    def round_trip(stanzas):
        header = grammar.encode_header_without_mac(stanzas) + grammar.encode_mac_line(bytes(32))
        return grammar.parse_header(MemorySource(header + bytes(16)))

    longest = grammar.MAX_LINE - len("-> x ")
    assert round_trip([Stanza("x", ["a" * longest], b"")])
    with pytest.raises(EncryptError, match="too long for agefast to read back"):
        round_trip([Stanza("x", ["a" * (longest + 1)], b"")])
    # The whole header: the largest body that fits, and one byte more.
    def header_size(body):
        chars = (4 * body + 2) // 3         # unpadded base64, in lines of 64 and a last short one
        return len(grammar.VERSION_LINE) + len(b"-> x\n") + chars + chars // 64 + 1 + len(b"---") + 45

    body = grammar.MAX_HEADER * 3 // 4
    while header_size(body) >= grammar.MAX_HEADER:
        body -= 1
    assert round_trip([Stanza("x", [], bytes(body))])
    with pytest.raises(EncryptError):
        round_trip([Stanza("x", [], bytes(body + 1))])


@pytest.mark.parametrize("source", [MemorySource, lambda data: Source(io.BytesIO(data))])
def test_a_header_of_too_many_stanzas_is_refused_before_it_is_parsed(source):
    # 2.7 million stanzas in 16 MiB had taken 10 s and 750 MB to refuse (benchmarks/HISTORY.md).
    text = grammar.VERSION_LINE + b"-> a\n\n" * (grammar.MAX_STANZAS + 1) + b"--- " + b"A" * 43 + b"\n"
    with pytest.raises(HeaderError, match=f"more than {grammar.MAX_STANZAS} stanzas"):
        grammar.parse_header(source(text + bytes(48)))
    fewer = text.replace(b"-> a\n\n", b"", 1)
    assert len(grammar.parse_header(source(fewer + bytes(48))).stanzas) == grammar.MAX_STANZAS
