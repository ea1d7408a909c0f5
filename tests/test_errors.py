"""Bad input gets a clear, typed error and releases no unverified plaintext."""

import io
import random
import subprocess
import time
import traceback

import pytest

import agefast
from streams import Repeating, Trickle
from agefast import errors, passphrase
from agefast.format.grammar import Stanza, b64decode, b64encode, encode_header_without_mac, encode_mac_line

CHUNK = 64 * 1024
SEALED = CHUNK + 16
IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
DATA = random.Random(1).randbytes(3 * CHUNK + 100)
CT = agefast.encrypt(DATA, [RECIPIENT])
CHUNKS_START = len(CT) - (len(DATA) + 4 * 16)  # the header and nonce end here


def released_before_error(ct, seekable=False, step=1000):
    """Read a decryptor to its end or error; return (plaintext, error)."""
    got = bytearray()
    try:
        r = agefast.decryptor(io.BytesIO(ct) if seekable else Trickle(ct), [IDENTITY])
        while chunk := r.read(step):
            got += chunk
    except agefast.DecryptError as e:
        return bytes(got), e
    return bytes(got), None


def test_wrong_key():
    with pytest.raises(errors.NoIdentityMatchError):
        agefast.decrypt(CT, [agefast.x25519.Identity.generate()])


@pytest.mark.parametrize("seekable", [False, True])
@pytest.mark.parametrize("chunk", [0, 1, 3])
def test_corrupted_chunk_releases_only_the_verified_prefix(chunk, seekable):
    ct = bytearray(CT)
    ct[CHUNKS_START + chunk * SEALED + 5] ^= 1
    got, error = released_before_error(bytes(ct), seekable)
    assert isinstance(error, errors.PayloadError)
    # Random access authenticates the final chunk (3) before releasing anything.
    assert got == (b"" if seekable and chunk == 3 else DATA[:chunk * CHUNK])
    with pytest.raises(errors.PayloadError):
        agefast.decrypt(bytes(ct), [IDENTITY])


