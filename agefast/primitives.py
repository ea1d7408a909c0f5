"""The few primitives age is built from: HKDF-SHA-256, HMAC-SHA-256, and
ChaCha20-Poly1305 with a zero nonce for wrapping file keys.

A fixed all-zero nonce is safe for wrapping because every wrap key is derived
fresh (from an ephemeral share or a random salt) and used exactly once.
"""

from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

if TYPE_CHECKING:
    from cryptography.hazmat.primitives import hpke  # only the types: its users import it

from .errors import EncryptError

FILE_KEY_SIZE = 16
_ZERO_NONCE = bytes(12)
# One hash descriptor for every HKDF and HMAC (it holds no state): a new one
# per call cost 0.2 us of each HMAC's 2.8 (2026-12-03, Zen 2).
_SHA256 = hashes.SHA256()


def passphrase_bytes(passphrase: str | bytes) -> bytes:
    """A passphrase's bytes: a str's UTF-8, its lone surrogates the bytes they stand for (surrogateescape: how
    Python reads what is not UTF-8 from a terminal or the environment). age takes any bytes.

    TypeError for anything else: bytes() of an int is that many zero bytes, a passphrase anyone could guess.
    """
    if isinstance(passphrase, str):
        return passphrase.encode("utf-8", "surrogateescape")
    try:
        return memoryview(passphrase).tobytes()
    except TypeError:
        raise TypeError(f"a passphrase must be a str or bytes, not {type(passphrase).__name__}") from None


def hkdf(ikm: bytes, salt: bytes, info: bytes) -> bytes:
    return HKDF(_SHA256, 32, salt or None, info).derive(ikm)


# HMAC from cryptography, not the standard library's hmac: that one loads
# its own OpenSSL binding (_hashlib), about 3 ms of every command's start-up
# (a process importing cryptography's primitives and making one HMAC: 51.2 ms
# with hmac, 48.3 ms with this).
def _hmac_sha256(key: bytes, data: bytes) -> HMAC:
    mac = HMAC(key, _SHA256)
    mac.update(data)
    return mac


def hmac_sha256(key: bytes, data: bytes) -> bytes:
    return _hmac_sha256(key, data).finalize()


def hmac_sha256_matches(key: bytes, data: bytes, expected: bytes) -> bool:
    """Whether `expected` is the HMAC-SHA-256 of `data`, compared in constant time."""
    try:
        _hmac_sha256(key, data).verify(expected)
    except InvalidSignature:
        return False
    return True


def wrap_file_key(wrap_key: bytes, file_key: bytes) -> bytes:
    return ChaCha20Poly1305(wrap_key).encrypt(_ZERO_NONCE, file_key, None)


def hpke_wrap_file_key(suite: "hpke.Suite", public_key: Any, file_key: bytes, info: bytes, enc_size: int,
                       what: str) -> tuple[bytes, bytes]:
    """HPKE SealBase of the file key: (encapsulated key, body)."""
    try:
        sealed = suite.encrypt(file_key, public_key, info=info)
    except ValueError as e:
        raise EncryptError(f"{what} encapsulation failed: {e}") from None
    return sealed[:enc_size], sealed[enc_size:]


def unwrap_file_key(wrap_key: bytes, body: bytes) -> bytes | None:
    """The file key, or None if the body does not authenticate under wrap_key."""
    try:
        return ChaCha20Poly1305(wrap_key).decrypt(_ZERO_NONCE, body, None)
    except InvalidTag:
        return None
