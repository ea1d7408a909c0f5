"""The mlkem768p256tag recipient type (age v1.3): the post-quantum tagged recipient.

Like p256tag (see tag.py) it is meant for identities held in hardware and
served by plugins, so agefast only encrypts to it. The stanza is HPKE
(RFC 9180, base mode) with the MLKEM768-P256 hybrid KEM of draft-ietf-hpke-pq,
HKDF-SHA256 and ChaCha20Poly1305; the tag hashes the P-256 half of the recipient only.

cryptography's hpke module has no MLKEM768-P256 KEM, so it is built here from
cryptography's ML-KEM-768, P-256 ECDH, SHA3-256 and HKDF, following the draft:
the KEM shared secret is SHA3-256(ss_mlkem || ss_p256 || ct_p256 || pk_p256 ||
"MLKEM768-P256"). The tests check it against pyrage's (rage's) implementation.
"""

import hashlib

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, mlkem
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from ..format.bech32key import Bech32Key
from ..errors import RecipientError
from ..format.grammar import Stanza, b64encode
from ..primitives import hmac_sha256
from .tag import load_p256, stanza_tag

RECIPIENT_HRP = "age1tagpq"
STANZA_TYPE = "mlkem768p256tag"
MLKEM_PUBLIC_SIZE = 1184
P256_UNCOMPRESSED_SIZE = 65
PUBLIC_KEY_SIZE = MLKEM_PUBLIC_SIZE + P256_UNCOMPRESSED_SIZE
MLKEM_CIPHERTEXT_SIZE = 1088
POSTQUANTUM_LABELS = frozenset({"postquantum"})
_INFO = b"age-encryption.org/mlkem768p256tag"
_KEM_LABEL = b"MLKEM768-P256"
# RFC 9180 suite_id: "HPKE" || KEM id (MLKEM768-P256, 0x0050) || KDF id
# (HKDF-SHA256, 0x0001) || AEAD id (ChaCha20Poly1305, 0x0003).
_SUITE_ID = b"HPKE\x00\x50\x00\x01\x00\x03"


def _labeled_extract(salt: bytes, label: bytes, ikm: bytes) -> bytes:
    # HKDF-Extract with an empty salt is HMAC under a zero key of hash length.
    return hmac_sha256(salt or bytes(32), b"HPKE-v1" + _SUITE_ID + label + ikm)


def _labeled_expand(prk: bytes, label: bytes, info: bytes, length: int) -> bytes:
    labeled = length.to_bytes(2, "big") + b"HPKE-v1" + _SUITE_ID + label + info
    return HKDFExpand(hashes.SHA256(), length, labeled).derive(prk)


def kem_shared_secret(ss_mlkem: bytes, ss_p256: bytes, ct_p256: bytes, pk_p256: bytes) -> bytes:
    return hashlib.sha3_256(ss_mlkem + ss_p256 + ct_p256 + pk_p256 + _KEM_LABEL).digest()


def key_schedule(shared_secret: bytes) -> tuple[bytes, bytes]:
    """RFC 9180 base-mode KeySchedule for info _INFO: (AEAD key, base nonce)."""
    context = b"\x00" + _labeled_extract(b"", b"psk_id_hash", b"") + _labeled_extract(b"", b"info_hash", _INFO)
    secret = _labeled_extract(shared_secret, b"secret", b"")
    return _labeled_expand(secret, b"key", context, 32), _labeled_expand(secret, b"base_nonce", context, 12)


class Recipient(Bech32Key):
    """An ML-KEM-768 + P-256 public key, `age1tagpq1...`; encryption only."""

    HRP = RECIPIENT_HRP
    ERROR = RecipientError
    KIND = "mlkem768p256tag recipient"
    labels = POSTQUANTUM_LABELS

    def __init__(self, public_key: bytes):
        if len(public_key) != PUBLIC_KEY_SIZE:
            raise RecipientError(f"an mlkem768p256tag recipient is {PUBLIC_KEY_SIZE} bytes")
        try:
            self._mlkem = mlkem.MLKEM768PublicKey.from_public_bytes(public_key[:MLKEM_PUBLIC_SIZE])
        except ValueError:
            # the length is right (checked above): cryptography's "is 1184 bytes long" would say otherwise of a key
            # whose coefficients are out of range (FIPS 203's modulus check), as pq.Recipient says
            raise RecipientError("invalid mlkem768p256tag recipient: not an ML-KEM-768 public key") from None
        self._p256 = load_p256(public_key[MLKEM_PUBLIC_SIZE:], RecipientError)
        self._raw = bytes(public_key)

    def __repr__(self) -> str:
        return f"<tagpq.Recipient {str(self)[:24]}...>"

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One mlkem768p256tag stanza: the file key sealed to this key with HPKE, and its tag."""
        ss_mlkem, ct_mlkem = self._mlkem.encapsulate()
        ephemeral = ec.generate_private_key(ec.SECP256R1())
        ct_p256 = ephemeral.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        ss_p256 = ephemeral.exchange(ec.ECDH(), self._p256)
        pk_p256 = self._raw[MLKEM_PUBLIC_SIZE:]
        key, nonce = key_schedule(kem_shared_secret(ss_mlkem, ss_p256, ct_p256, pk_p256))
        # The first (and only) message of the HPKE context: sequence number 0,
        # so the nonce is the base nonce itself.
        body = ChaCha20Poly1305(key).encrypt(nonce, file_key, None)
        enc = ct_mlkem + ct_p256
        tag = stanza_tag(_INFO, enc, pk_p256)
        return [Stanza(STANZA_TYPE, [b64encode(tag), b64encode(enc)], body)]
