"""The C2SP/CCTV age test vectors, each decrypted through `decryptor`.

Every file in shared/vectors/cctv-age is its own case: the outcome must be the
expected one, by exception class, and the SHA-256 of all plaintext released
before any error must match the vector's `payload`.
"""

import hashlib
import io
import pathlib
import zlib

import pytest

import agefast
from agefast import errors, passphrase
from agefast.keys import parse_identity

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


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_vector(path):
    fields, identities, body = load(path)
    expected = OUTCOMES[fields["expect"]]
    released = hashlib.sha256()
    error = None
    try:
        reader = agefast.decryptor(io.BytesIO(body), identities)
        while chunk := reader.read(10_000):
            released.update(chunk)
    except agefast.DecryptError as e:
        error = e
    if expected is None:
        assert error is None, f"unexpected {type(error).__name__}: {error}"
    else:
        assert isinstance(error, expected), f"expected {expected.__name__}, got {error!r}"
    # Vectors without a `payload` release nothing at all.
    assert released.hexdigest() == fields.get("payload", hashlib.sha256().hexdigest())
