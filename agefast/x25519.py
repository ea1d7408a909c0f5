"""The native X25519 recipient type (age-encryption.org/v1, "X25519")."""

import os

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from . import bech32
from .errors import EncryptError, HeaderError, IdentityError, RecipientError
from .format import Stanza, b64decode, b64encode
from .primitives import FILE_KEY_SIZE, hkdf, unwrap_file_key, wrap_file_key

RECIPIENT_HRP = "age"
IDENTITY_HRP = "AGE-SECRET-KEY-"
STANZA_TYPE = "X25519"
_INFO = b"age-encryption.org/v1/X25519"


def _shared_secret(private: X25519PrivateKey, public: bytes, error: type[Exception]) -> bytes:
    try:
        return private.exchange(X25519PublicKey.from_public_bytes(public))
    except ValueError:
        # OpenSSL refuses an all-zero shared secret, which is what a
        # low-order point yields; age requires aborting in that case.
        raise error("X25519 key is a low-order point") from None


class Recipient:
    """An X25519 public key, `age1...`."""

    labels: frozenset = frozenset()

    def __init__(self, public_key: bytes):
        if len(public_key) != 32:
            raise RecipientError("an X25519 recipient is 32 bytes")
        self._public = bytes(public_key)

    @classmethod
    def from_str(cls, s: str) -> "Recipient":
        try:
            hrp, data = bech32.decode(s)
        except bech32.Bech32Error as e:
            raise RecipientError(f"malformed X25519 recipient: {e}") from None
        if hrp != RECIPIENT_HRP:
            raise RecipientError(f"malformed X25519 recipient: unexpected prefix {hrp!r}")
        if len(data) != 32:
            raise RecipientError("malformed X25519 recipient: wrong length")
        return cls(data)

    def __str__(self) -> str:
        return bech32.encode(RECIPIENT_HRP, self._public)

    def __repr__(self) -> str:
        return f"<x25519.Recipient {self}>"

    def __eq__(self, other) -> bool:
        return isinstance(other, Recipient) and other._public == self._public

    def __hash__(self) -> int:
        return hash(self._public)

    def wrap(self, file_key: bytes) -> list[Stanza]:
        ephemeral = X25519PrivateKey.generate()
        share = ephemeral.public_key().public_bytes_raw()
        secret = _shared_secret(ephemeral, self._public, EncryptError)
        wrap_key = hkdf(secret, share + self._public, _INFO)
        return [Stanza(STANZA_TYPE, [b64encode(share)], wrap_file_key(wrap_key, file_key))]


class Identity:
    """An X25519 private key, `AGE-SECRET-KEY-1...`."""

    def __init__(self, private_key: bytes):
        if len(private_key) != 32:
            raise IdentityError("an X25519 identity is 32 bytes")
        self._key = X25519PrivateKey.from_private_bytes(private_key)
        self._private = bytes(private_key)
        self._public = self._key.public_key().public_bytes_raw()

    @classmethod
    def generate(cls) -> "Identity":
        return cls(os.urandom(32))

    @classmethod
    def from_str(cls, s: str) -> "Identity":
        try:
            hrp, data = bech32.decode(s)
        except bech32.Bech32Error as e:
            raise IdentityError(f"malformed secret key: {e}") from None
        if hrp != IDENTITY_HRP:
            raise IdentityError(f"malformed secret key: unknown type {hrp!r}")
        if len(data) != 32:
            raise IdentityError("malformed secret key: wrong length")
        return cls(data)

    def __str__(self) -> str:
        return bech32.encode(IDENTITY_HRP, self._private)

    def __repr__(self) -> str:
        return f"<x25519.Identity for {self.to_public()}>"

    def to_public(self) -> Recipient:
        return Recipient(self._public)

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        for s in stanzas:
            if s.type != STANZA_TYPE:
                continue
            if len(s.args) != 1:
                raise HeaderError("invalid X25519 stanza: wrong number of arguments")
            try:
                share = b64decode(s.args[0])
            except ValueError:
                raise HeaderError("invalid X25519 stanza: malformed share") from None
            if len(share) != 32:
                raise HeaderError("invalid X25519 stanza: share is not 32 bytes")
            if len(s.body) != FILE_KEY_SIZE + 16:
                raise HeaderError("invalid X25519 stanza: body is not 32 bytes")
            secret = _shared_secret(self._key, share, HeaderError)
            file_key = unwrap_file_key(hkdf(secret, share + self._public, _INFO), s.body)
            if file_key is not None:
                return file_key
        return None
