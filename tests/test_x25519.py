"""agefast.x25519 reaches cryptography's X25519 functions directly (no
OpenSSL backend import); where they are missing or FIPS mode is on it uses
the public constructors, with the same results."""

import os
import pickle

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

import agefast
from agefast import errors
from agefast.recipients import x25519
from agefast.format.grammar import b64encode


class _Fips:
    """cryptography's native module as it is in FIPS mode; its X25519 functions must not be reached."""

    @staticmethod
    def is_fips_enabled():
        return True

    @property
    def x25519(self):
        raise AssertionError("the native X25519 functions were called in FIPS mode")


ROUTES = {"native": x25519._NATIVE, "no native functions": None, "FIPS mode": _Fips()}


@pytest.fixture(params=list(ROUTES))
def route(request, monkeypatch):
    monkeypatch.setattr(x25519, "_NATIVE", ROUTES[request.param])
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
    monkeypatch.setattr(x25519, "_NATIVE", ROUTES["native"])
    assert agefast.decrypt(sealed, [agefast.x25519.Identity(identity._raw)]) == b"across"
    sealed = agefast.encrypt(b"back", [identity.to_public()])
    monkeypatch.setattr(x25519, "_NATIVE", ROUTES[route])
    assert agefast.decrypt(sealed, [agefast.x25519.Identity(identity._raw)]) == b"back"


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
