"""The C2SP/CCTV age test vectors, each decrypted through `decryptor`.

The vectors are not part of this repository: AGEFAST_CCTV names the folder
holding them (age/testdata of github.com/C2SP/CCTV), by
default shared/vectors/cctv-age beside the checkout. Without them the module
is skipped, with the reason, or fails under AGEFAST_REQUIRE_TOOLS=1.

Every vector file is its own case: the outcome must be the
expected one, by exception class, and the SHA-256 of all plaintext released
before any error must match the vector's `payload`.

The vectors' `payload` hashes describe streaming decryption, so that is what
test_vector checks, through a source that cannot seek. A seekable source gets
random access, which authenticates the final chunk before releasing anything:
test_vector_seekable checks the same outcomes, and that a failure releases
at most a prefix of what streaming releases.
"""

import hashlib
import io
import os
import pathlib
import zlib

import pytest

import agefast
from agefast import errors, passphrase
from agefast.keys import parse_identity
from required import unavailable
from streams import Trickle

VECTORS = pathlib.Path(os.environ.get("AGEFAST_CCTV")
                       or pathlib.Path(__file__).resolve().parents[2] / "shared" / "vectors" / "cctv-age")
if not VECTORS.is_dir():
    unavailable(f"the C2SP/CCTV age vectors are not at {VECTORS} (set AGEFAST_CCTV)")
FILES = sorted(p for p in VECTORS.iterdir() if p.name != "README.md")

OUTCOMES = {
    "success": None,
    "no match": errors.NoIdentityMatchError,
    "HMAC failure": errors.HeaderMACError,
    "header failure": errors.HeaderError,
    "payload failure": errors.PayloadError,
    "armor failure": errors.ArmorError,
}


def load(path):
    raw = path.read_bytes()
    head, _, body = raw.partition(b"\n\n")
    fields = {}
    identities = []
    for line in head.decode().splitlines():
        key, _, value = line.partition(": ")
        if key == "identity":
            identities.append(parse_identity(value))
        elif key == "passphrase":
            identities.append(passphrase.Identity(value))
        else:
            fields[key] = value
    if fields.get("compressed") == "zlib":
        body = zlib.decompress(body)
    return fields, identities, body


def test_every_vector_is_present():
    # 96 in the set this suite was written against, 143 at CCTV's HEAD.
    assert len(FILES) >= 96


def decrypt_vector(src, fields, identities, armored=None) -> bytes:
    """Return what the decryptor released, after checking the outcome."""
    expected = OUTCOMES[fields["expect"]]
    released = bytearray()
    error = None
    try:
        reader = agefast.decryptor(src, identities, armored=armored)
        while chunk := reader.read(10_000):
            released += chunk
    except agefast.DecryptError as e:
        error = e
    if expected is None:
        assert error is None, f"unexpected {type(error).__name__}: {error}"
    else:
        assert isinstance(error, expected), f"expected {expected.__name__}, got {error!r}"
    return bytes(released)


# Detecting armor by the first bytes gives a header failure where Go's armor
# reader, told the file is armored, gives an armor failure.
DETECTED = {"armor_garbage_leading": errors.HeaderError}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_vector(path):
    fields, identities, body = load(path)
    if path.name in DETECTED:
        with pytest.raises(DETECTED[path.name]):
            agefast.decryptor(Trickle(body), identities).read()
        return
    released = decrypt_vector(Trickle(body), fields, identities)
    # Vectors without a `payload` release nothing at all.
    assert hashlib.sha256(released).hexdigest() == fields.get("payload", hashlib.sha256().hexdigest())


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_vector_as_declared(path):
    # Told what the vector declares (armored: yes, or binary), as Go's
    # testkit reads them: every outcome is the expected one.
    fields, identities, body = load(path)
    released = decrypt_vector(Trickle(body), fields, identities, armored=fields.get("armored") == "yes")
    assert hashlib.sha256(released).hexdigest() == fields.get("payload", hashlib.sha256().hexdigest())


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_vector_seekable(path):
    fields, identities, body = load(path)
    armored = fields.get("armored") == "yes"
    released = decrypt_vector(io.BytesIO(body), fields, identities, armored)
    streamed = decrypt_vector(Trickle(body), fields, identities, armored)
    if fields["expect"] == "success":
        assert released == streamed
    else:
        assert streamed.startswith(released)
