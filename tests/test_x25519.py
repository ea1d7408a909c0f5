"""agefast.x25519 reaches cryptography's X25519 functions directly (no
OpenSSL backend import); where they are missing or FIPS mode is on it uses
the public constructors, with the same results. Past SODIUM_AFTER wraps a
process makes its ephemeral shares with libsodium, again with the same
results; an identity's exchange stays with OpenSSL."""

import os
import pickle
import sys

import pyrage
import pytest
from hypothesis import example, given, strategies as st
from nacl import bindings
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

import agefast
from agefast import errors
from agefast.recipients import sodium, x25519
from agefast.format.grammar import b64encode


class _Fips:
    """cryptography's native module as it is in FIPS mode; its X25519 functions must not be reached."""

    @staticmethod
    def is_fips_enabled():
        return True

    @property
    def x25519(self):
        raise AssertionError("the native X25519 functions were called in FIPS mode")


class _Unreachable:
    def __getattr__(self, name):
        raise AssertionError(f"libsodium's {name} was reached")


ROUTES = {"native": x25519._NATIVE, "no native functions": None, "FIPS mode": _Fips(),
          "libsodium": x25519._NATIVE}


def _take(route, monkeypatch):
    monkeypatch.setattr(x25519, "_NATIVE", ROUTES[route])
    # Every route but libsodium's is before the switch to it; FIPS mode is
    # past it too, and must not reach libsodium there.
    monkeypatch.setattr(x25519, "SODIUM_AFTER", 0 if route in ("libsodium", "FIPS mode") else 1 << 62)
    monkeypatch.setattr(sodium, "_bindings", _Unreachable() if route == "FIPS mode" else None)
    monkeypatch.setattr(sodium, "_fips_mode_or_unknown", lambda: route == "FIPS mode")


@pytest.fixture(params=list(ROUTES))
def route(request, monkeypatch):
    _take(request.param, monkeypatch)
    return request.param


def test_the_native_functions_are_there():
    # Fails if a cryptography release moves them: the command would then
    # quietly pay for the backend again.
    assert x25519._native() is not None


def test_keys_and_shared_secrets_match_the_public_constructors(route):
    raw, peer = os.urandom(32), os.urandom(32)
    key = x25519._private_key(raw)
    public = X25519PrivateKey.from_private_bytes(raw)
    assert key.public_key().public_bytes_raw() == public.public_key().public_bytes_raw()
    peer_public = X25519PrivateKey.from_private_bytes(peer).public_key().public_bytes_raw()
    assert key.exchange(x25519._public_key(peer_public)) == public.exchange(
        X25519PublicKey.from_public_bytes(peer_public))
    assert len(x25519._generate().public_key().public_bytes_raw()) == 32


def test_files_cross_between_the_routes(route, monkeypatch):
    identity = agefast.x25519.Identity.generate()
    sealed = agefast.encrypt(b"across", [identity.to_public()])
    other = "native" if route == "libsodium" else "libsodium"
    _take(other, monkeypatch)
    assert agefast.decrypt(sealed, [agefast.x25519.Identity(identity._raw)]) == b"across"
    sealed = agefast.encrypt(b"back", [identity.to_public()])
    _take(route, monkeypatch)
    assert agefast.decrypt(sealed, [agefast.x25519.Identity(identity._raw)]) == b"back"


def test_files_open_with_pyrage(route):
    identity = agefast.x25519.Identity.generate()
    sealed = agefast.encrypt(b"to pyrage", [identity.to_public()])
    assert pyrage.decrypt(sealed, [pyrage.x25519.Identity.from_str(str(identity))]) == b"to pyrage"


def test_a_key_or_a_body_of_the_wrong_size_is_refused_as_such():
    # A 31-byte key had parsed, and encrypt then failed with a bare ValueError; a body of 31 bytes must be a
    # header failure of its own, not a failed unwrap.
    from agefast.format import bech32
    from agefast.format.grammar import Stanza

    with pytest.raises(errors.RecipientError, match="not 32 bytes"):
        agefast.x25519.Recipient.from_str(bech32.encode("age", bytes(range(31))))
    identity = agefast.x25519.Identity.generate()
    [stanza] = identity.to_public().wrap(bytes(16))
    with pytest.raises(errors.HeaderError, match="body is not 32 bytes"):
        identity.unwrap([Stanza(stanza.type, stanza.args, stanza.body[:31])])


def test_a_low_order_share_is_a_header_failure(route):
    identity = agefast.x25519.Identity.generate()
    head, _, rest = agefast.encrypt(b"x", [identity.to_public()]).partition(b"\n-> X25519 ")
    _, _, body = rest.partition(b"\n")
    forged = head + b"\n-> X25519 " + b64encode(bytes(32)).encode() + b"\n" + body
    with pytest.raises(errors.HeaderError, match="low-order"):
        agefast.decrypt(forged, [identity])


def test_a_recipient_wraps_again_and_pickles_after_wrapping(route):
    # It keeps cryptography's key from its first wrap; each wrap still has
    # a share of its own, and the recipient still pickles as its bytes.
    identity = agefast.x25519.Identity.generate()
    recipient = identity.to_public()
    first, second = (recipient.wrap(bytes(16))[0] for _ in range(2))
    assert first.args != second.args
    copy = pickle.loads(pickle.dumps(recipient))
    assert copy == recipient and str(copy) == str(recipient)
    for r in (recipient, copy):
        assert agefast.decrypt(agefast.encrypt(b"again", [r]), [identity]) == b"again"