@pytest.mark.parametrize("cut", [1, 15, 16, 17, 100, SEALED, SEALED + 1])
def test_truncated_file(cut):
    got, error = released_before_error(CT[:-cut])
    assert isinstance(error, errors.PayloadError)
    # Streaming releases every whole chunk with bytes after it: none of them
    # can be the final chunk, so each verifies or fails as it arrives.
    assert got == DATA[:(len(CT) - cut - CHUNKS_START - 1) // SEALED * CHUNK]
    got, error = released_before_error(CT[:-cut], seekable=True)
    assert isinstance(error, errors.PayloadError) and got == b""


def test_truncated_before_payload():
    for end in (CHUNKS_START - 16, CHUNKS_START - 1):
        with pytest.raises(errors.HeaderError):
            agefast.decrypt(CT[:end], [IDENTITY])
    with pytest.raises(errors.TruncatedError, match="before the first chunk"):
        agefast.decrypt(CT[:CHUNKS_START], [IDENTITY])


# Where a file is cut (bytes kept after the payload nonce; negative: before
# its end), the error and message agefast gives, and Go age 1.1.1's message
# for the same file. Only a cut that the bytes prove is a TruncatedError: the
# rest of a chunk cut in its middle can't be told from a damaged final chunk.
CUTS = {
    "inside the header": (-40, errors.HeaderError, "the file is truncated: it ends inside the header",
                          "failed to read header"),
    "inside the nonce": (-8, errors.HeaderError, "the file is truncated: it ends before the payload nonce",
                         "failed to read nonce"),
    "right after the nonce": (0, errors.TruncatedError, "the file is truncated: it ends before the first chunk",
                              "unexpected EOF"),
    # A payload of one chunk is opened by one call in memory (Engine.open_lone); it fails as a longer one does.
    "inside the first tag": (10, errors.TruncatedError, "the file is truncated: it ends inside chunk 0",
                             "failed to decrypt and authenticate payload chunk"),
    "inside the first chunk": (100, errors.PayloadError, "failed to authenticate payload chunk 0, the last in the "
                               "file: it is damaged, or the file is truncated",
                               "failed to decrypt and authenticate payload"),
    "after the first chunk": (SEALED, errors.TruncatedError,
                              "the file is truncated: it ends after chunk 0, without a final chunk", "unexpected EOF"),
    "at a chunk boundary": (2 * SEALED, errors.TruncatedError,
                            "the file is truncated: it ends after chunk 1, without a final chunk", "unexpected EOF"),
    "inside a tag": (2 * SEALED + 10, errors.TruncatedError, "the file is truncated: it ends inside chunk 2",
                     "failed to decrypt and authenticate payload chunk"),
    "a tag into a chunk": (2 * SEALED + 16, errors.PayloadError, "the final chunk is empty", "last chunk is empty"),
    "inside a chunk": (SEALED + 100, errors.PayloadError, "failed to authenticate payload chunk 1, the last in the "
                       "file: it is damaged, or the file is truncated", "failed to decrypt and authenticate payload"),
}


@pytest.mark.parametrize("cut", CUTS)
def test_a_cut_file_fails_alike_in_every_route(tmp_path, cut):
    kept, error, message, _ = CUTS[cut]
    ct = CT[:CHUNKS_START + kept]
    (tmp_path / "cut.age").write_bytes(ct)

    def to_file():
        with open(tmp_path / "cut.age", "rb") as src, open(tmp_path / "out", "wb") as dst:
            agefast.decrypt_io(src, dst, [IDENTITY])

    routes = {
        "decrypt": lambda: agefast.decrypt(ct, [IDENTITY]),
        "stream": lambda: agefast.decryptor(Trickle(ct), [IDENTITY]).read(),
        "random access": lambda: agefast.decryptor(io.BytesIO(ct), [IDENTITY]).pread(0, 1),
        "file to file": to_file,
    }
    for route, decrypt in routes.items():
        with pytest.raises(errors.DecryptError) as failed:
            decrypt()
        assert (type(failed.value), str(failed.value)) == (error, message), route


@pytest.mark.parametrize("extra", [5, 16])
def test_a_few_bytes_after_a_whole_final_chunk_are_trailing_data_not_a_cut(extra):
    # Too few to be a chunk of their own: only the chunk before them, final,
    # says they are not the rest of a cut one; random access opens it too.
    ct = agefast.encrypt(DATA[:2 * CHUNK], [RECIPIENT]) + bytes(extra)
    for reader in (Trickle(ct), io.BytesIO(ct)):
        with pytest.raises(errors.PayloadError, match="^trailing data after the final chunk$"):
            agefast.decryptor(reader, [IDENTITY]).read()
    with pytest.raises(errors.TruncatedError, match="ends after chunk 0, without a final chunk"):
        agefast.decryptor(io.BytesIO(ct[:-extra - SEALED]), [IDENTITY])


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("cut", CUTS)
def test_a_cut_file_fails_where_go_age_does(tmp_path, capsys, cut):
    from agefast.cli import age

    kept, error, message, go_message = CUTS[cut]
    (tmp_path / "key.txt").write_text(f"{IDENTITY}\n")
    (tmp_path / "cut.age").write_bytes(CT[:CHUNKS_START + kept])
    go = subprocess.run(["age", "-d", "-i", tmp_path / "key.txt", tmp_path / "cut.age"], capture_output=True)
    assert go.returncode == 1 and go_message in go.stderr.decode()
    assert age.main(["-d", "-i", str(tmp_path / "key.txt"), "-o", str(tmp_path / "out"),
                     str(tmp_path / "cut.age")]) == 1
    part = "header" if error is errors.HeaderError else "payload"
    assert capsys.readouterr().err == f"agefast: error: invalid {part}: {message}\n"
    # What Go age wrote before failing is what agefast releases as a stream.
    assert go.stdout == released_before_error(CT[:CHUNKS_START + kept])[0]


@pytest.mark.parametrize("extra", [b"\x00", b"x" * 100, bytes(SEALED)])
def test_trailing_data(extra):
    got, error = released_before_error(CT + extra)
    assert isinstance(error, errors.PayloadError)
    got, error = released_before_error(CT + extra, seekable=True)
    assert isinstance(error, errors.PayloadError) and got == b""
    with pytest.raises(errors.PayloadError):
        agefast.decrypt(CT + extra, [IDENTITY])


@pytest.mark.parametrize("seekable", [False, True])
def test_failed_reader_keeps_failing(seekable):
    ct = bytearray(CT)
    ct[CHUNKS_START + SEALED + 1] ^= 1
    r = agefast.decryptor(io.BytesIO(bytes(ct)) if seekable else Trickle(bytes(ct)), [IDENTITY])
    assert r.read(CHUNK) == DATA[:CHUNK]
    with pytest.raises(errors.PayloadError) as info:
        r.read()
    for _ in range(3):
        with pytest.raises(errors.PayloadError) as again:
            r.read(10)
        assert again.value is info.value
    if seekable:    # a damaged chunk fails the reads that reach it, and no other
        r.seek(0)
        assert r.read(10) == DATA[:10]
        r.seek(CHUNK)
        with pytest.raises(errors.PayloadError):
            r.read(10)


@pytest.mark.parametrize("mangle", [
    lambda a: a.replace(b"-----BEGIN AGE ENCRYPTED FILE-----", b"-----BEGIN AGE ENCRYPTED FILE----- "),
    lambda a: a.replace(b"\n", b"\n\n", 2),
    lambda a: a + b"junk\n",
    lambda a: a[:100] + b"*" + a[101:],
    lambda a: a.rstrip(b"\n")[:-40],
])
def test_bad_armor(mangle):
    armored = agefast.encrypt(DATA[:1000], [RECIPIENT], armored=True)
    with pytest.raises(errors.ArmorError):
        agefast.decrypt(mangle(armored), [IDENTITY])


def test_unknown_stanza_is_ignored_but_alone_matches_nothing():
    header = encode_header_without_mac([Stanza("example.com/enigma", ["x"], b"body")])
    ct = header + encode_mac_line(bytes(32)) + bytes(16)
    with pytest.raises(errors.NoIdentityMatchError):
        agefast.decrypt(ct, [IDENTITY])


def test_oversized_header_line():
    ct = b"age-encryption.org/v1\n-> X25519 " + b"A" * (1 << 20) + b"\n"
    with pytest.raises(errors.HeaderError, match="too long"):
        agefast.decrypt(ct, [IDENTITY])


def test_not_an_age_file():
    for junk in (b"", b"hello world\n", b"age-encryption.org/v2\n"):
        with pytest.raises(errors.HeaderError):
            agefast.decrypt(junk, [IDENTITY])


def test_header_mac_mismatch():
    ct = bytearray(CT)
    mac_line = ct.index(b"\n--- ") + 5
    ct[mac_line] = ord("A") if ct[mac_line] != ord("A") else ord("B")
    with pytest.raises(errors.HeaderMACError):
        agefast.decrypt(bytes(ct), [IDENTITY])


def test_scrypt_work_factor_cap():
    ct = agefast.encrypt(b"secret", [passphrase.Recipient("pw", work_factor=12)])
    assert agefast.decrypt(ct, [passphrase.Identity("pw", max_work_factor=12)]) == b"secret"
    with pytest.raises(errors.HeaderError, match="work factor 12 is above the limit of 11"):
        agefast.decrypt(ct, [passphrase.Identity("pw", max_work_factor=11)])
    with pytest.raises(errors.NoIdentityMatchError):
        agefast.decrypt(ct, [passphrase.Identity("wrong", max_work_factor=12)])


@pytest.mark.parametrize("work_factor", ["123", "9" * 5000], ids=["3 digits", "5000 digits"])
def test_a_work_factor_of_many_digits_is_above_the_limit(work_factor):
    # int() of more than 4,300 digits had raised a bare ValueError past DecryptError.
    ct = agefast.encrypt(b"secret", [passphrase.Recipient("pw", work_factor=2)])
    forged = ct.replace(b" 2\n", f" {work_factor}\n".encode(), 1)
    with pytest.raises(errors.HeaderError, match=f"work factor {work_factor[:8]} is above the limit of 22"):
        agefast.decrypt(forged, [passphrase.Identity("pw")])


def test_scrypt_cannot_be_mixed():
    with pytest.raises(agefast.EncryptError):
        agefast.encrypt(b"x", [passphrase.Recipient("pw", work_factor=2), RECIPIENT])
    with pytest.raises(agefast.EncryptError):
        agefast.encrypt(b"x", [passphrase.Recipient("a", work_factor=2), passphrase.Recipient("b", work_factor=2)])


def test_post_quantum_cannot_be_mixed_with_classical():
    pq = agefast.pq.Identity.generate()
    with pytest.raises(agefast.EncryptError):
        agefast.encrypt(b"x", [pq.to_public(), RECIPIENT])
    ct = agefast.encrypt(b"x", [pq.to_public(), agefast.pq.Identity.generate().to_public()])
    assert agefast.decrypt(ct, [pq]) == b"x"


def test_a_file_key_of_the_wrong_size_from_an_identity_is_a_header_failure():
    # As a plugin's identity may return one: a header failure of its own, not a MAC that does not match.
    class Short:
        def unwrap(self, stanzas):
            return bytes(15)

    with pytest.raises(errors.HeaderError, match="unwrapped file key has the wrong length"):
        agefast.decrypt(agefast.encrypt(b"x", [RECIPIENT]), [Short()])


def test_no_recipients():
    with pytest.raises(agefast.EncryptError):
        agefast.encrypt(b"x", [])


@pytest.mark.parametrize("text,error", [
    ("age1qqqq", agefast.RecipientError),
    ("AGE-SECRET-KEY-1QQQQ", agefast.IdentityError),
    ("ssh-nonsense AAAA", agefast.RecipientError),
])
def test_malformed_keys(text, error):
    parse = agefast.parse_recipients if error is agefast.RecipientError else agefast.parse_identities
    with pytest.raises(error, match="line 1"):
        parse(text)


def test_a_key_in_the_other_kind_of_file_is_named_as_age_1_3_names_it():
    identity = agefast.pq.Identity.generate()
    with pytest.raises(agefast.RecipientError) as e:
        agefast.parse_recipients(f"{RECIPIENT}\n{identity}\n")
    assert str(e.value) == "malformed recipient on line 2: apparent identity found in recipients file"
    with pytest.raises(agefast.IdentityError) as e:
        agefast.parse_identities(f"# key\n{identity.to_public()}\n")
    assert str(e.value) == "malformed identity on line 2: apparent recipient found in identities file"


@pytest.mark.parametrize("parse", [agefast.parse_identities, agefast.parse_recipients])
def test_key_file_text_is_a_str(parse):
    # bytes had met str.split's "a bytes-like object is required, not 'str'", which says the reverse.
    with pytest.raises(TypeError, match="argument 'text': expected a str, not bytes"):
        parse(str(RECIPIENT).encode())


@pytest.mark.parametrize("brk", ["\r", "\x0b", "\x0c", "\x1c", "\x1e", "\x85", "\u2028", "\u2029"])
def test_a_key_after_a_line_break_inside_a_comment_is_part_of_the_comment(brk):
    # As Go age scans key files (bufio.ScanLines): lines end at "\n" alone. str.splitlines() had made the key
    # after the break a recipient too, one that age and a reader of the file do not see.
    hidden = agefast.x25519.Identity.generate()
    text = f"{RECIPIENT}\n# owner: alice{brk}{hidden.to_public()}\n"
    assert agefast.parse_recipients(text) == [RECIPIENT]
    with pytest.raises(agefast.IdentityError, match="no identities found"):
        agefast.parse_identities(f"# note{brk}{hidden}\n")


@pytest.mark.parametrize("line", [" {key}", "{key} ", "\t{key}", " # {key}"])
def test_a_key_line_is_taken_as_it_is(line):
    # Go age neither trims a key line nor takes "#" after spaces for a comment: each is malformed.
    identity = agefast.x25519.Identity.generate()
    with pytest.raises(agefast.RecipientError, match="line 2"):
        agefast.parse_recipients(f"{RECIPIENT}\n" + line.format(key=identity.to_public()))
    with pytest.raises(agefast.IdentityError, match="line 1"):
        agefast.parse_identities(line.format(key=identity) + "\r\n")


def test_crlf_key_files_parse():
    identity = agefast.x25519.Identity.generate()
    assert agefast.parse_recipients(f"# comment\r\n{RECIPIENT}\r\n\r\n") == [RECIPIENT]
    assert agefast.parse_identities(f"{identity}\r\n") == [identity]


@pytest.mark.parametrize("share", [bytes(32), b"\x01" + bytes(31)])
def test_post_quantum_low_order_share_is_a_header_failure(share):
    identity = agefast.pq.Identity.generate()
    ct = agefast.encrypt(b"x", [identity.to_public()])
    head, _, rest = ct.partition(b"\n-> mlkem768x25519 ")
    arg, _, body = rest.partition(b"\n")
    enc = b64decode(arg.decode())
    forged = head + b"\n-> mlkem768x25519 " + b64encode(enc[:-32] + share).encode() + b"\n" + body
    with pytest.raises(errors.HeaderError, match="low-order"):
        agefast.decrypt(forged, [identity])


def test_no_identity_match_lists_the_stanza_types():
    # As age 1.3's TestNoIdentityMatchErrorStanzaTypes: one per stanza, in order.
    class Other:
        def wrap(self, file_key):
            return [Stanza("other", ["x"], bytes(32))]

    ct = agefast.encrypt(b"x", [RECIPIENT, Other(), agefast.x25519.Identity.generate().to_public()])
    with pytest.raises(errors.NoIdentityMatchError) as info:
        agefast.decrypt(ct, [agefast.x25519.Identity.generate()])
    assert info.value.stanza_types == ["X25519", "other", "X25519"]
    assert str(info.value).endswith("(the file's stanzas: X25519, other)")


@pytest.mark.parametrize("stanzas", [
    [Stanza("x", ["a\nb"], bytes(32))], [Stanza("", [], bytes(32))], [Stanza("x", [""], bytes(32))],
    [Stanza("x", ["a b"], bytes(32))], [Stanza("x", ["é"], bytes(32))], [Stanza("x", [b"bytes"], bytes(32))], [],
], ids=["newline", "no-type", "empty-argument", "space", "not-ascii", "bytes-argument", "none"])
def test_a_recipient_of_the_callers_that_makes_a_malformed_stanza_is_an_encrypt_error(stanzas):
    # Any object with wrap() is a recipient. Stanzas that age's grammar refuses (or none) had made a file that
    # agefast and age then refused to read (or a TypeError).
    class Made:
        def wrap(self, file_key):
            return stanzas

    with pytest.raises(errors.EncryptError, match="stanza"):
        agefast.encrypt(b"x", [Made()])


def test_a_recipient_of_the_callers_that_makes_an_scrypt_stanza_beside_others_is_an_encrypt_error():
    # A plugin's (or any recipient's) scrypt stanza beside another had been written: a file age refuses.
    class Scrypt:
        def wrap(self, file_key):
            return [Stanza("scrypt", [b64encode(bytes(16)), "10"], bytes(32))]

    with pytest.raises(errors.EncryptError, match="an scrypt stanza must be the only one"):
        agefast.encrypt(b"x", [RECIPIENT, Scrypt()])


def test_no_identity_match_names_few_stanza_types_and_cuts_them_short():
    stanzas = [Stanza(f"type{i}-" + "x" * 100, [], b"") for i in range(20)]
    ct = encode_header_without_mac(stanzas) + encode_mac_line(bytes(32)) + bytes(16)
    with pytest.raises(errors.NoIdentityMatchError) as info:
        agefast.decrypt(ct, [IDENTITY])
    assert len(info.value.stanza_types) == 20
    assert len(str(info.value)) < 500 and str(info.value).endswith(", ...)")


ARMORED = agefast.encrypt(DATA[:1000], [RECIPIENT], armored=True)


@pytest.mark.parametrize("decrypt", [
    lambda ct, **kw: agefast.decrypt(ct, [IDENTITY], **kw),
    lambda ct, **kw: agefast.decryptor(io.BytesIO(ct), [IDENTITY], **kw).read(),
    lambda ct, **kw: agefast.decryptor(Trickle(ct, 7), [IDENTITY], **kw).read(),
    lambda ct, **kw: bytes((buf := bytearray(len(DATA)))[:agefast.decrypt_into(ct, [IDENTITY], buf, **kw)]),
], ids=["decrypt", "decryptor", "decryptor unseekable", "decrypt_into"])
def test_armored_says_what_the_file_must_be(decrypt):
    garbage = b"garbage\n" + ARMORED  # as the C2SP vector armor_garbage_leading
    with pytest.raises(errors.ArmorError):
        decrypt(garbage, armored=True)  # Go's armor reader refuses it too
    with pytest.raises(errors.HeaderError):
        decrypt(garbage)  # not armor by its first bytes, so a binary file, and a bad one
    with pytest.raises(errors.ArmorError):
        decrypt(CT, armored=True)
    with pytest.raises(errors.HeaderError):
        decrypt(ARMORED, armored=False)
    assert decrypt(b" \r\n\t\n" + ARMORED, armored=True) == DATA[:1000]    # whole lines of whitespace, as age
    with pytest.raises(errors.ArmorError, match="bad BEGIN line"):
        decrypt(b" \r\n\t" + ARMORED, armored=True)                       # age 1.3: "invalid first line"
    assert decrypt(CT, armored=False) == DATA
    with pytest.raises(TypeError):
        decrypt(ARMORED, armored="yes")


def test_armored_io_and_file(tmp_path):
    out = io.BytesIO()
    agefast.decrypt_io(io.BytesIO(ARMORED), out, [IDENTITY], armored=True)
    assert out.getvalue() == DATA[:1000]
    src = tmp_path / "in.age"
    src.write_bytes(b"garbage\n" + ARMORED)
    with pytest.raises(errors.ArmorError):
        agefast.decrypt_file(src, tmp_path / "out", [IDENTITY], armored=True)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("byte", [b"\n", b" "])
@pytest.mark.parametrize("armored, error", [(None, errors.HeaderError), (False, errors.HeaderError),
                                            (True, errors.ArmorError)])
def test_leading_whitespace_is_bounded(byte, armored, error):
    """64 MiB of whitespace fails after reading a few kilobytes of it, as age
    does: only armor may start with whitespace, at most 1024 bytes of it."""
    src = Repeating(byte, 64 << 20)
    with pytest.raises(error, match="whitespace|bad version line"):
        agefast.decryptor(src, [IDENTITY], armored=armored)
    assert src.served <= 8192


def test_armored_decryptor_over_64_mib_of_newlines_fails_fast(tmp_path):
    path = tmp_path / "newlines"
    path.write_bytes(b"\n" * (64 << 20))
    start = time.monotonic()
    with open(path, "rb") as f, pytest.raises(errors.ArmorError, match="more than 1024 bytes of whitespace"):
        agefast.decryptor(f, [IDENTITY], armored=True)
    assert time.monotonic() - start < 2


def test_whitespace_before_armor_up_to_the_limit():
    armored = agefast.encrypt(DATA[:1000], [RECIPIENT], armored=True)
    assert agefast.decrypt(b"\r\n" * 512 + armored + b"\n" * 1023, [IDENTITY]) == DATA[:1000]
    with pytest.raises(errors.HeaderError, match="starts with whitespace"):
        agefast.decrypt(b"\n" * 1025 + armored, [IDENTITY])
    with pytest.raises(errors.ArmorError, match="whitespace after the END line"):
        agefast.decrypt(armored + b"\n" * 1024, [IDENTITY])


class _FailingSource(io.RawIOBase):
    """A reader whose every read fails, as a source that went away."""

    def readable(self):
        return True

    def readinto(self, b):
        raise OSError("the source went away")


def _damaged(ct: bytes) -> bytes:
    damaged = bytearray(ct)
    damaged[CHUNKS_START + SEALED + 5] ^= 1     # chunk 1
    return bytes(damaged)


def _bad_armor() -> bytes:
    lines = agefast.encrypt(DATA, [RECIPIENT], armored=True).split(b"\n")
    lines[2000] = b"!" * len(lines[2000])     # in the payload, past what the header reads
    return b"\n".join(lines)


FAILED_READERS = {
    "stream": (lambda: agefast.decryptor(Trickle(_damaged(CT)), [IDENTITY]), errors.PayloadError),
    "seekable": (lambda: agefast.decryptor(io.BytesIO(_damaged(CT)), [IDENTITY]), errors.PayloadError),
    "armor": (lambda: agefast.decryptor(Trickle(_bad_armor()), [IDENTITY], armored=True), errors.ArmorError),
    "encrypting": (lambda: agefast.encrypting_reader(_FailingSource(), [RECIPIENT]), OSError),
}


@pytest.mark.parametrize("name", FAILED_READERS)
def test_a_failed_reader_fails_again_with_a_traceback_of_its_own(name):
    # Each read after a failure raises the stored error again. Raised as it
    # was, its traceback grew by the frames of every failed read, and kept
    # them: 2000 failed reads of a stream held 132 MB.
    make, error = FAILED_READERS[name]
    reader = make()
    lengths = []
    for _ in range(5):
        with pytest.raises(error) as failed:
            while reader.read(CHUNK):
                pass
        lengths.append(len(list(traceback.walk_tb(failed.value.__traceback__))))
    assert lengths[1:] == [lengths[1]] * 4


@pytest.mark.parametrize("text, quoted", [
    # as Go age 1.1.1 prints each (strconv.Quote)
    ("a\u0085\a\u2028", r'"a\u0085\a\u2028"'),
    (b"a\x85", r'"a\x85"'),                      # a byte that is not UTF-8, not U+0085
    ("caf\udce9", r'"caf\xe9"'),                 # the same, as os.fsdecode leaves it
    ('say "hi"\\\x7f\U0001f600\U000e0001', r'"say \"hi\"\\\x7f😀\U000e0001"'),
])
def test_names_are_quoted_as_go_quotes_them(text, quoted):
    assert errors.go_quote(text) == quoted

