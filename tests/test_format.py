"""Units of the format: bech32, canonical base64, header round trips."""

import base64
import binascii
import io

import pytest
from hypothesis import given, strategies as st

from agefast.format import bech32
from agefast.io.source import Source
from agefast.errors import HeaderError
from agefast.format.grammar import (VERSION_LINE, Stanza, b64decode, b64encode, encode_header_without_mac,
                                    parse_header)

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
    with pytest.raises(HeaderError):
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


def test_stanza_arguments_take_every_vchar():
    every = bytes(range(33, 127))
    assert _parse(b"-> " + every + b" x\n\n").stanzas == [Stanza(every.decode(), ["x"], b"")]
