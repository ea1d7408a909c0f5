"""The native post-quantum hybrid recipient type, "mlkem768x25519" (age v1.3).

It is HPKE (RFC 9180) with the MLKEM768-X25519 KEM of draft-ietf-hpke-pq (the
X-Wing construction), HKDF-SHA256 and ChaCha20Poly1305. An identity is a
32-byte seed, expanded with SHAKE256 into an ML-KEM-768 seed and an X25519
scalar, as filippo.io/hpke-pq does.
"""

import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric import mlkem, x25519

from ..format.bech32key import Bech32Key
from ..errors import HeaderError, IdentityError, RecipientError
from ..format.grammar import Stanza, b64encode, single_argument
from ..primitives import hpke_wrap_file_key

RECIPIENT_HRP = "age1pq"
IDENTITY_HRP = "AGE-SECRET-KEY-PQ-"
STANZA_TYPE = "mlkem768x25519"
_INFO = b"age-encryption.org/mlkem768x25519"
_MLKEM_PUBLIC_SIZE = 1184
PUBLIC_KEY_SIZE = _MLKEM_PUBLIC_SIZE + 32
ENC_SIZE = 1088 + 32
_SUITE = hpke.Suite(hpke.KEM.MLKEM768_X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
# A post-quantum file must not also be openable by a classical key alone.
POSTQUANTUM_LABELS = frozenset({"postquantum"})


class Recipient(Bech32Key):
    """An MLKEM768-X25519 public key, `age1pq1...`."""

    HRP = RECIPIENT_HRP
    ERROR = RecipientError
    KIND = "mlkem768x25519 recipient"
    labels = POSTQUANTUM_LABELS

    def __init__(self, public_key: bytes):
        if len(public_key) != PUBLIC_KEY_SIZE:
            raise RecipientError(f"an mlkem768x25519 recipient is {PUBLIC_KEY_SIZE} bytes")
        try:
            self._key = hpke.MLKEM768X25519PublicKey(
                mlkem.MLKEM768PublicKey.from_public_bytes(public_key[:_MLKEM_PUBLIC_SIZE]),
                x25519.X25519PublicKey.from_public_bytes(public_key[_MLKEM_PUBLIC_SIZE:]),
            )
        except ValueError:
            # cryptography says "An ML-KEM-768 public key is 1184 bytes long" of one that is, whose coefficients
            # are out of range (FIPS 203's modulus check), as of an X25519 key of the wrong size.
            raise RecipientError("invalid mlkem768x25519 recipient: not an ML-KEM-768 and X25519 public key pair") from None
        self._raw = bytes(public_key)

    def __repr__(self) -> str:
        return f"<pq.Recipient {str(self)[:24]}...>"

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One mlkem768x25519 stanza: the file key sealed to this key with HPKE."""
        enc, body = hpke_wrap_file_key(_SUITE, self._key, file_key, _INFO, ENC_SIZE, STANZA_TYPE)
        return [Stanza(STANZA_TYPE, [b64encode(enc)], body)]


class Identity(Bech32Key):
    """An MLKEM768-X25519 seed, `AGE-SECRET-KEY-PQ-1...`."""

    HRP = IDENTITY_HRP
    ERROR = IdentityError
    KIND = "mlkem768x25519 secret key"
    # age 1.3 tries its own identity types (X25519, hybrid, scrypt) before any other, whatever the order given
    # (agefast.header.open_file_key)
    tried_first = True

    def __init__(self, seed: bytes):
        if len(seed) != 32:
            raise IdentityError("an mlkem768x25519 identity is a 32-byte seed")
        expanded = hashlib.shake_256(seed).digest(96)
        kem = mlkem.MLKEM768PrivateKey.from_seed_bytes(expanded[:64])
        dh = x25519.X25519PrivateKey.from_private_bytes(expanded[64:])
        self._key = hpke.MLKEM768X25519PrivateKey(kem, dh)
        self._dh = dh
        self._raw = bytes(seed)
        self._public = kem.public_key().public_bytes_raw() + dh.public_key().public_bytes_raw()

    @classmethod
    def generate(cls) -> "Identity":
        """A new random seed."""
        return cls(os.urandom(32))

    def __repr__(self) -> str:
        return "<pq.Identity>"

    def to_public(self) -> Recipient:
        """The recipient (public key) that files for this identity are encrypted to."""
        return Recipient(self._public)

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        """The file key from the first mlkem768x25519 stanza that opens with this key, or None.

        A malformed stanza (or a low-order X25519 share) raises HeaderError."""
        for s in stanzas:
            if s.type != STANZA_TYPE:
                continue
            enc = single_argument(s, ENC_SIZE, "encapsulated key")
            try:
                # The X-Wing combiner would go on with the all-zero secret of
                # a low-order X25519 share (the last 32 bytes of enc); age's
                # X25519 refuses it, which makes it a malformed stanza rather
                # than a key mismatch.
                self._dh.exchange(x25519.X25519PublicKey.from_public_bytes(enc[-32:]))
            except ValueError:
                raise HeaderError("invalid mlkem768x25519 stanza: low-order X25519 share") from None
            try:
                return _SUITE.decrypt(enc + s.body, self._key, info=_INFO)
            except InvalidTag:
                continue
        return None
