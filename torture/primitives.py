"""The few cryptographic building blocks the forger and the reference share,
taken straight from cryptography so that neither depends on agefast."""

import base64
import binascii
import hmac as _hmac
import struct

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

CHUNK_SIZE = 64 * 1024
TAG_SIZE = 16
SEALED_CHUNK_SIZE = CHUNK_SIZE + TAG_SIZE
NONCE_SIZE = 16
FILE_KEY_SIZE = 16
X25519_INFO = b"age-encryption.org/v1/X25519"
SCRYPT_LABEL = b"age-encryption.org/v1/scrypt"


def hkdf(ikm: bytes, salt: bytes, info: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt or None, info).derive(ikm)


def header_mac(file_key: bytes, mac_input: bytes) -> bytes:
    return _hmac.digest(hkdf(file_key, b"", b"header"), mac_input, "sha256")


def payload_key(file_key: bytes, nonce: bytes) -> bytes:
    return hkdf(file_key, nonce, b"payload")


def chunk_nonce(index: int, final: bool) -> bytes:
    return struct.pack(">QB", index, 1 if final else 0).rjust(12, b"\0")


def x25519_public(scalar: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(scalar).public_key().public_bytes_raw()


def x25519_shared(scalar: bytes, point: bytes) -> bytes | None:
    """The shared secret, or None when it is all zero (a low-order point)."""
    try:
        return X25519PrivateKey.from_private_bytes(scalar).exchange(X25519PublicKey.from_public_bytes(point))
    except ValueError:
        return None


def x25519_wrap_key(shared: bytes, share: bytes, recipient: bytes) -> bytes:
    return hkdf(shared, share + recipient, X25519_INFO)


def seal(key: bytes, plaintext: bytes) -> bytes:
    """Wrap with the all-zero nonce: each wrap key is used exactly once."""
    return ChaCha20Poly1305(key).encrypt(bytes(12), plaintext, None)


def b64(data: bytes) -> bytes:
    return base64.b64encode(data).rstrip(b"=")


_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def loosened(text: bytes) -> bytes:
    """`text`, base64 whose last character carries unused bits, with the lowest of them set (flipped):
    the same bytes to a lenient decoder, a non-canonical encoding to a strict one."""
    return text[:-1] + _ALPHABET[_ALPHABET.index(text[-1:]) ^ 1:][:1]


def b64_strict(text: bytes) -> bytes | None:
    """Decode canonical unpadded base64, or None."""
    if b"=" in text or b"\r" in text or b"\n" in text or len(text) % 4 == 1:
        return None
    try:
        data = base64.b64decode(text + b"=" * (-len(text) % 4), validate=True)
    except binascii.Error:
        return None
    return data if b64(data) == text else None
