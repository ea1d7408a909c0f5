"""p256tag and mlkem768p256tag: stanzas opened by test-only decryptors.

agefast only encrypts to tagged recipients (their identities live in hardware
plugins), so these tests hold the private keys themselves and decrypt with
HPKE by hand. Files written by pyrage (rage) go through the same decryptors,
which checks agefast's stanzas, tags and hand-built KEM against another
implementation.
"""

import pyrage
import pytest
from cryptography.hazmat.primitives import hpke, serialization
from cryptography.hazmat.primitives.asymmetric import ec, mlkem
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

import agefast
from agefast.format import bech32
from agefast import tag, tagpq, x25519
from agefast.format.grammar import b64decode


def _uncompressed(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


class P256TagIdentity:
    """Decrypts p256tag stanzas for one P-256 private key."""

    def __init__(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.recipient = tag.Recipient.from_public_key(self.key.public_key())

    def unwrap(self, stanzas):
        suite = hpke.Suite(hpke.KEM.P256, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
        for s in stanzas:
            if s.type != "p256tag":
                continue
            assert len(s.args) == 2 and len(s.body) == 32
            enc = b64decode(s.args[1])
            assert b64decode(s.args[0]) == tag.stanza_tag(b"age-encryption.org/p256tag", enc, self.recipient._raw)
            return suite.decrypt(enc + s.body, self.key, info=b"age-encryption.org/p256tag")
        return None


class HybridTagIdentity:
    """Decrypts mlkem768p256tag stanzas for one ML-KEM-768 + P-256 key pair."""

    def __init__(self):
        self.kem = mlkem.MLKEM768PrivateKey.generate()
        self.p256 = ec.generate_private_key(ec.SECP256R1())
        self.public = self.kem.public_key().public_bytes_raw() + _uncompressed(self.p256)
        self.recipient = tagpq.Recipient(self.public)

    def unwrap(self, stanzas):
        for s in stanzas:
            if s.type != "mlkem768p256tag":
                continue
            enc = b64decode(s.args[1])
            assert len(enc) == 1088 + 65 and len(s.body) == 32
            assert b64decode(s.args[0]) == tag.stanza_tag(b"age-encryption.org/mlkem768p256tag", enc, self.public[1184:])
            ct_p256 = enc[1088:]
            ss_p256 = self.p256.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), ct_p256))
            secret = tagpq.kem_shared_secret(self.kem.decapsulate(enc[:1088]), ss_p256, ct_p256, self.public[1184:])
            key, nonce = tagpq.key_schedule(secret)
            return ChaCha20Poly1305(key).decrypt(nonce, s.body, None)
        return None


@pytest.mark.parametrize("identity_class, module", [(P256TagIdentity, "tag"), (HybridTagIdentity, "tagpq")])
def test_round_trip_and_pyrage_agree(identity_class, module, make_plaintext):
    identity = identity_class()
    text = str(identity.recipient)
    theirs = getattr(pyrage, module).Recipient.from_str(text)
    assert str(theirs) == text
    plaintext = make_plaintext(100_000)
    for encrypted in (agefast.encrypt(plaintext, [identity.recipient]), pyrage.encrypt(plaintext, [theirs])):
        assert agefast.decrypt(encrypted, [identity]) == plaintext
    assert agefast.parse_recipients(text) == [identity.recipient]


def test_labels():
    classic = x25519.Identity.generate().to_public()
    p256 = P256TagIdentity()
    hybrid = HybridTagIdentity()
    agefast.encrypt(b"x", [classic, p256.recipient])
    with pytest.raises(agefast.EncryptError, match="post-quantum"):
        agefast.encrypt(b"x", [classic, hybrid.recipient])
    encrypted = agefast.encrypt(b"pq only", [hybrid.recipient, agefast.pq.Identity.generate().to_public()])
    assert agefast.decrypt(encrypted, [hybrid]) == b"pq only"


class Labelled:
    """A recipient with `labels`, recording whether it was asked to wrap."""

    def __init__(self, *labels):
        self.labels = frozenset(labels)
        self.wrapped = False

    def wrap(self, file_key):
        self.wrapped = True
        return x25519.Identity.generate().to_public().wrap(file_key)


def test_labels_are_compared_as_each_recipient_is_wrapped_in_age_s_words():
    # As age's encryptHdr: the second recipient refused, the third is never wrapped (a plugin never run).
    later = Labelled()
    pq = agefast.pq.Identity.generate().to_public()
    with pytest.raises(agefast.EncryptError) as refused:
        agefast.encrypt(b"x", [pq, x25519.Identity.generate().to_public(), later])
    assert not later.wrapped
    assert str(refused.value) == (
        "incompatible recipients: can't mix post-quantum and classic recipients, or the file would be vulnerable "
        "to quantum computers (Cannot encrypt to a recipient with labels 'postquantum' alongside a recipient "
        "with no labels)")
    # The other recipient's labels named as they are: this had said "no labels".
    with pytest.raises(agefast.EncryptError, match="labels 'postquantum' alongside a recipient with labels 'foo'"):
        agefast.encrypt(b"x", [Labelled("foo"), pq])


@pytest.mark.parametrize("module, text, fragment", [
    (tag, "badprefix", "malformed p256tag recipient"),
    (tag, bech32.encode("age1tag", bytes(33)), "invalid P-256 public key"),
    (tag, bech32.encode("age1tag", b"\2" + bytes(31)), "33-byte compressed P-256 point"),
    (tag, bech32.encode("age1tagpq", bytes(33)), "unexpected prefix 'age1tagpq'"),
    (tagpq, bech32.encode("age1tagpq", bytes(1248)), "is 1249 bytes"),
    (tagpq, bech32.encode("age1tagpq", bytes(1249)), "invalid P-256 public key"),
    # 1184 bytes of 0xff: coefficients out of range. It had been said to be of the wrong size.
    (agefast.pq, bech32.encode("age1pq", b"\xff" * 1216), "not an ML-KEM-768 and X25519 public key pair"),
    (tagpq, bech32.encode("age1tagpq", b"\xff" * 1184 + bytes(65)), "not an ML-KEM-768 public key"),
])
def test_bad_recipients(module, text, fragment):
    with pytest.raises(agefast.RecipientError, match=fragment) as e:
        module.Recipient.from_str(text)
    assert "\n" not in str(e.value)
