"""The p256tag recipient type (age v1.3): encryption to a tagged P-256 key.

Tagged recipients are meant for identities held in hardware (PIV tokens,
secure enclaves) and served by plugins, so agefast only encrypts to them. The
stanza is HPKE (RFC 9180) with DHKEM(P-256, HKDF-SHA256), HKDF-SHA256 and
ChaCha20Poly1305. The 4-byte tag lets a token that asks for a touch or a PIN
per decryption skip stanzas meant for other keys; it lets an observer who
knows the recipient link files to it, which is the price of that.
"""

import hashlib

from cryptography.hazmat.primitives import hpke, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ..format.bech32key import Bech32Key
from ..errors import RecipientError
from ..format.grammar import Stanza, b64encode
from ..primitives import hmac_sha256, hpke_wrap_file_key

RECIPIENT_HRP = "age1tag"
STANZA_TYPE = "p256tag"
_LABEL = b"age-encryption.org/p256tag"
COMPRESSED_SIZE = 33
ENC_SIZE = 65
_SUITE = hpke.Suite(hpke.KEM.P256, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)


def stanza_tag(label: bytes, enc: bytes, recipient_p256: bytes) -> bytes:
    """age's recipient tag: HKDF-Extract-SHA-256(salt=label, ikm=enc || SHA-256(recipient_p256)[:4])[:4].

    `enc` is the whole encapsulated key; `recipient_p256` is the P-256 key
    as the recipient string encodes it (compressed for p256tag, the
    uncompressed tail of the hybrid key for mlkem768p256tag).
    """
    return hmac_sha256(label, enc + hashlib.sha256(recipient_p256).digest()[:4])[:4]


def load_p256(point: bytes, error: type[Exception]) -> ec.EllipticCurvePublicKey:
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError as e:
        raise error(f"invalid P-256 public key: {e}") from None


class Recipient(Bech32Key):
    """A tagged P-256 public key, `age1tag1...`; encryption only."""

    HRP = RECIPIENT_HRP
    ERROR = RecipientError
    KIND = "p256tag recipient"
    labels: frozenset[str] = frozenset()

    def __init__(self, public_key: bytes):
        if len(public_key) != COMPRESSED_SIZE:
            raise RecipientError(f"a p256tag recipient is a {COMPRESSED_SIZE}-byte compressed P-256 point")
        self._key = load_p256(public_key, RecipientError)
        self._raw = bytes(public_key)

    def __repr__(self) -> str:
        return f"<tag.Recipient {self}>"

    @classmethod
    def from_public_key(cls, key: ec.EllipticCurvePublicKey) -> "Recipient":
        """The recipient of a P-256 public key of cryptography's (a hardware token's, say)."""
        return cls(key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint))

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One p256tag stanza: the file key sealed to this key with HPKE, and its tag."""
        enc, body = hpke_wrap_file_key(_SUITE, self._key, file_key, _LABEL, ENC_SIZE, STANZA_TYPE)
        tag = stanza_tag(_LABEL, enc, self._raw)
        return [Stanza(STANZA_TYPE, [b64encode(tag), b64encode(enc)], body)]
