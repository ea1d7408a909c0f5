"""The block armor codec against the line-by-line one it replaced.

agefast.format.armor decodes runs of full lines as whole blocks and takes everything
else line by line; tests/armor_naive.py is the old codec that took every line
by the exact rules. Both read the same texts through the same read steps here,
valid and broken ones, with blocks of a few lines so that every edge case
lands on a block edge: each read must return the same bytes or raise the same
error. The encoder must write what the old one wrote for any write steps.
"""

import base64
import io
import random

import pytest
from hypothesis import given, settings, strategies as st

import armor_naive
from agefast.format import armor
from agefast.io.source import Source
from agefast.errors import ArmorError
from streams import Repeating, Trickle


def armored(data: bytes) -> bytes:
    out = io.BytesIO()
    w = armor_naive.ArmorWriter(out)
    w.write(data)
    w.close()
    return out.getvalue()


def reads(reader_class, text: bytes, step: int, sizes: list[int]) -> list:
    """What each read returns (bytes, or the error's type and message) until
    the reader is empty or has failed twice."""
    reader = reader_class(Source(Trickle(text, step)))
    results = []
    failures = 0
    for size in sizes * 1000:
        buf = bytearray(size)
        try:
            n = reader.readinto(buf)
        except ArmorError as e:
            results.append(("error", str(e)))
            failures += 1
            if failures == 2:  # a failed reader keeps failing
                break
            continue
        results.append(bytes(buf[:n]))
        if n == 0:
            break
    return results


def same_reads(text: bytes, step: int, sizes: list[int]) -> None:
    assert reads(armor.ArmorReader, text, step, sizes) == reads(armor_naive.ArmorReader, text, step, sizes)


@pytest.fixture(autouse=True, params=[1, 2, 5, armor.BLOCK_LINES])
def block_lines(request, monkeypatch):
    monkeypatch.setattr(armor, "BLOCK_LINES", request.param)


# Bytes whose place in the text decides the outcome.
SPECIAL = [b"\n", b"\r", b"\r\n", b" ", b"\t", b"\v", b"=", b"==", b"A", b"/", b"*", b"-", b"\x00", b""]


@st.composite
def texts(draw):
    data = draw(st.binary(max_size=2000))
    text = armored(data)
    if draw(st.booleans()):
        # CRLF line endings, on every line or on some.
        lines = text.split(b"\n")
        every = draw(st.booleans())
        text = b"\n".join(line + b"\r" if every or draw(st.booleans()) else line for line in lines[:-1]) + b"\n"
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 2))
        text = text[:at] + draw(st.sampled_from(SPECIAL)) + text[at + cut:]
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    return text


@settings(max_examples=400, deadline=None)
@given(texts(), st.sampled_from([1, 7, 64, 65, 66, 1000, 1 << 20]),
       st.lists(st.sampled_from([1, 47, 48, 49, 96, 100, 1000, 4096, 1 << 20]), min_size=1, max_size=4))
def test_reads_match_the_line_by_line_codec(text, step, sizes):
    same_reads(text, step, sizes)


LINE = armored(bytes(range(48)))[len(armor.BEGIN) + 1:][:65]  # one full line with its LF


def body(lines: int, eol: bytes = b"\n") -> bytes:
    return LINE[:64].__add__(eol) * lines


@pytest.mark.parametrize("text", [
    # A padded full line last, then END, or then more lines.
    armored(bytes(48 * 5 + 47)),
    armored(bytes(48 * 5 + 46)),
    armored(bytes(48 * 5 + 47)).replace(b"-----END", LINE + b"-----END"),
    # A run of full lines, then one of each flaw.
    *[armor.BEGIN + b"\n" + body(9) + flaw + body(3) + armor.END + b"\n"
      for flaw in [b"", b"\n", LINE[:63] + b"\n", LINE[:64] + b"A\n", LINE[:64] + b" \n", LINE[:63] + b"=\n",
                   LINE[:62] + b"==\n", (LINE[:62] + b"==\n") * 2, LINE[:63] + b"=\n" + LINE[:62] + b"==\n", LINE[:30] + b"*" + LINE[31:], LINE[:30] + b"\n" + LINE[30:],
                   LINE[:64] + b"\r\n", LINE[:64] + b"\r\r\n", LINE[:64] + b"\r", armor.END + b"\n"]],
    # CRLF throughout, and mixed.
    armor.BEGIN + b"\r\n" + body(20, b"\r\n") + LINE[:8] + b"\r\n" + armor.END + b"\r\n",
    armor.BEGIN + b"\n" + (body(1) + body(1, b"\r\n")) * 10 + armor.END + b"\n",
    # END where a full line's end would be, and trailing text after END.
    armor.BEGIN + b"\n" + body(4) + armor.END + b" " * 31 + b"\n" + body(2),
    armor.BEGIN + b"\n" + body(4) + armor.END + b"\n" + b" \n" * 100,
    armor.BEGIN + b"\n" + body(4) + armor.END,
    armor.BEGIN + b"\n" + body(4) + armor.END + b"\r",
    armor.BEGIN + b"\n" + body(4),
])
@pytest.mark.parametrize("step", [1, 65, 1 << 20])
@pytest.mark.parametrize("size", [48, 100, 48 * 7, 1 << 20])
def test_block_edges(text, step, size):
    same_reads(text, step, [size])