def test_a_low_order_recipient_fails_every_wrap(route):
    recipient = agefast.x25519.Recipient(bytes(32))
    for _ in range(2):
        with pytest.raises(errors.EncryptError, match="low-order"):
            agefast.encrypt(b"x", [recipient])


def test_a_process_switches_to_libsodium_after_sodium_after_wraps(monkeypatch):
    monkeypatch.setattr(x25519, "SODIUM_AFTER", 3)
    monkeypatch.setattr(x25519, "_wraps", 0)
    monkeypatch.setattr(sodium, "_bindings", None)
    recipient = agefast.x25519.Identity.generate().to_public()
    for _ in range(3):
        recipient.wrap(bytes(16))
    assert sodium._bindings is None
    recipient.wrap(bytes(16))
    assert sodium._bindings is bindings


def test_an_identity_unwraps_with_openssl_past_the_switch(monkeypatch):
    # libsodium's ladder is slower than OpenSSL's on Zen 2 (agefast.recipients.x25519):
    # unwraps neither reach it nor count towards the switch.
    identity = agefast.x25519.Identity.generate()
    stanzas = identity.to_public().wrap(bytes(16))
    monkeypatch.setattr(x25519, "SODIUM_AFTER", 1)
    monkeypatch.setattr(x25519, "_wraps", 0)
    monkeypatch.setattr(sodium, "_bindings", _Unreachable())
    monkeypatch.setattr(sodium, "_fips_mode_or_unknown", lambda: False)
    for _ in range(3):
        assert identity.unwrap(stanzas) == bytes(16)
    assert x25519._wraps == 0
    monkeypatch.setattr(x25519, "SODIUM_AFTER", 0)
    assert identity.unwrap(stanzas) == bytes(16)
    with pytest.raises(AssertionError, match="libsodium's crypto_scalarmult_base"):
        identity.to_public().wrap(bytes(16))    # where a wrap does reach it


def test_without_pynacl_cryptography_stays(monkeypatch):
    monkeypatch.setattr(x25519, "SODIUM_AFTER", 0)
    monkeypatch.setattr(sodium, "_bindings", None)
    monkeypatch.setitem(sys.modules, "nacl", None)     # what an import of a missing package meets
    identity = agefast.x25519.Identity.generate()
    for _ in range(2):
        assert agefast.decrypt(agefast.encrypt(b"still", [identity.to_public()]), [identity]) == b"still"
    assert sodium._bindings is False


# The points of small order, whose products with a clamped scalar are all
# zero (RFC 7748 section 7; libsodium's list of them): 0, 1, two of order 8,
# p - 1, and p and p + 1, which reduce to 0 and 1.
_P = 2**255 - 19
_LOW_ORDER = [0, 1, 325606250916557431795983626356110631294008115727848805560023387167927233504,
              39382357235489614581723060781553021112529911719440698176882885853963445705823,
              _P - 1, _P, _P + 1]
# The top bit of a point is ignored (RFC 7748): each again with it set.
_REFUSED = _LOW_ORDER + [u + 2**255 for u in _LOW_ORDER]
# And the largest points of each width, which are not of low order.
_EDGES = _REFUSED + [2**255 - 1, 2**256 - 1]


@given(scalar=st.binary(min_size=32, max_size=32),
       point=st.one_of(st.integers(0, 2**256 - 1), st.sampled_from(_EDGES)))
@example(scalar=bytes(32), point=9)
@example(scalar=b"\xff" * 32, point=2**256 - 1)
def test_libsodium_shares_and_secrets_match_cryptographys(scalar, point):
    """Bit for bit with cryptography's X25519, low-order points refused by both, over
    any scalar and any 32 bytes of point (non-canonical and top-bit-set ones too)."""
    public = point.to_bytes(32, "little")
    key = X25519PrivateKey.from_private_bytes(scalar)
    try:
        expected = key.exchange(X25519PublicKey.from_public_bytes(public))
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(errors.EncryptError, match="low-order"):
            x25519._sodium_share_and_secret(bindings, scalar, public)
    else:
        share, secret = x25519._sodium_share_and_secret(bindings, scalar, public)
        assert (share, secret) == (key.public_key().public_bytes_raw(), expected)


def test_every_low_order_point_is_refused():
    # The hypothesis test above may not draw them all.
    for point in _REFUSED:
        with pytest.raises(errors.EncryptError, match="low-order"):
            x25519._sodium_share_and_secret(bindings, os.urandom(32), point.to_bytes(32, "little"))


def test_age_s_own_identity_types_are_tried_first_whatever_the_order_given():
    # age 1.3's Decrypt: X25519, hybrid and scrypt identities before any other (a plugin, an SSH key, an
    # encrypted identity file), so that a file they open runs no plugin and asks for no passphrase.
    tried = []

    class Other:
        def unwrap(self, stanzas):
            tried.append("other")
            return None

    identity = agefast.x25519.Identity.generate()
    sealed = agefast.encrypt(b"x", [identity.to_public()])
    assert agefast.decrypt(sealed, [Other(), identity]) == b"x"
    assert tried == []
    with pytest.raises(agefast.errors.NoIdentityMatchError):
        agefast.decrypt(sealed, [Other(), agefast.x25519.Identity.generate()])
    assert tried == ["other"]
