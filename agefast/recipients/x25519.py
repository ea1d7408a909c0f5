"""The native X25519 recipient type (age-encryption.org/v1, "X25519")."""

import os
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from . import sodium
from ..format.bech32key import Bech32Key
from ..errors import EncryptError, HeaderError, IdentityError, RecipientError
from ..format.grammar import Stanza, b64encode, single_argument
from ..primitives import hkdf, unwrap_file_key, wrap_file_key

RECIPIENT_HRP = "age"
IDENTITY_HRP = "AGE-SECRET-KEY-"
STANZA_TYPE = "X25519"
_INFO = b"age-encryption.org/v1/X25519"


def _native_binding() -> Any:
    """cryptography's Rust OpenSSL binding, where it has the X25519 functions
    and the FIPS question used below, else None.

    X25519PrivateKey.generate / from_private_bytes and
    X25519PublicKey.from_public_bytes import cryptography's whole OpenSSL
    backend (its RSA, EC and padding modules: 7-8 ms in a fresh process, more
    than the rest of a small file's encryption) only to ask whether FIPS mode
    is on, where X25519 is refused, and then call these functions. agefast
    asks that question itself (_native) and calls them directly; a
    cryptography without them gets the public constructors.
    """
    try:
        from cryptography.hazmat.bindings._rust import openssl

        for name in ("generate_key", "from_private_bytes", "from_public_bytes"):
            getattr(openssl.x25519, name)
        getattr(openssl, "is_fips_enabled")
    except (ImportError, AttributeError):
        return None
    return openssl


_NATIVE = _native_binding()


def _native() -> Any:
    """The X25519 functions to call, or None for the public constructors
    (which then raise UnsupportedAlgorithm in FIPS mode)."""
    if _NATIVE is None or _NATIVE.is_fips_enabled():
        return None
    return _NATIVE.x25519


def _generate() -> X25519PrivateKey:
    native = _native()
    return X25519PrivateKey.generate() if native is None else native.generate_key()


def _private_key(raw: bytes) -> X25519PrivateKey:
    native = _native()
    return X25519PrivateKey.from_private_bytes(raw) if native is None else native.from_private_bytes(raw)


def _public_key(raw: bytes) -> X25519PublicKey:
    native = _native()
    return X25519PublicKey.from_public_bytes(raw) if native is None else native.from_public_bytes(raw)


# libsodium (PyNaCl) multiplies the base point in 17 us where OpenSSL, which
# runs its ladder for it, takes 34 (Zen 4; 23 against 43 on Zen 2): a fifth of
# a 1 KiB encryption. Importing it costs 3.5-4.5 ms, more than a process that
# encrypts a few files gains (the command encrypts one), so a process turns
# to it once its wraps would have saved about that much: SODIUM_AFTER wraps.
# Whatever number of files a process encrypts, its multiplications and the
# import cost it at most twice what the better of the two choices would have.
# An identity's exchange stays with OpenSSL: libsodium's ladder took 47 us
# where OpenSSL's took 39 on Zen 2, and saved 0.7 us on Zen 4
# (benchmarks/HISTORY.md).
SODIUM_AFTER = 256
_wraps = 0   # this process's wraps so far, up to SODIUM_AFTER


def _sodium_bindings() -> Any:
    """PyNaCl's bindings once this process has made SODIUM_AFTER wraps, else None."""
    global _wraps
    if _wraps < SODIUM_AFTER:
        _wraps += 1
        return None
    return sodium.bindings()


def _sodium_share_and_secret(libsodium: Any, scalar: bytes, public: bytes) -> tuple[bytes, bytes]:
    """The share of the ephemeral `scalar` and its shared secret with `public`."""
    share: bytes = libsodium.crypto_scalarmult_base(scalar)
    try:
        secret: bytes = libsodium.crypto_scalarmult(scalar, public)
    except RuntimeError:
        # libsodium refuses the low-order points, whose products are all
        # zero: the same points OpenSSL refuses (_shared_secret).
        raise EncryptError("X25519 key is a low-order point") from None
    return share, secret


def _shared_secret(private: X25519PrivateKey, public: X25519PublicKey, error: type[Exception]) -> bytes:
    try:
        return private.exchange(public)
    except ValueError:
        # OpenSSL refuses an all-zero shared secret, which is what a
        # low-order point yields; age requires aborting in that case.
        raise error("X25519 key is a low-order point") from None


class Recipient(Bech32Key):
    """An X25519 public key, `age1...`."""

    HRP = RECIPIENT_HRP
    ERROR = RecipientError
    KIND = "X25519 recipient"
    labels: frozenset[str] = frozenset()

    def __init__(self, public_key: bytes):
        if len(public_key) != 32:
            raise RecipientError("malformed X25519 recipient: not 32 bytes")
        self._raw = bytes(public_key)
        # cryptography's key, made by the first wrap and kept: making it took
        # 4 us of each 1 KiB encryption to the same recipient (2026-12-03, Zen 2).
        self._key: X25519PublicKey | None = None

    def __repr__(self) -> str:
        return f"<x25519.Recipient {self}>"

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One X25519 stanza: the file key wrapped for this key, through a fresh ephemeral share."""
        share, secret = self._share_and_secret()
        wrap_key = hkdf(secret, share + self._raw, _INFO)
        return [Stanza(STANZA_TYPE, [b64encode(share)], wrap_file_key(wrap_key, file_key))]

    def _share_and_secret(self) -> tuple[bytes, bytes]:
        """A fresh ephemeral share and its shared secret with this key."""
        libsodium = _sodium_bindings()   # never in FIPS mode (agefast.recipients.sodium)
        if libsodium is not None:
            return _sodium_share_and_secret(libsodium, os.urandom(32), self._raw)
        if self._key is None:
            self._key = _public_key(self._raw)
        ephemeral = _generate()
        return ephemeral.public_key().public_bytes_raw(), _shared_secret(ephemeral, self._key, EncryptError)


class Identity(Bech32Key):
    """An X25519 private key, `AGE-SECRET-KEY-1...`."""

    HRP = IDENTITY_HRP
    ERROR = IdentityError
    KIND = "X25519 secret key"
    # age 1.3 tries its own identity types (X25519, hybrid, scrypt) before any other, whatever the order given
    # (agefast.header.open_file_key)
    tried_first = True

    def __init__(self, private_key: bytes):
        if len(private_key) != 32:
            raise IdentityError("malformed X25519 secret key: not 32 bytes")
        self._key = _private_key(private_key)
        self._raw = bytes(private_key)
        self._public = self._key.public_key().public_bytes_raw()

    @classmethod
    def generate(cls) -> "Identity":
        """A new random secret key."""
        return cls(os.urandom(32))

    def __repr__(self) -> str:
        return f"<x25519.Identity for {self.to_public()}>"

    def to_public(self) -> Recipient:
        """The recipient (public key) that files for this identity are encrypted to."""
        return Recipient(self._public)

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        """The file key from the first X25519 stanza that opens with this key, or None.

        A malformed X25519 stanza (or a low-order share) raises HeaderError."""
        for s in stanzas:
            if s.type != STANZA_TYPE:
                continue
            share = single_argument(s, 32, "share")
            secret = _shared_secret(self._key, _public_key(share), HeaderError)
            file_key = unwrap_file_key(hkdf(secret, share + self._public, _INFO), s.body)
            if file_key is not None:
                return file_key
        return None