@pytest.mark.parametrize("text", [
    # Whitespace around the PEM block, up to the limit and past it.
    *[ws + armor.BEGIN + b"\n" + body(2) + armor.END + b"\n" for ws in [
        b"\n" * 1024, b"\n" * 1025, b" " * 1024, b" " * 1025, b"\r\n" * 512, b"\r\n" * 513, b" \t\v\f\r\n" * 170,
        b"\n" * 1020 + b"   ", b"\n" * 1020 + b"     ", b"\n" * 1020 + b"\n\n\n\n" + b" \n"]],
    *[armor.BEGIN + b"\n" + body(2) + armor.END + ws for ws in [
        b"\n" * 1024, b"\n" * 1025, b"\n" * 1023 + b"x", b"\n" * 1024 + b"x", b"\r\n" * 511 + b"\n", b"\r\n" * 512]],
    b"\n" * 1024, b"\n" * 1025,
    # Whitespace on the BEGIN line itself (age 1.3 skips only whole lines of it).
    b" " + armor.BEGIN + b"\n" + body(2) + armor.END + b"\n",
    b"\n\n \t" + armor.BEGIN + b"\n" + body(2) + armor.END + b"\n",
])
@pytest.mark.parametrize("step", [1, 1 << 20])
def test_whitespace_edges(text, step):
    same_reads(text, step, [100])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(1, 700), min_size=1, max_size=8))
def test_writes_match_the_line_by_line_codec(data, steps):
    out = io.BytesIO()
    w = armor.ArmorWriter(out)
    pos = 0
    for step in steps * (len(data) + 1):
        if pos >= len(data):
            break
        w.write(data[pos:pos + step])
        pos += step
    w.close()
    assert out.getvalue() == armored(data)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3000))
def test_the_line_layout_ends_every_line_in_a_newline(lines):
    data = random.Random(lines).randbytes(lines)
    text = base64.b64encode(data)
    expected = b"".join(text[i:i + 64] + b"\n" for i in range(0, len(text), 64))
    assert armor._encode_lines(data) == expected


def test_large_round_trip():
    data = bytes(range(256)) * (3 * armor.BLOCK_LINES) + b"tail"
    out = io.BytesIO()
    w = armor.ArmorWriter(out)
    w.write(data)
    w.close()
    assert out.getvalue() == armored(data)
    reader = armor.ArmorReader(Source(io.BytesIO(out.getvalue())))
    got = bytearray(len(data) + 10)
    assert reader.readinto(got) == len(data)
    assert got[:len(data)] == data


@pytest.mark.parametrize("byte", [b"\n", b" ", b"\r", b"\t"])
def test_leading_whitespace_is_read_only_to_the_limit(byte):
    """A stream of whitespace is refused after a few kilobytes, not read to its end."""
    endless = Repeating(byte)
    source = Source(endless)
    assert not armor.starts_armored(source)
    with pytest.raises(ArmorError, match="more than 1024 bytes of whitespace before the BEGIN line"):
        armor.ArmorReader(source).readinto(bytearray(100))
    assert endless.served <= 8192


def test_trailing_whitespace_is_read_only_to_the_limit():
    endless = Repeating(b"\n", prefix=armored(b"data"))
    reader = armor.ArmorReader(Source(endless))
    with pytest.raises(ArmorError, match="1024 bytes or more of whitespace after the END line"):
        reader.readinto(bytearray(100))
    assert endless.served <= 8192


