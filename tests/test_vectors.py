"""The C2SP/CCTV age test vectors, each decrypted through `decryptor`.

Every file in shared/vectors/cctv-age is its own case: the outcome must be the
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
import pathlib
import zlib

import pytest

import agefast
from agefast import errors, passphrase
from agefast.keys import parse_identity
from streams import Trickle

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "vectors" / "cctv-age"
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
    assert len(FILES) == 96


def decrypt_vector(src, fields, identities) -> bytes:
    """Return what the decryptor released, after checking the outcome."""
    expected = OUTCOMES[fields["expect"]]
    released = bytearray()
    error = None
    try:
        reader = agefast.decryptor(src, identities)
        while chunk := reader.read(10_000):
            released += chunk
    except agefast.DecryptError as e:
        error = e
    if expected is None:
        assert error is None, f"unexpected {type(error).__name__}: {error}"
    else:
        assert isinstance(error, expected), f"expected {expected.__name__}, got {error!r}"
    return bytes(released)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_vector(path):
    fields, identities, body = load(path)
    released = decrypt_vector(Trickle(body), fields, identities)
    # Vectors without a `payload` release nothing at all.
    assert hashlib.sha256(released).hexdigest() == fields.get("payload", hashlib.sha256().hexdigest())


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_vector_seekable(path):
    fields, identities, body = load(path)
    released = decrypt_vector(io.BytesIO(body), fields, identities)
    streamed = decrypt_vector(Trickle(body), fields, identities)
    if fields["expect"] == "success":
        assert released == streamed
    else:
        assert streamed.startswith(released)
