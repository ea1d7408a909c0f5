"""Secrets compared in Python go through a constant-time comparison: identities (their private keys) and a
new passphrase with its confirmation. (The header MAC is cryptography's HMAC.verify, the ssh stanzas' tags
hmac.compare_digest already.)"""

import hmac

import pytest

from agefast.cli import key_flags
from agefast.recipients import pq, x25519


@pytest.fixture
def compared(monkeypatch):
    """The pairs hmac.compare_digest was given, as it answers."""
    seen = []
    real = hmac.compare_digest

    def recording(a, b):
        seen.append((bytes(a), bytes(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    return seen


@pytest.mark.parametrize("kind", [x25519.Identity, pq.Identity], ids=["x25519", "pq"])
def test_constant_time_identity_equality(compared, kind):
    a, b = kind.generate(), kind.generate()
    same = kind.from_str(str(a))
    assert a == same and a != b and a != a.to_public()
    assert compared == [(same._raw, a._raw), (b._raw, a._raw)]


def test_constant_time_passphrase_confirmation(compared):
    assert key_flags._same_passphrase("pässword", "pässword")
    assert not key_flags._same_passphrase("pässword", "passwörd")
    assert compared == [("pässword".encode(), "pässword".encode()), ("pässword".encode(), "passwörd".encode())]