@pytest.mark.parametrize("before, after", [
    (b"\n" * 1024, b"\n" * 1023),
    (b" \t\v\f\r\n" * 170 + b"   \n", b"\r\n" * 511 + b"\n"),
    (b"\r\n" * 512, b""),
    # What Unicode calls spaces, in UTF-8, as age's bytes.TrimSpace takes them: a no-break space copied from a
    # web page had been "data after the END line".
    ("\xa0\u3000 \u2028\n\x85\n".encode(), "\n\xa0\n\u205f".encode()),
])
def test_whitespace_within_the_limits_is_accepted(before, after):
    data = bytes(range(256)) * 3
    text = before + armored(data) + after
    assert armor.starts_armored(Source(io.BytesIO(text)))
    reader = armor.ArmorReader(Source(io.BytesIO(text)))
    out = bytearray(len(data) + 1)
    assert reader.readinto(out) == len(data)
    assert out[:len(data)] == data


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("route", ["decrypt_io", "decryptor"])
def test_a_flaw_in_the_armor_releases_every_chunk_age_opens_before_it(route, threads):
    # As age's readers: every chunk read whole with a byte after it, before the line that fails. A read that
    # failed had taken the batch it fell in with it (decrypt_io released 1 chunk of the 21 here).
    import agefast
    from agefast.payload.rules import SEALED_CHUNK_SIZE

    identity = agefast.x25519.Identity.generate()
    data = random.Random(7).randbytes(1_500_000)
    binary = agefast.encrypt(data, [identity.to_public()])
    armored = bytearray(agefast.encrypt(data, [identity.to_public()], armored=True))
    flawed = armored.index(b"\n", 1_900_000)
    armored[flawed:flawed] = b" "
    lines_before = armored[:flawed].count(b"\n") - 1     # whole body lines before the flawed one (not BEGIN)
    payload_at = binary.index(b"\n", binary.index(b"\n---") + 1) + 1 + 16    # after the header and the nonce
    chunks = (lines_before * armor.BYTES_PER_LINE - payload_at - 1) // SEALED_CHUNK_SIZE
    out = io.BytesIO()
    with pytest.raises(ArmorError, match="line longer than 64 columns"):
        if route == "decrypt_io":
            agefast.decrypt_io(io.BytesIO(armored), out, [identity], threads=threads)
        else:
            with agefast.decryptor(io.BytesIO(armored), [identity], threads=threads) as reader:
                while piece := reader.read(100_000):
                    out.write(piece)
    assert chunks == 21 and out.getvalue() == data[:chunks * 65536]


@pytest.mark.parametrize("text, accepted", [
    (b" " + armor.BEGIN + b"\n" + body(1) + armor.END + b"\n", False),
    (b"\n \n\r\n" + armor.BEGIN + b"\n" + body(1) + armor.END + b"\n", True),
    (armor.BEGIN + b"\n" + body(1) + armor.END + b"\r", True),
    ("\xa0".encode() + armor.BEGIN + b"\n" + body(1) + armor.END + b"\n", False),
    (b"\xa0\n" + armor.BEGIN + b"\n" + body(1) + armor.END + b"\n", False),   # not UTF-8: no space, no armor
])
def test_the_lines_around_the_body_as_age_reads_them(text, accepted):
    # age 1.3's armor.Reader: whitespace lines skipped whole, the first other line exactly BEGIN; a line loses
    # its "\n", then its "\r", so an END line may end the file in "\r".
    reader = armor.ArmorReader(Source(io.BytesIO(text)))
    buf = bytearray(100)
    if accepted:
        assert buf[:reader.readinto(buf)] == bytes(range(48))
    else:
        with pytest.raises(ArmorError, match="bad BEGIN line"):
            reader.readinto(buf)


def test_armor_as_a_writer_makes_it_is_decoded_whole_and_nothing_else_is():
    # decrypt() of a small armored file took 1 ms, then 194 us through the reader; pyrage takes 116.
    import agefast

    identity = agefast.x25519.Identity.generate()
    for size in (0, 1, 47, 48, 1000, 3 * 65536):
        data = random.Random(size).randbytes(size)
        binary = agefast.encrypt(data, [identity.to_public()])
        text = agefast.encrypt(data, [identity.to_public()], armored=True)
        assert agefast.decrypt(armor.decode_whole(text), [identity]) == data
        assert armor.decode_whole(armored(binary)) == binary      # as the line-by-line writer makes it
    text = agefast.encrypt(b"x" * 100, [identity.to_public()], armored=True)
    lines = text.split(b"\n")
    for other in (text.replace(b"\n", b"\r\n"), b"\n" + text, text + b"\n", text[:-1],
                  b"\n".join(lines[:1] + [lines[1][:32], lines[1][32:]] + lines[2:]),       # a short middle line
                  # as many lines, but of 63 and 65 columns
                  b"\n".join(lines[:1] + [lines[1][:-1], lines[1][-1:] + lines[2]] + lines[3:]),
                  text.replace(lines[1] + b"\n", lines[1] + b" \n")):
        assert armor.decode_whole(other) is None        # read by ArmorReader, which tells what is wrong


@settings(max_examples=400, deadline=None)
@given(texts())
def test_armor_decoded_whole_is_what_the_line_by_line_codec_reads_or_none(text):
    # decode_whole takes only what a writer makes, a block of lines at a time, straight into a result of the
    # size such armor holds: whatever it takes, the exact rules read the same bytes from it.
    decoded = armor.decode_whole(text)
    if decoded is not None:
        assert armored(decoded) == text
        assert reads(armor_naive.ArmorReader, text, 1 << 20, [len(decoded) + 1]) == [decoded, b""][:1 + bool(decoded)]


@pytest.mark.parametrize("flaw", [LINE[:63] + b"=\n", LINE[:62] + b"==\n", LINE[:64] + b"\r\n", LINE[:63] + b"\n"])
@pytest.mark.parametrize("at", [0, 1, 4, 5, 9])
def test_a_flaw_in_any_block_leaves_armor_to_the_reader(flaw, at):
    # A padded, CRLF or short line anywhere but last, whichever block it falls in (blocks of 1, 2, 5 and
    # BLOCK_LINES lines), is not as a writer makes armor, even where the result's size would come out right.
    text = armor.BEGIN + b"\n" + body(at) + flaw + body(9 - at) + LINE[:8] + b"\n" + armor.END + b"\n"
    assert armor.decode_whole(text) is None
    assert armor.decode_whole(text.replace(flaw, LINE)) is not None


@pytest.mark.parametrize("size", [0, 1, 2, 3, 47, 48, 49, 95, 96, 5 * 48 - 1, 5 * 48, 48 * 1024 + 1, 3 * 65536 + 100])
def test_armor_made_whole_is_what_the_line_by_line_writer_makes(size):
    data = random.Random(size).randbytes(size)
    assert armor.encode_whole(data) == armored(data)
    assert armor.encoded_size(size) == len(armored(data))


def test_encrypt_makes_armor_whole_up_to_its_limit_and_streams_past_it(monkeypatch):
    # Both ways make the armor a writer makes of a binary age file, which opens to the plaintext.
    import agefast

    identity = agefast.x25519.Identity.generate()
    data = random.Random(0).randbytes(3 * 65536 + 100)
    made_whole = []
    encode_whole = armor.encode_whole
    monkeypatch.setattr(armor, "encode_whole", lambda binary: made_whole.append(len(binary)) or encode_whole(binary))
    whole = agefast.encrypt(data, [identity.to_public()], armored=True)
    monkeypatch.setattr(armor, "WHOLE_MAX", armor.encoded_size(len(data)))
    streamed = agefast.encrypt(data, [identity.to_public()], armored=True)
    assert made_whole == [len(armor.decode_whole(whole))]
    for text in (whole, streamed):
        binary = armor.decode_whole(text)
        assert binary is not None and armored(binary) == text and len(text) == len(whole)
        assert agefast.decrypt(text, [identity]) == data


def test_an_armored_file_opens_with_identities_given_once():
    # A generator was spent on the binary header check before the armored file's reader used it.
    import agefast

    identity = agefast.x25519.Identity.generate()
    sealed = agefast.encrypt(b"armored", [identity.to_public()], armored=True)
    assert agefast.decrypt(sealed, (i for i in [identity])) == b"armored"
    assert agefast.decrypt(b"\r\n" + sealed, (i for i in [identity])) == b"armored"     # through the reader
    buf = bytearray(10)
    assert buf[:agefast.decrypt_into(sealed, (i for i in [identity]), buf)] == b"armored"
